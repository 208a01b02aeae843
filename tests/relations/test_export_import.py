"""Relations move with their facts (docs/contract.md §4d): an export carries every live
link, and an import makes them again exactly — the same ``links`` (order, times,
metadata) and the same ``why`` walks, in every namespace — whether it is read in one
call, in batches of one, or through the HTTP client's bounded requests; a link whose
end is not in the store after the import is reported, not silently dropped; exports
written before relations were exported (format 1) still import."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import ConflictError, InvalidError, LimitError, ManualClock, Memory, Store
from holomem.api.memory.graph import relations as graph_relations
from holomem.client import Client
from tests.cli.run import holomem
from tests.relations.helpers import snapshot, workload
from tests.serve.conftest import API_KEY, start


def walks(memory: Memory, ids: list[str]) -> list[bytes]:
    """Every why-walk from every stored fact, as bytes, at now and at past times."""
    out = []
    for fid in ids:
        if memory.get(fid) is None:
            continue
        for known_at in (None, 1_000_500, 1_003_000):
            ns = memory.get(fid).namespace  # type: ignore[union-attr]
            out.append(msgspec.json.encode(memory.why(fid, max_hops=3, known_at=known_at)))
            out.append(msgspec.json.encode(memory.links(fid, direction="both",
                                                        known_at=known_at, namespace=ns)))
    return out


def copy_into(root: Path, name: str, records: list[dict[str, Any]], clock: ManualClock,
              **kwargs: Any) -> tuple[Store, Memory]:
    store = Store.open(root / name, sync="none")
    memory = Memory(store, clock=clock)
    memory.import_([json.dumps(r) for r in records], **kwargs)
    return store, memory


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), batch=st.sampled_from([1, 7, 1000]))
def test_links_and_why_walks_survive_export_and_import_exactly(
        tmp_path_factory: pytest.TempPathFactory, seed: int, batch: int) -> None:
    root = tmp_path_factory.mktemp("x")
    clock = ManualClock(1_000_000)
    with Store.open(root / "source", sync="none") as source:
        src = Memory(source, clock=clock)
        ids = workload(src, clock, seed, facts=24, steps=120)
        records = list(src.export())
        store, dst = copy_into(root, "target", records, clock, batch_size=batch)
        with store:
            assert snapshot(dst) == snapshot(src)
            assert walks(dst, ids) == walks(src, ids)
            assert list(dst.export()) == records
            # Again: every fact and link is there, so nothing is written.
            revision = store.stats().revision
            again = dst.import_(records)
            assert (again.imported, again.relations, again.unresolved_relations) == (0, 0, 0)
            assert store.stats().revision == revision


def test_a_namespace_export_carries_its_own_links(memory: Memory, tmp_path: Path,
                                                  clock: ManualClock) -> None:
    for fid, ns in (("a1", ["u1"]), ("a2", ["u1", "s"]), ("a3", ["u1", "s"]),
                    ("b1", ["u2"]), ("b2", ["u2"])):
        memory.remember(f"fact {fid}", id=fid, namespace=ns)
    memory.relate("a2", "a3", "cites", {"w": 1})
    memory.relate("b1", "b2", "causes")
    records = list(memory.export(["u1"]))
    assert [r["id"] for r in records] == ["a1", "a2", "a3"]
    assert [(x["fromId"], x["toId"]) for r in records for x in r["relations"]] \
        == [("a2", "a3")]
    store, dst = copy_into(tmp_path, "t", records, clock)
    with store:
        assert dst.links("a2", namespace=["u1", "s"]).links \
            == memory.links("a2", namespace=["u1", "s"]).links
        assert dst.get("b1") is None


def test_the_links_keep_the_order_they_were_made_in_not_the_order_facts_were(
        memory: Memory, tmp_path: Path, clock: ManualClock) -> None:
    for i in range(5):
        memory.remember(f"fact {i}", id=f"f{i}")
    # Made to the newest fact first, then to older ones: a record-by-record import
    # would make them in another order.
    memory.relate("f0", "f4", "cites")
    memory.relate("f0", "f1", "cites")
    memory.relate("f2", "f0", "cites")
    records = list(memory.export())
    for batch in (1, 1000):
        store, dst = copy_into(tmp_path, f"t{batch}", records, clock, batch_size=batch)
        with store:
            assert dst.links("f0", direction="both") == memory.links("f0", direction="both")


def test_a_relation_whose_end_is_missing_is_reported_not_written(memory: Memory) -> None:
    record = {"id": "a", "text": "Ann lives in Rome", "ingestTime": 5,
              "relations": [{"fromId": "a", "toId": "gone", "relation": "cites",
                             "time": 5}]}
    report = memory.import_([record])
    assert (report.imported, report.relations, report.unresolved_relations) == (1, 0, 1)
    assert memory.links("a", direction="both").links == []


def test_a_relation_to_a_fact_already_in_the_target_is_made(memory: Memory) -> None:
    memory.remember("already here", id="old")
    record = {"id": "new", "text": "arrives", "ingestTime": 5,
              "relations": [{"fromId": "new", "toId": "old", "relation": "cites",
                             "time": 7, "metadata": {"w": 2}}]}
    report = memory.import_([record])
    assert (report.relations, report.unresolved_relations) == (1, 0)
    [made] = memory.links("new").links
    assert (made.to_id, made.time, made.metadata) == ("old", 7, {"w": 2})


def test_format_1_exports_still_import(memory: Memory) -> None:
    line = json.dumps({"id": "a", "text": "Ann lives in Rome", "ingestTime": 5,
                       "format": 1, "ttlMs": None})
    assert memory.import_([line]).imported == 1
    assert memory.get("a").text == "Ann lives in Rome"  # type: ignore[union-attr]


@pytest.mark.parametrize(("relation", "message"), [
    ({"fromId": "x", "toId": "y", "relation": "r", "time": 1}, "does not touch"),
    ({"fromId": "a", "toId": "a", "relation": "r", "time": 1}, "itself"),
    ({"fromId": "a", "toId": "b", "relation": "", "time": 1}, "relation"),
    ({"fromId": "a", "toId": "b", "relation": "r", "time": -1}, "epoch"),
    ({"fromId": "a", "toId": "b", "relation": "r", "time": 1, "colour": 1}, "colour"),
])
def test_a_malformed_relation_is_invalid_with_its_line_and_nothing_is_written(
        memory: Memory, store: Store, relation: dict[str, Any], message: str) -> None:
    good = {"id": "b", "text": "Bob", "ingestTime": 1}
    bad = {"id": "a", "text": "Ann", "ingestTime": 2, "relations": [relation]}
    revision = store.stats().revision
    with pytest.raises(InvalidError, match=f"line 2.*{message}"):
        memory.import_([good, bad])
    assert store.stats().revision == revision


def test_a_relation_there_with_other_metadata_is_a_conflict(memory: Memory) -> None:
    memory.remember("Ann", id="a")
    memory.remember("Bob", id="b")
    memory.relate("a", "b", "knows", {"since": 1})
    records = list(memory.export())
    memory.unrelate("a", "b", "knows")
    memory.relate("a", "b", "knows", {"since": 2})
    with pytest.raises(ConflictError, match="other metadata"):
        memory.import_(records)


@pytest.mark.parametrize("batch", [1, 2, 100])
@pytest.mark.parametrize("bad", ["namespaces", "conflict", "limit"])
def test_an_import_stopped_by_a_relation_makes_none_of_its_relations(
        memory: Memory, monkeypatch: pytest.MonkeyPatch, bad: str, batch: int) -> None:
    for fid in ("a", "b", "c", "d"):
        memory.remember(f"fact {fid}", id=fid)
    memory.remember("elsewhere", id="e", namespace=["other"])
    memory.relate("a", "d", "knows", {"since": 1})
    if bad == "limit":
        monkeypatch.setattr(graph_relations, "MAX_LINKS_PER_FACT", 3)
    last = {"namespaces": {"fromId": "a", "toId": "e", "relation": "r"},
            "conflict": {"fromId": "a", "toId": "d", "relation": "knows",
                         "metadata": {"since": 2}},
            "limit": {"fromId": "a", "toId": "d", "relation": "r"}}[bad]
    made = [{"fromId": "a", "toId": "b", "relation": "r", "time": 5, "order": 0},
            {"fromId": "a", "toId": "c", "relation": "r", "time": 6, "order": 1},
            {"time": 7, "order": 2, **last}]
    error = {"namespaces": InvalidError, "conflict": ConflictError, "limit": LimitError}[bad]
    before = snapshot(memory)
    with pytest.raises(error, match=r"relations\[2\]"):  # whatever the transactions
        memory.import_([], relations=made, batch_size=batch)
    assert snapshot(memory) == before
    del made[2]  # without it, the same import makes them
    assert memory.import_([], relations=made, batch_size=batch).relations == 2


def test_the_cli_export_and_import_carry_relations(tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path / "src", sync="none") as store:
        memory = Memory(store, clock=clock)
        memory.remember("Ann met Bob", id="a", namespace=["u"])
        memory.remember("Bob met Cy", id="b", namespace=["u"])
        memory.relate("b", "a", "follows", {"w": 1})
        expected = snapshot(memory)
    out = tmp_path / "all.jsonl"
    assert holomem("export", str(tmp_path / "src"), "--output", str(out)).returncode == 0
    loaded = holomem("import", str(tmp_path / "dst"), str(out))
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout)["relations"] == 1
    with Store.open(tmp_path / "dst", sync="none") as store:
        assert snapshot(Memory(store, clock=clock)) == expected


def test_the_http_client_imports_relations_exactly_however_the_records_are_cut(
        tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path / "src", sync="none") as store:
        src = Memory(store, clock=clock)
        ids = workload(src, clock, seed=7, facts=24, steps=120)
        records = list(src.export())
        expected = snapshot(src)
        assert sum(len(r["relations"]) for r in records) > 10
    server = start(tmp_path / "data")
    try:
        with Client(server.url, api_key=API_KEY, tenant="moved") as client:
            report = client.import_(records, batch_size=3)  # eight requests of records
            assert report.imported == len(records) == len(expected) <= len(ids)
            assert report.relations == sum(len(r["relations"]) for r in records)
            assert list(client.export(page_size=5)) == records
            for fid, links in expected.items():
                got = client.links(fid, direction="both").links
                assert [(x.from_id, x.to_id, x.relation, x.time, x.metadata)
                        for x in got] == links
    finally:
        server.stop()
