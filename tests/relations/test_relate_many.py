"""``relate_many`` is all or nothing (docs/contract.md §4f): a batch answers what the same
relates one after another would, in one transaction, and a batch any of whose links
would be refused writes nothing and names that link — through Memory, the contract,
the HTTP client, and ``holomem relate`` / ``holomem unrelate``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import (
    ConflictError,
    HolomemError,
    InvalidError,
    LimitError,
    ManualClock,
    Memory,
    Store,
)
from holomem.api.memory.graph import relations
from holomem.client import Client
from tests.cli.run import holomem
from tests.relations.helpers import snapshot
from tests.serve.conftest import API_KEY, start

IDS = ["a1", "a2", "a3", "b1", "nope"]


def fill(memory: Memory) -> None:
    for fid in IDS[:3]:
        memory.remember(f"fact {fid}", id=fid, namespace=["a"])
    memory.remember("fact b1", id="b1", namespace=["b"])
    memory.relate("a1", "a2", "cites", {"w": 1})


links = st.lists(st.fixed_dictionaries({
    "from_id": st.sampled_from(IDS), "to_id": st.sampled_from(IDS),
    "relation": st.sampled_from(["cites", "causes"]),
    "metadata": st.sampled_from([None, {"w": 1}, {"w": 2}])}), min_size=1, max_size=6)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=links)
def test_a_batch_is_the_relates_one_after_another_or_nothing_at_all(
        tmp_path_factory: pytest.TempPathFactory, batch: list[dict[str, Any]]) -> None:
    root = tmp_path_factory.mktemp("m")
    clock = ManualClock(1_000_000)
    with Store.open(root / "one", sync="none") as one, \
            Store.open(root / "each", sync="none") as each:
        many, single = Memory(one, clock=clock), Memory(each, clock=clock)
        fill(many)
        fill(single)
        before = snapshot(many)
        revision = one.stats().revision
        answers, failed = [], None
        for i, link in enumerate(batch):  # the requests are checked first, all of them
            try:
                relations.request(link["from_id"], link["to_id"], link["relation"],
                                  link["metadata"])
            except HolomemError as exc:
                failed = (i, type(exc))
                break
        for i, link in enumerate(batch if failed is None else []):
            try:
                answers.append(single.relate(**link))
            except HolomemError as exc:
                failed = (i, type(exc))
                break
        if failed is None:
            got = many.relate_many(batch)
            assert msgspec.to_builtins(got.results) == msgspec.to_builtins(answers)
            assert got.created == sum(a.created for a in answers)
            assert snapshot(many) == snapshot(single)
            assert one.stats().revision == revision + (1 if got.created else 0)
        else:
            with pytest.raises(failed[1], match=rf"^links\[{failed[0]}\]: "):
                many.relate_many(batch)
            assert snapshot(many) == before and one.stats().revision == revision


def test_a_link_given_twice_with_other_metadata_is_a_conflict(memory: Memory) -> None:
    fill(memory)
    with pytest.raises(ConflictError, match=r"links\[1\].*twice"):
        memory.relate_many([{"from_id": "a2", "to_id": "a3", "relation": "r"},
                            {"fromId": "a2", "toId": "a3", "relation": "r",
                             "metadata": {"x": 1}}])
    twice = memory.relate_many([{"from_id": "a2", "to_id": "a3", "relation": "r"}] * 2)
    assert [r.created for r in twice.results] == [True, False] and twice.created == 1


def test_the_batch_is_bounded_and_checked(memory: Memory) -> None:
    fill(memory)
    one = {"from_id": "a2", "to_id": "a3", "relation": "r"}
    with pytest.raises(LimitError, match=str(relations.MAX_RELATE_MANY)):
        memory.relate_many([one] * (relations.MAX_RELATE_MANY + 1))
    for bad in ([], "a1", [{"from_id": "a2"}], [{**one, "colour": 1}], [7]):
        with pytest.raises(InvalidError):
            memory.relate_many(bad)  # type: ignore[arg-type]
    with pytest.raises(LimitError, match=r"links\[0\]"):
        memory.relate_many([{**one, "metadata": {"x": "y" * 5000}}])


def test_the_contract_the_client_and_the_cli_make_and_remove_links(
        tmp_path: Path, clock: ManualClock) -> None:
    batch = [{"fromId": "a1", "toId": "a3", "relation": "causes", "metadata": {"w": 2}},
             {"fromId": "a2", "toId": "a3", "relation": "cites"}]
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, clock=clock)
        fill(memory)
        answer = memory.call("relateMany", {"links": batch, "namespace": ["a"]})
        assert answer["created"] == 2 and answer["results"][0]["link"]["metadata"] == {"w": 2}
        with pytest.raises(InvalidError, match=r"links\[0\].*different namespaces"):
            memory.call("relateMany", {"links": [{"fromId": "a1", "toId": "b1",
                                                  "relation": "r"}]})
    server = start(tmp_path / "data")
    try:
        with Client(server.url, api_key=API_KEY, tenant="t") as client:
            fill(client)  # type: ignore[arg-type]
            made = client.relate_many([{"from_id": "a1", "to_id": "a3", "relation": "r"}])
            assert made.created == 1 and made.results[0].link.to_id == "a3"
            with pytest.raises(ConflictError, match=r"links\[0\]"):
                client.relate_many([{"from_id": "a1", "to_id": "a2", "relation": "cites"}])
            assert [x.relation for x in client.links("a1").links] == ["cites", "r"]
    finally:
        server.stop()
    store_dir = str(tmp_path / "s")
    done = holomem("relate", store_dir, "a3", "a1", "answers", "--metadata", '{"k": 1}')
    assert done.returncode == 0 and done.stdout.startswith("made"), done.stderr
    again = holomem("relate", store_dir, "a3", "a1", "answers", "--metadata", '{"k": 1}',
                    "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["created"] is False
    other = holomem("relate", store_dir, "a3", "a1", "answers", "--metadata", '{"k": 2}')
    assert other.returncode == 1 and "conflict" in other.stderr
    assert holomem("relate", store_dir, "a3", "b1", "answers").returncode == 2
    gone = holomem("unrelate", store_dir, "a3", "a1", "answers")
    assert gone.returncode == 0 and gone.stdout.startswith("removed"), gone.stderr
    assert holomem("unrelate", store_dir, "a3", "a1", "answers").stdout.startswith("no such")
    with Store.open(tmp_path / "s", sync="none") as store:
        assert [x.relation for x in Memory(store).links("a3", direction="both").links] \
            == ["causes", "cites"]
