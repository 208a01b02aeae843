"""The stored configuration (docs/contract.md §4c): the first Memory records its configuration,
every later Memory and every door applies it, a different one is a conflict unless
``persist=True`` records it, and a custom policy is recorded by name only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import (
    ConflictError,
    HolomemError,
    InvalidError,
    ManualClock,
    Memory,
    MemoryConfig,
    Store,
    UnavailableError,
)
from holomem.api.memory.config import ForgettingConfig
from holomem.api.memory.policies import Links
from holomem.embedders import EmbedderIdentity
from holomem.events import ConfigRecorded
from holomem.projections import vectorindex

LATEST = MemoryConfig(supersession="latest-by-subject")


def supersedes(memory: Memory) -> bool:
    """Whether the configuration in force links facts of one subject."""
    first = memory.remember("Ann lives in Oslo", subject="ann.city")
    second = memory.remember("Ann lives in Rome", subject="ann.city")
    return memory.get(first.id).status == "superseded" and second.superseded == [first.id]


def recorded_events(path: Path) -> list[ConfigRecorded]:
    store = Store.open(path, read_only=True)
    try:
        return [e for _, batch in store.events() for e in batch
                if isinstance(e, ConfigRecorded)]
    finally:
        store.close()


def test_the_first_memory_records_its_configuration_and_a_later_one_applies_it(
        tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path / "s", sync="none") as store:
        Memory(store, LATEST, clock=clock)
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, clock=clock)
        assert memory.config == LATEST
        assert supersedes(memory)


def test_a_memory_without_a_configuration_records_the_defaults_once(
        tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path / "s", sync="none") as store:
        Memory(store, clock=clock)
        Memory(store, clock=clock)
        Memory(store, MemoryConfig(), clock=clock)  # the same: nothing new to record
    assert len(recorded_events(tmp_path / "s")) == 1


def test_a_different_explicit_configuration_is_a_conflict_and_records_nothing(
        tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path / "s", sync="none") as store:
        Memory(store, clock=clock)
        with pytest.raises(ConflictError, match="persist=True"):
            Memory(store, LATEST, clock=clock)
        assert Memory(store, clock=clock).config == MemoryConfig()
    assert len(recorded_events(tmp_path / "s")) == 1


def test_persist_records_the_change_and_it_survives_reopen_and_compaction(
        tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path / "s", sync="none") as store:
        Memory(store, clock=clock)
        memory = Memory(store, LATEST, clock=clock, persist=True)
        assert supersedes(memory)
        store.compact()
    with Store.open(tmp_path / "s", sync="none") as store:
        assert Memory(store, clock=clock).config == LATEST
    assert [json.loads(e.config)["supersession"] for e in recorded_events(tmp_path / "s")] \
        == ["latest-by-subject"]  # compaction keeps only the one in force


def test_initial_applies_only_to_a_store_that_recorded_nothing(
        tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path / "new", sync="none") as store:
        assert Memory(store, initial=LATEST, clock=clock).config == LATEST
    with Store.open(tmp_path / "old", sync="none") as store:
        Memory(store, clock=clock)
        assert Memory(store, initial=LATEST, clock=clock).config == MemoryConfig()


def test_a_follower_applies_the_writers_configuration_and_records_nothing(
        tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path / "s", sync="none") as writer:
        Memory(writer, LATEST, clock=clock)
        with Store.open(tmp_path / "s", read_only=True) as follower:
            assert Memory(follower, clock=clock).config == LATEST
            with pytest.raises(ConflictError):
                Memory(follower, MemoryConfig(), clock=clock)


def test_a_custom_policy_is_recorded_by_name_and_must_be_supplied_again(
        tmp_path: Path, clock: ManualClock) -> None:
    def forget_nothing(memory: Memory, now: int) -> list[str]:
        return []

    custom = MemoryConfig(forgetting="custom:keep-all")
    with Store.open(tmp_path / "s", sync="none") as store:
        Memory(store, custom, clock=clock, policies={"keep-all": forget_nothing})
    events = recorded_events(tmp_path / "s")
    assert json.loads(events[0].config)["forgetting"] == "custom:keep-all"
    with Store.open(tmp_path / "s", sync="none") as store:
        with pytest.raises(InvalidError, match="keep-all"):
            Memory(store, clock=clock)
        memory = Memory(store, clock=clock, policies={"keep-all": forget_nothing})
        assert memory.config.forgetting == "custom:keep-all"


def test_a_custom_supersession_policy_named_in_the_configuration_is_used(
        store: Store, clock: ManualClock) -> None:
    calls: list[int] = []

    def never(*args: object) -> Links:
        calls.append(1)
        return Links([], [])

    memory = Memory(store, MemoryConfig(supersession="custom:never"), clock=clock,
                    policies={"never": never})
    memory.remember("Ann lives in Oslo", subject="ann.city")
    memory.remember("Ann lives in Rome", subject="ann.city")
    assert calls, "the supplied policy was not consulted"
    assert all(f.status == "current" for f in memory.list().facts)


@pytest.mark.parametrize("value", ["custom:", "custom:a b", "Custom:x", "latest"])
def test_a_malformed_policy_name_is_invalid(store: Store, value: str) -> None:
    with pytest.raises(InvalidError):
        Memory(store, {"supersession": value})


def test_policies_must_be_named_callables(store: Store) -> None:
    with pytest.raises(InvalidError):
        Memory(store, policies={"x": 3})  # type: ignore[dict-item]
    with pytest.raises(InvalidError):
        Memory(store, policies=[("x", print)])  # type: ignore[arg-type]


class Toy:
    """An embedder whose identity a test names (every vector the same, ``dim`` wide)."""

    def __init__(self, name: str = "toy", dim: object = 8) -> None:
        self.identity = EmbedderIdentity(name=name, digest="0" * 64, dim=dim,  # type: ignore[arg-type]
                                         normalized=True, pooling="mean", max_tokens=9)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.ones((len(texts), 8), dtype=np.float32)


def nothing(*args: object) -> Any:
    return None


def store_as_it_is(store: Store) -> tuple[int, bytes | None, bytes | None]:
    """What a refused Memory must leave as it was: the revision (no transaction at all),
    the recorded configuration and the recorded embedder identity."""
    return store.read(lambda view: (store.revision, view.state.memory_config,
                                    view.state.embedder))


#: Memory(...) calls each refused, with what refuses them: what they name that cannot be
#: applied is found only after the configuration was decided.
REFUSED: list[tuple[str, dict[str, Any], dict[str, Any], type[HolomemError]]] = [
    ("unknown embedder", {"embedder": "nosuch"}, {}, InvalidError),
    ("custom forgetting not supplied", {"forgetting": "custom:mine"}, {}, InvalidError),
    ("custom supersession not supplied", {"supersession": "custom:mine"},
     {"policies": {"other": nothing}}, InvalidError),
    ("custom consolidation not supplied", {"consolidation": "custom:mine"}, {},
     InvalidError),
    ("custom extractor not supplied", {"entityExtractor": "custom:mine"}, {}, InvalidError),
    ("custom recency not supplied", {"recency": "custom:mine"}, {}, InvalidError),
    ("another embedder's vectors", {"historicalWeight": 0.5}, {"embedder": Toy("other")},
     ConflictError),
    ("an identity outside its limits", {"historicalWeight": 0.5},
     {"embedder": Toy("bad", 0)}, InvalidError),
    ("a name the embedder given disagrees with", {"embedder": "minilm"},
     {"embedder": Toy()}, InvalidError),
]


#: Each refusal over a new store and over one in use (a conflict needs one in use).
CASES = [(fresh, *case) for case in REFUSED for fresh in (True, False)
         if not (fresh and case[3] is ConflictError)]


@pytest.mark.parametrize(("fresh", "label", "config", "kwargs", "error"), CASES,
                         ids=[f"{c[1]}, {'new store' if c[0] else 'in use'}" for c in CASES])
def test_a_refused_memory_records_nothing_and_the_store_opens_as_before(
        store: Store, clock: ManualClock, fresh: bool, label: str, config: dict[str, Any],
        kwargs: dict[str, Any], error: type[HolomemError]) -> None:
    """The configuration was recorded before the checks that refused it: the store
    then held a configuration no Memory could apply, and never opened again."""
    if not fresh:
        Memory(store, LATEST, clock=clock, embedder=Toy()).remember("Ann lives in Oslo")
    before = store_as_it_is(store)
    with pytest.raises(error):
        Memory(store, config, clock=clock, persist=not fresh, **kwargs)
    assert store_as_it_is(store) == before, label
    memory = Memory(store, clock=clock, embedder=Toy())
    assert memory.config == (MemoryConfig() if fresh else LATEST)


def test_approximate_search_without_usearch_records_nothing(
        store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vectorindex, "available", lambda: False)
    with pytest.raises(UnavailableError):
        Memory(store, {"vectorSearch": "approximate", "supersession": "latest-by-subject"},
               clock=clock)
    assert store_as_it_is(store) == (0, None, None)



def test_a_follower_refused_by_a_check_runs_the_checks_once(
        tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower's read answers again when it meets ``unavailable`` (a generation
    replaced under it): the whole configuration check ran 65 times before the follower
    gave up on a library that is simply not installed."""
    monkeypatch.setattr(vectorindex, "available", lambda: True)
    with Store.open(tmp_path / "s", sync="none") as writer:
        Memory(writer, {"vectorSearch": "approximate"}, clock=clock)
    calls: list[None] = []

    def missing() -> bool:
        calls.append(None)
        return False

    monkeypatch.setattr(vectorindex, "available", missing)
    with Store.open(tmp_path / "s", read_only=True) as follower, \
            pytest.raises(UnavailableError, match="usearch"):
        Memory(follower, clock=clock)
    assert len(calls) == 1


_NAMES = st.sampled_from(["none", "custom:mine"])
_ATTEMPT = st.fixed_dictionaries({}, optional={
    "supersession": st.sampled_from(["none", "latest-by-subject", "custom:mine"]),
    "forgetting": st.sampled_from(["none", "expired-ttl", "custom:gone"]),
    "recency": _NAMES, "consolidation": _NAMES,
    "entityExtractor": st.sampled_from(["none", "regex", "custom:mine"]),
    "historicalWeight": st.sampled_from([0.5, 1.0]),
    "embedder": st.sampled_from(["nosuch", "toy"]),
})


@settings(max_examples=150, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(used=st.sampled_from(["new", "configured", "embedded"]),
       config=st.none() | _ATTEMPT,
       supplied=st.lists(st.sampled_from(["mine", "gone"]), unique=True),
       persist=st.booleans(), reembed=st.booleans(),
       embedder=st.sampled_from([None, "toy", "other", "wide", "bad"]))
def test_any_refused_memory_leaves_the_store_as_it_was(
        tmp_path_factory: pytest.TempPathFactory, used: str, config: dict[str, Any] | None,
        supplied: list[str], persist: bool, reembed: bool, embedder: str | None) -> None:
    embedders = {"toy": Toy(), "other": Toy("other"), "wide": Toy("wide", 16),
                 "bad": Toy("bad", True)}
    with Store.open(tmp_path_factory.mktemp("r") / "s", sync="none") as store:
        clock = ManualClock(1_000)
        if used != "new":
            first = Memory(store, LATEST, clock=clock,
                           embedder=Toy() if used == "embedded" else None)
            first.remember("Ann lives in Oslo", embedding=[1.0] * 8)
        before = store_as_it_is(store)
        try:
            Memory(store, config, clock=clock, persist=persist, reembed=reembed,
                   policies={name: nothing for name in supplied},
                   embedder=embedders[embedder] if embedder else None)
        except HolomemError:
            assert store_as_it_is(store) == before


def test_a_recorded_configuration_this_version_refuses_is_named_and_persist_replaces_it(
        store: Store, clock: ManualClock) -> None:
    """A store written before names were matched whole may have recorded
    "expired-ttl\n", which applied no forgetting without a word: opening it now says
    the recorded configuration is refused, and persist=True still records another."""
    store.commit(lambda view: [ConfigRecorded(config=b'{"forgetting": "expired-ttl\\n"}',
                                              time=1)])
    with pytest.raises(InvalidError, match="recorded configuration is refused"):
        Memory(store, clock=clock)
    with pytest.raises(InvalidError, match="persist=True"):
        Memory(store, LATEST, clock=clock)
    assert Memory(store, LATEST, clock=clock, persist=True).config == LATEST
    assert Memory(store, clock=clock).config == LATEST


#: A configuration a newer version recorded: a field this one does not know.
NEWER = b'{"supersession": "latest-by-subject", "newField": {"x": 1}}'


def test_a_configuration_a_newer_version_recorded_is_refused_even_with_persist(
        store: Store, clock: ManualClock) -> None:
    """Persist replaces a recorded configuration that fails a check of this version, but
    not one with a field it does not know: that one was written by a newer version,
    which the store still belongs to (docs/platforms.md). The error says so and shows
    the recorded JSON, and nothing is recorded."""
    store.commit(lambda view: [ConfigRecorded(config=NEWER, time=1)])
    before = store_as_it_is(store)
    for config, persist in ((None, False), (LATEST, False), (LATEST, True)):
        with pytest.raises(InvalidError, match="newer holomem") as refused:
            Memory(store, config, clock=clock, persist=persist)
        assert NEWER.decode() in refused.value.message
        assert store_as_it_is(store) == before


def test_a_refused_recorded_configuration_is_shown_bounded_in_the_error(
        store: Store, clock: ManualClock) -> None:
    """``holomem config STORE`` refuses such a store too, so the error itself shows
    what is recorded: its first 2,000 characters."""
    long = b'{"forgetting": "expired-ttl\\n", "pad": "' + b"p" * 5000 + b'"}'
    for recorded in (b'{"forgetting": "expired-ttl\\n"}', long):
        store.commit(lambda view, r=recorded: [ConfigRecorded(config=r, time=1)])
        with pytest.raises(InvalidError) as refused:
            Memory(store, clock=clock)
        assert recorded[:2000].decode() in refused.value.message
        assert len(refused.value.message) < 2600


def test_two_memories_racing_over_a_new_store_record_one_configuration(
        tmp_path: Path, clock: ManualClock) -> None:
    import threading

    outcomes: list[object] = []
    with Store.open(tmp_path / "s", sync="none") as store:
        def start(config: MemoryConfig) -> None:
            try:
                outcomes.append(Memory(store, config, clock=clock).config)
            except ConflictError as exc:
                outcomes.append(exc)

        threads = [threading.Thread(target=start, args=(c,))
                   for c in (LATEST, MemoryConfig(forgetting=ForgettingConfig(
                       expired_for_longer_than_ms=1)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sum(isinstance(o, ConflictError) for o in outcomes) == 1
    assert len(recorded_events(tmp_path / "s")) == 1


def test_the_cli_applies_the_stored_configuration_and_config_set_records_one(
        tmp_path: Path) -> None:
    path = tmp_path / "s"
    config_file = tmp_path / "latest.json"
    config_file.write_text(json.dumps({"supersession": "latest-by-subject"}))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "holomem", *args], capture_output=True,
                              text=True, timeout=120)

    assert cli("config", str(path), "--set", str(config_file)).returncode == 0
    # No --config: the CLI applies the stored supersession, as the server would.
    for city in ("Oslo", "Rome"):
        out = cli("remember", str(path), "--text", f"Ann lives in {city}",
                  "--subject", "ann.city", "--json")
        assert out.returncode == 0, out.stderr
    latest = json.loads(out.stdout)
    assert latest["remembered"][0]["superseded"]
    shown = cli("config", str(path))
    assert json.loads(shown.stdout)["supersession"] == "latest-by-subject"
    # An explicit different configuration is refused, and says how to change it.
    other = tmp_path / "none.json"
    other.write_text("{}")
    refused = cli("remember", str(path), "--text", "x", "--config", str(other))
    assert refused.returncode != 0 and "conflict" in refused.stderr
    # A recorded configuration this version refuses is shown in the error (holomem
    # config would refuse it too, so the error does not send the user there).
    with Store.open(path, sync="none") as store:
        store.commit(lambda view: [ConfigRecorded(config=NEWER, time=2)])
    for args in (("list", str(path)), ("config", str(path))):
        refused = cli(*args)
        assert refused.returncode != 0 and NEWER.decode() in refused.stderr
        assert "shows the recorded one" not in refused.stderr
