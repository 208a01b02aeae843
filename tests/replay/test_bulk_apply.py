"""Applying a transaction's events in bulk leaves exactly the state of applying them
one at a time.

``ProjectionState.apply_all`` (what commits, replays, followers and compactions use)
sends runs of new documents and their facts through the projections' column-at-a-time
paths. Hypothesis writes transactions mixing such runs with replacements, deletions,
repeated ids, facts with links to earlier and later documents of the same run,
subjects, namespaces, windows, times to live, confidences, entities and embeddings; every
projection of the bulk-applied state must equal that of the one-event-at-a-time
state, including the bytes written to the text segment.
"""

from __future__ import annotations

from array import array
from typing import Any

import hypothesis.strategies as st
import numpy as np
from hypothesis import given, settings

from holomem.events import DocumentAdded, DocumentDeleted, Event, FactAdded
from holomem.projections.base import GrowArray
from holomem.projections.state import BULK_MIN, ProjectionState

IDS = [f"d{i}" for i in range(40)]
WORDS = ["alice", "paris", "lives", "berlin", "bob", "the", "cats", "running", "runs", "zeta"]


class MemoryRecords:
    """An in-memory record store: records are framed as the real file frames them
    (length, sequence number, body), so misplaced or missing writes show."""

    first_offset = 16

    def __init__(self) -> None:
        self.data = bytearray(self.first_offset)

    def record_size(self, body_length: int) -> int:
        return 12 + body_length

    def encode(self, offset: int, seq: int, body: bytes) -> bytes:
        return len(body).to_bytes(4, "little") + seq.to_bytes(8, "little") + body

    def encode_run(self, offset: int, seq: int, bodies: list[bytes]) -> bytes:
        out = b""
        for body in bodies:
            out += self.encode(offset + len(out), seq, body)
        return out

    def write(self, offset: int, data: bytes) -> None:
        if len(self.data) < offset + len(data):
            self.data.extend(bytes(offset + len(data) - len(self.data)))
        self.data[offset : offset + len(data)] = data

    def decode(self, raw: bytes | memoryview, offset: int, seq: int) -> bytes | None:
        return bytes(raw[12:])

    def read(self, offset: int, size: int, seq: int) -> bytes | None:
        return bytes(self.data[offset + 12 : offset + size])

    def zero(self, offset: int, size: int) -> None:
        self.data[offset : offset + size] = bytes(size)


def _plain(value: Any, seen: set[int]) -> Any:
    """A comparable picture of a projection's state."""
    if isinstance(value, GrowArray):
        return value.view().tolist()
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    if isinstance(value, array):
        return value.tolist()
    if isinstance(value, dict):
        return {k: _plain(v, seen) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, seen) for v in value]
    if isinstance(value, (str, bytes, bytearray, int, float, bool)) or value is None:
        return bytes(value) if isinstance(value, bytearray) else value
    if id(value) in seen:
        return "<seen>"
    seen.add(id(value))
    fields = (vars(value) if hasattr(value, "__dict__")
              else {k: getattr(value, k) for k in value.__slots__})
    # (_word_keys: BM25's cache of its word dict, filled by bulk loads only; _memo and
    # its key _version, which counts changes rather than events: BM25's query terms;
    # _d_slots: the slot of each token of its delta, for queries.)
    return {k: _plain(v, seen) for k, v in fields.items()
            if k not in ("catalog", "_mu", "_norm_cache", "_norm_key", "_local", "_word_keys",
                         "_memo", "_version", "_d_slots")}


def _picture(state: ProjectionState, records: MemoryRecords) -> dict[str, Any]:
    state.bm25.merge()  # merge timing is layout, not state: compare merged postings
    out = {name: _plain(getattr(state, name), set())
           for name in ("catalog", "text", "bm25", "embeddings", "entities", "facts")}
    out["text"].pop("store")
    out["file"] = bytes(records.data)
    return out


@st.composite
def transactions(draw: st.DrawFn) -> list[list[Event]]:
    txs: list[list[Event]] = []
    clock = 1000
    for _ in range(draw(st.integers(1, 4))):
        events: list[Event] = []
        for _ in range(draw(st.integers(0, 3 * BULK_MIN))):
            kind = draw(st.sampled_from(["doc", "fact", "fact", "delete"]))
            doc_id = draw(st.sampled_from(IDS))
            if kind == "delete":
                events.append(DocumentDeleted(id=doc_id))
                continue
            text = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6)))
            emb = draw(st.sampled_from([b"", np.array([1.0, 2.0], "<f4").tobytes()]))
            ents = tuple(draw(st.lists(st.sampled_from(["Alice", "Bob", "Cy"]), max_size=2)))
            meta = draw(st.sampled_from([b"", b'{"a":1}']))
            events.append(DocumentAdded(id=doc_id, text=text, metadata=meta, embedding=emb,
                                        entities=ents))
            if kind == "fact":
                clock += draw(st.integers(0, 5))
                vf = draw(st.sampled_from([None, clock - 50, clock + 50]))
                events.append(FactAdded(
                    id=doc_id, ingest_time=clock,
                    subject=draw(st.sampled_from([None, "s1", "s2"])),
                    event_time=draw(st.sampled_from([None, clock - 10])),
                    valid_from=vf,
                    valid_to=draw(st.sampled_from([None, clock + 100])),
                    supersedes=tuple(draw(st.lists(st.sampled_from(IDS), max_size=2))),
                    superseded_by=tuple(draw(st.lists(st.sampled_from(IDS), max_size=1))),
                    requested=tuple(draw(st.lists(st.sampled_from(IDS), max_size=1))),
                    digest=doc_id.encode()[:8],
                    confidence=draw(st.sampled_from([None, 0.5, 1.0])),
                    namespace=draw(st.sampled_from([(), ("u",), ("u", "a")])),
                    ttl_ms=draw(st.sampled_from([None, 30, 500]))))
        txs.append(events)
    return txs


@settings(max_examples=150, deadline=None)
@given(transactions())
def test_bulk_apply_equals_one_event_at_a_time(txs: list[list[Event]]) -> None:
    one_records, bulk_records = MemoryRecords(), MemoryRecords()
    one = ProjectionState(one_records)
    bulk = ProjectionState(bulk_records)
    for seq, events in enumerate(txs, start=1):
        for e in events:
            one.apply(seq, e)
        bulk.apply_all(seq, events)
    assert _picture(bulk, bulk_records) == _picture(one, one_records)


def test_a_long_run_of_new_facts_takes_the_bulk_path_and_matches() -> None:
    """The common case at scale: thousands of new facts in one transaction (with
    links to earlier facts of the run, and some to later ones, which one event at a
    time cannot see yet and so ignores), as remember_many writes them."""
    events: list[Event] = []
    for i in range(3000):
        fid = f"f{i}"
        events.append(DocumentAdded(id=fid, text=f"{WORDS[i % 10]} word{i % 97} {i}"))
        events.append(FactAdded(id=fid, ingest_time=10 + i, subject=f"s{i % 7}",
                                supersedes=(f"f{i - 7}",) if i >= 7 else (),
                                superseded_by=(f"f{i + 3}",) if i % 11 == 0 else (),
                                digest=b"12345678"))
    one_records, bulk_records = MemoryRecords(), MemoryRecords()
    one, bulk = ProjectionState(one_records), ProjectionState(bulk_records)
    for e in events:
        one.apply(1, e)
    bulk.apply_all(1, events)
    assert bulk.facts.links == 3000 - 7
    assert _picture(bulk, bulk_records) == _picture(one, one_records)


@st.composite
def remember_batches(draw: st.DrawFn) -> list[Event]:
    """What remember_many writes: each new document followed by its fact, nothing else
    (the shape apply_all recognises without looking at each event)."""
    events: list[Event] = []
    ids = draw(st.lists(st.sampled_from(IDS), min_size=BULK_MIN, max_size=3 * BULK_MIN,
                        unique=True))
    for i, doc_id in enumerate(ids):
        words = draw(st.lists(st.sampled_from([*WORDS, "Zeta's", "naïve", "x" * 70]),
                              min_size=1, max_size=5))
        events.append(DocumentAdded(id=doc_id, text=" ".join(words)))
        events.append(FactAdded(
            id=doc_id, ingest_time=100 + i, subject=draw(st.sampled_from([None, "s1"])),
            supersedes=tuple(draw(st.lists(st.sampled_from(ids[:i] or IDS), max_size=1))),
            digest=doc_id.encode()[:8],
            namespace=draw(st.sampled_from([(), ("u",), ("u", "a")])),
            ttl_ms=draw(st.sampled_from([None, 30]))))
    return events


@settings(max_examples=60, deadline=None)
@given(remember_batches(), st.booleans())
def test_a_remember_batch_applied_in_bulk_matches_one_event_at_a_time(
        events: list[Event], one_namespace: bool) -> None:
    if one_namespace:
        events = [FactAdded(**{**{f: getattr(e, f) for f in e.__struct_fields__},
                               "namespace": ("u",)}) if isinstance(e, FactAdded) else e
                  for e in events]
    one_records, bulk_records = MemoryRecords(), MemoryRecords()
    one, bulk = ProjectionState(one_records), ProjectionState(bulk_records)
    for e in events:
        one.apply(1, e)
    bulk.apply_all(1, events)
    assert _picture(bulk, bulk_records) == _picture(one, one_records)


def test_runs_of_vectors_that_grow_the_matrix_match_one_event_at_a_time() -> None:
    """remember_many with a vector on every fact, in runs larger than the matrix: each
    run is normalised straight into the rows it grows (with room left for the next run),
    a run with a fact without a vector is not; the matrix is the one-at-a-time one."""
    rng = np.random.default_rng(3)
    one_records, bulk_records = MemoryRecords(), MemoryRecords()
    one, bulk = ProjectionState(one_records), ProjectionState(bulk_records)
    n = 0
    for seq, (size, gap) in enumerate([(1500, None), (1500, None), (2500, 17), (4000, None)],
                                      start=1):
        vecs = rng.standard_normal((size, 24)).astype("<f4")
        events: list[Event] = []
        for i, v in enumerate(vecs):
            fid = f"f{n + i}"
            events.append(DocumentAdded(id=fid, text=f"{WORDS[i % 10]} {i}",
                                        embedding=b"" if i == gap else v.tobytes()))
            events.append(FactAdded(id=fid, ingest_time=10 + i, digest=b"12345678"))
        n += size
        for e in events:
            one.apply(seq, e)
        bulk.apply_all(seq, events)
    assert len(bulk.embeddings.has) == n
    assert bulk.embeddings._mat is not None and one.embeddings._mat is not None
    assert bulk.embeddings._mat.view().tobytes() == one.embeddings._mat.view().tobytes()
    assert _picture(bulk, bulk_records) == _picture(one, one_records)
