"""The embedder hook (docs/contract.md §4e): facts and queries without a vector are embedded, a
caller's vector wins, the store pins the embedder's identity (another one is a
conflict until ``reembed()`` rewrites every vector, resumably), and without an
embedder nothing changes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import msgspec
import numpy as np
import numpy.typing as npt
import pytest

from holomem import ConflictError, InvalidError, ManualClock, Memory, MemoryConfig, Store
from holomem.api.memory.config import FusionConfig
from holomem.api.memory.embedding.embedder import identity_json
from holomem.embedders import EmbedderIdentity
from holomem.events import EmbedderRecorded

DIM = 8
#: Words that mean the same thing to the fake model, so that meaning is testable
#: without one: each group is one direction.
GROUPS = [("job", "works", "nurse", "profession"), ("city", "lives", "oslo", "home"),
          ("drink", "tea", "coffee", "likes")]


class Fake:
    """A deterministic embedder: the sum of its words' group directions, plus a little
    of a hash of the whole text (so two texts are never the same vector)."""

    def __init__(self, version: str = "1", fail_after: int | None = None) -> None:
        self.identity = EmbedderIdentity(name="fake", digest=version * 64, dim=DIM,
                                         normalized=True, pooling="mean", max_tokens=64)
        self.calls: list[int] = []
        self.fail_after = fail_after
        self.version = version

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise RuntimeError("the model went away")
        self.calls.append(len(texts))
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().replace("?", "").split():
                for g, group in enumerate(GROUPS):
                    if word in group:
                        out[i, g] += 1.0
            digest = hashlib.sha256((self.version + text).encode()).digest()
            out[i, 3:] = np.frombuffer(digest[:5], dtype=np.uint8) / 2550.0
            out[i] /= np.linalg.norm(out[i])
        return out


def vector_of(embedder: Fake, text: str) -> list[float]:
    return [float(v) for v in embedder.embed([text])[0]]


def written(memory: Memory) -> dict[str, list[float] | None]:
    """Each fact's vector as written (``get`` gives the unit vector search uses)."""
    return {r["text"]: r["embedding"] for r in memory.export()}


def test_remember_embeds_what_brings_no_vector_and_a_callers_vector_wins(
        store: Store, clock: ManualClock) -> None:
    fake = Fake()
    memory = Memory(store, clock=clock, embedder=fake)
    plain_text = "She works as a nurse"
    plain = memory.remember(plain_text)
    own = [1.0, 0, 0, 0, 0, 0, 0, 0]
    given = memory.remember("Ann lives in Oslo", embedding=own)
    assert written(memory) == {"She works as a nurse": vector_of(Fake(), plain_text),
                               "Ann lives in Oslo": own}
    assert plain.id and given.id


def test_remember_many_embeds_in_one_batch(store: Store, clock: ManualClock) -> None:
    fake = Fake()
    memory = Memory(store, clock=clock, embedder=fake)
    memory.remember_many([{"text": f"fact {i}"} for i in range(20)]
                         + [{"text": "with a vector", "embedding": [1.0] * DIM}])
    assert fake.calls == [20]


def test_recall_embeds_the_query_and_finds_meaning_without_shared_words(
        store: Store, clock: ManualClock) -> None:
    memory = Memory(store, clock=clock, embedder=Fake())
    memory.remember("She works as a nurse")
    memory.remember("Ann lives in Oslo")
    memory.remember("Bob likes tea")
    assert memory.recall("what is her profession?", k=1)[0].text == "She works as a nurse"
    # A Memory without it cannot name a model that is not built in: lexical, warned.
    assert Memory(store, clock=clock).embedder is None
    # The contract's recall takes text only and embeds it too.
    answer = memory.call("recall", {"query": "home", "k": 1})
    assert answer["results"][0]["fact"]["text"] == "Ann lives in Oslo"


def test_the_identity_is_pinned_and_another_one_is_a_conflict(
        tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path / "s", sync="none") as store:
        Memory(store, clock=clock, embedder=Fake("1")).remember("She works as a nurse")
        store.compact()
    with Store.open(tmp_path / "s", sync="none") as store:
        with pytest.raises(ConflictError, match="reembed"):
            Memory(store, clock=clock, embedder=Fake("2"))
        assert Memory(store, clock=clock, embedder=Fake("1")).recall("job")


def test_reembed_rewrites_every_vector_in_place_and_pins_the_new_identity(
        tmp_path: Path, clock: ManualClock) -> None:
    texts = [f"fact number {i} about tea" for i in range(23)]
    with Store.open(tmp_path / "s", sync="none") as store:
        old = Memory(store, clock=clock, embedder=Fake("1"))
        ids = [r.id for r in old.remember_many([{"text": t} for t in texts])]
        old.forget({"ids": [ids[5]]})
        order = [f.id for f in old.list().facts]
        new = Memory(store, clock=clock, embedder=Fake("2"), reembed=True)
        with pytest.raises(ConflictError, match="reembed"):
            new.recall("tea")  # not before its vectors are in
        assert new.reembed(batch_size=4) == 22
        assert [f.id for f in new.list().facts] == order
        with pytest.raises(ConflictError):
            old.recall("tea")  # the old model's queries would not match any more
        store.compact()
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, clock=clock, embedder=Fake("2"))
        assert [f.id for f in memory.list().facts] == order
        assert all(vec == vector_of(Fake("2"), text) for text, vec in written(memory).items())


def test_a_reembed_cut_short_goes_on_where_it_stopped(tmp_path: Path,
                                                      clock: ManualClock) -> None:
    with Store.open(tmp_path / "s", sync="none") as store:
        Memory(store, clock=clock, embedder=Fake("1")).remember_many(
            [{"text": f"fact {i}"} for i in range(30)])
        failing = Fake("2", fail_after=3)
        with pytest.raises(RuntimeError):
            Memory(store, clock=clock, embedder=failing, reembed=True).reembed(batch_size=5)
    with Store.open(tmp_path / "s", sync="none") as store:
        resumed = Fake("2")
        memory = Memory(store, clock=clock, embedder=resumed, reembed=True)
        assert memory.reembed(batch_size=5) == 15  # the 15 the first run did not reach
        assert all(vec == vector_of(Fake("2"), text) for text, vec in written(memory).items())
        memory.remember("one more")  # pinned now: no conflict


@pytest.mark.parametrize("go", ["back", "on"])
def test_a_stopped_reembed_says_it_is_under_way_and_how_to_finish_it_or_go_back(
        store: Store, clock: ManualClock, go: str) -> None:
    """Opening with the embedder a stopped re-embed started from said its vectors came
    "from 'fake' (digest 1111…), not 'fake' (digest 1111…)"; the message now names the
    re-embed, its target, and both ways out, and each way out works."""
    Memory(store, clock=clock, embedder=Fake("1")).remember_many(
        [{"text": f"fact {i}"} for i in range(30)])
    with pytest.raises(RuntimeError):
        Memory(store, clock=clock, embedder=Fake("2", fail_after=2),
               reembed=True).reembed(batch_size=5)
    for version, role in (("1", "go back"), ("2", "finish it")):
        with pytest.raises(ConflictError) as info:
            Memory(store, clock=clock, embedder=Fake(version))
        message = info.value.message
        assert "re-embed" in message and "under way" in message, message
        assert "digest 222222222222" in message and role in message, message
        assert ", not " not in message, message  # (the old message's contradiction)
    revision = store.revision
    chosen = Fake("1" if go == "back" else "2")
    assert Memory(store, clock=clock, embedder=chosen, reembed=True).reembed() > 0
    assert store.revision > revision
    memory = Memory(store, clock=clock, embedder=chosen)  # no conflict: one model again
    assert all(vec == vector_of(chosen, text) for text, vec in written(memory).items())


def _identity(**changes: object) -> EmbedderIdentity:
    fields: dict[str, object] = {"name": "fake", "digest": "1" * 64, "dim": DIM,
                                 "normalized": True, "pooling": "mean", "max_tokens": 64}
    return EmbedderIdentity(**{**fields, **changes})  # type: ignore[arg-type]


class Pinned(Fake):
    """A Fake whose identity says what a test makes it say (its vectors stay DIM wide)."""

    def __init__(self, identity: EmbedderIdentity) -> None:
        super().__init__()
        self.identity = identity


#: Identities no store can be pinned to: each field's type and limits.
BAD_IDENTITIES = [
    {"dim": 0}, {"dim": -3}, {"dim": "16"}, {"dim": 10**12}, {"dim": 2**70}, {"dim": True},
    {"dim": 8193}, {"dim": 8.0}, {"name": ""}, {"name": 3}, {"name": "x" * 257},
    {"name": "a\nb"}, {"digest": ""}, {"digest": None}, {"digest": "d" * 257},
    {"pooling": 3}, {"pooling": "p" * 257}, {"normalized": "yes"}, {"normalized": 1},
    {"max_tokens": 0}, {"max_tokens": True}, {"max_tokens": 2**31}, {"max_tokens": "64"},
    {"name": "t\ud800"}, {"digest": "\udfff"}, {"pooling": "\udc80"},
]


@pytest.mark.parametrize("changes", BAD_IDENTITIES, ids=[repr(c)[:40] for c in BAD_IDENTITIES])
def test_an_identity_outside_its_limits_is_invalid_and_nothing_is_recorded(
        store: Store, clock: ManualClock, changes: dict[str, object]) -> None:
    """EmbedderIdentity's constructor checks nothing: dim=0 (or "16", or 10**12) was
    recorded, pinning the store to an embedder that can never work, and dim=True gave
    a raw TypeError at the first remember."""
    revision = store.revision
    with pytest.raises(InvalidError, match=f"identity.{next(iter(changes))}"):
        Memory(store, clock=clock, embedder=Pinned(_identity(**changes)))
    assert store.revision == revision
    assert store.read(lambda view: view.state.embedder) is None
    Memory(store, clock=clock, embedder=Fake()).remember("She works as a nurse")


@pytest.mark.parametrize("changes", [{"dim": 1}, {"dim": 8192}, {"name": "n" * 256},
                                     {"digest": "d" * 256}, {"pooling": ""},
                                     {"max_tokens": 2**31 - 1}, {"normalized": False}])
def test_an_identity_at_its_limits_is_recorded(store: Store, clock: ManualClock,
                                               changes: dict[str, object]) -> None:
    identity = _identity(**changes)
    Memory(store, clock=clock, embedder=Pinned(identity))
    recorded = store.read(lambda view: view.state.embedder)
    assert recorded is not None and msgspec.json.decode(recorded,
                                                        type=EmbedderIdentity) == identity


#: Identities outside today's limits that an earlier version recorded without a check
#: (a remote model's embedder with no weights digest and no token limit known).
OLD_IDENTITIES = [{"digest": ""}, {"max_tokens": 0}, {"pooling": "", "digest": ""},
                  {"dim": 8.0}, {"name": "n" * 300}]


@pytest.mark.parametrize("pending", [False, True], ids=["recorded", "re-embed target"])
@pytest.mark.parametrize("changes", OLD_IDENTITIES, ids=[repr(c)[:40] for c in OLD_IDENTITIES])
def test_a_store_an_earlier_version_pinned_outside_the_limits_opens_with_its_embedder(
        tmp_path: Path, clock: ManualClock, changes: dict[str, object], pending: bool) -> None:
    """The limits apply to an identity about to be recorded: one the store recorded
    already (as its embedder, or as the target of a re-embed under way) is accepted
    as it is, so a store an earlier version wrote stays usable with its own embedder;
    a new store still refuses that identity."""
    identity = _identity(**changes)
    with Store.open(tmp_path / "old", sync="none") as old:
        old.commit(lambda view: [EmbedderRecorded(identity=identity_json(identity),
                                                  pending=pending, time=1)])
        memory = Memory(old, clock=clock, embedder=Pinned(identity), reembed=pending)
        if pending:
            memory.reembed()
        memory.remember("She works as a nurse")
        assert [r.text for r in memory.recall("profession")] == ["She works as a nurse"]
        assert old.read(lambda view: view.state.embedder) == identity_json(identity)
    with Store.open(tmp_path / "new", sync="none") as new, \
            pytest.raises(InvalidError, match="identity"):
        Memory(new, clock=clock, embedder=Pinned(identity))


def test_an_embedder_of_another_dimension_is_a_conflict(store: Store,
                                                       clock: ManualClock) -> None:
    Memory(store, clock=clock).remember("x", embedding=[1.0, 0.0, 0.0])
    with pytest.raises(ConflictError, match="dimension"):
        Memory(store, clock=clock, embedder=Fake())


class Broken(Fake):
    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.full((len(texts), DIM), np.nan, dtype=np.float32)


def test_a_broken_embedder_is_a_clear_error_and_nothing_is_written(
        store: Store, clock: ManualClock) -> None:
    memory = Memory(store, clock=clock, embedder=Broken())
    revision = store.stats().revision
    with pytest.raises(InvalidError, match="not finite"):
        memory.remember("She works as a nurse")
    assert store.stats().revision == revision
    with pytest.raises(InvalidError):
        Memory(store, clock=clock, embedder=object())  # type: ignore[arg-type]


class Answers(Fake):
    """An embedder whose answer is whatever ``answer(n)`` gives for n texts."""

    def __init__(self, answer: object) -> None:
        super().__init__()
        self.answer = answer

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self.answer(len(texts))  # type: ignore[operator, no-any-return]


@pytest.mark.parametrize("answer", [
    lambda n: [["0.5"] * DIM] * n,  # strings
    lambda n: np.ones((n, DIM), dtype=bool),
    lambda n: np.array([["2020-01-01"] * DIM] * n, dtype="datetime64[D]"),
    lambda n: np.full((n, DIM), 1 + 1j),
    lambda n: [[0.5] * DIM, [0.5]] * n,  # ragged
], ids=["strings", "booleans", "dates", "complex", "ragged"])
def test_an_embedders_answer_that_is_not_numbers_is_refused_as_a_callers_would_be(
        store: Store, clock: ManualClock, answer: object) -> None:
    memory = Memory(store, clock=clock, embedder=Answers(answer))
    revision = store.stats().revision
    with pytest.raises(InvalidError, match="the embedder 'fake' returned"):
        memory.remember("She works as a nurse")
    assert store.stats().revision == revision


def test_a_configured_name_must_agree_with_the_embedder_given(store: Store) -> None:
    with pytest.raises(InvalidError, match="minilm"):
        Memory(store, MemoryConfig(embedder="minilm"), embedder=Fake())


def test_import_embeds_records_without_vectors(tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path / "a", sync="none") as a, \
            Store.open(tmp_path / "b", sync="none") as b:
        src = Memory(a, clock=clock)
        src.remember("She works as a nurse")
        dst = Memory(b, clock=clock, embedder=Fake())
        dst.import_(src.export())
        assert written(dst) == {"She works as a nurse": vector_of(Fake(), "She works as a nurse")}
        again = dst.import_(src.export())  # embedded alike: the same payload
        assert again.unchanged == 1


def test_without_an_embedder_nothing_changes(store: Store, clock: ManualClock) -> None:
    memory = Memory(store, clock=clock)
    memory.remember("She works as a nurse")
    assert memory.embedder is None and memory.get(memory.list().facts[0].id).embedding is None
    hits = store.search_documents("nurse", 5)
    assert [(r.id, r.score) for r in memory.recall("nurse", k=5)] == \
        [(h.id, h.score) for h in hits]


def test_fusion_is_configurable_and_without_an_embedder_the_default_is_document_search(
        store: Store, clock: ManualClock) -> None:
    memory = Memory(store, clock=clock, embedder=Fake())
    for text in ("She works as a nurse", "a nurse lives in Oslo", "Bob likes tea",
                 "the job pays"):
        memory.remember(text)
    query = vector_of(Fake(), "nurse job")
    hits = store.search_documents("nurse job", 4, embedding=query)
    own_vectors = Memory(store, clock=clock)  # no embedder: the caller brings the vector
    assert own_vectors.embedder is None
    assert [(r.id, r.score) for r in own_vectors.recall("nurse job", k=4, embedding=query)] \
        == [(h.id, h.score) for h in hits]
    default = memory.recall("nurse job", k=4)  # with the embedder: floored, weight 0.55
    assert [r.score for r in default] != [h.score for h in hits]
    same = Memory(store, MemoryConfig(fusion=FusionConfig(method="floored",
                                                          lexical_weight=0.55)),
                  clock=clock, embedder=Fake(), persist=True)
    assert same.recall("nurse job", k=4) == default
    old = Memory(store, MemoryConfig(fusion=FusionConfig(lexical_weight=0.4)), clock=clock,
                 embedder=Fake(), persist=True)  # the default before the floored fusion
    assert [r.score for r in old.recall("nurse job", k=4)] != [r.score for r in default]
    rrf = Memory(store, MemoryConfig(fusion=FusionConfig(method="rrf")), clock=clock,
                 embedder=Fake(), persist=True)
    ranked = rrf.recall("nurse job", k=4)
    assert ranked == rrf.recall("nurse job", k=4)  # deterministic
    assert [r.score for r in ranked] != [r.score for r in default]


def test_a_store_written_with_the_built_in_model_is_queried_with_it(
        tmp_path: Path, clock: ManualClock) -> None:
    pytest.importorskip("tokenizers")
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, MemoryConfig(embedder="minilm"), clock=clock)
        memory.remember("She works as a nurse")
        memory.remember("They moved to Oslo last spring")
    with Store.open(tmp_path / "s", sync="none") as store:
        door = Memory(store, clock=clock)  # as a door opens it: no embedder named
        assert door.embedder is not None and door.embedder.identity.name == "minilm"
        assert door.recall("what is her job?", k=1)[0].text == "She works as a nurse"


def test_holomem_info_shows_the_embedder_and_the_configuration(tmp_path: Path,
                                                               clock: ManualClock) -> None:
    import json
    import subprocess
    import sys

    with Store.open(tmp_path / "s", sync="none") as store:
        Memory(store, MemoryConfig(supersession="latest-by-subject"), clock=clock,
               embedder=Fake()).remember("She works as a nurse", namespace=["u1"])
    done = subprocess.run([sys.executable, "-m", "holomem", "info", str(tmp_path / "s"),
                           "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["facts"] == 1 and info["namespaces"] == 1 and len(info["storeId"]) == 32
    assert info["embedder"]["name"] == "fake" and info["embedder"]["dim"] == DIM
    assert info["config"]["supersession"] == "latest-by-subject"
    missing = subprocess.run([sys.executable, "-m", "holomem", "info",
                              str(tmp_path / "nothing")], capture_output=True, text=True,
                             timeout=120)
    assert missing.returncode == 3 and not (tmp_path / "nothing").exists()
