"""Export and import (docs/contract.md §4d): a memory moved to another store with its whole history
answers every recall — any as-of, known-at and history — byte for byte as the source
did (each confidence set travels with its time); importing again changes nothing; a
different payload is a conflict and a malformed record is invalid, each naming its line,
and that batch writes nothing.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import (
    ConflictError,
    InvalidError,
    LimitError,
    ManualClock,
    Memory,
    MemoryConfig,
    Store,
)
from holomem.api.engine import nesting
from holomem.api.memory.transfer import exchange
from tests.cli.run import holomem

CONFIG = MemoryConfig(supersession="latest-by-subject", entity_extractor="regex")
WORDS = ["Ann", "lives", "in", "Oslo", "Rome", "works", "as", "a", "nurse", "Bob", "likes",
         "tea", "coffee", "Paris"]
QUERIES = ["Ann lives", "nurse", "Bob likes tea", "Rome coffee", "Paris"]

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
times = st.none() | st.integers(0, 60)
remembers = st.fixed_dictionaries(
    {"text": texts},
    optional={
        "subject": st.sampled_from(["city", "job"]),
        "namespace": st.sampled_from([[], ["u1"], ["u2"], ["u1", "s"]]),
        "event_time": st.integers(0, 60),
        "valid_from": st.integers(0, 30),
        "metadata": st.fixed_dictionaries({"n": st.integers(0, 3)}),
        "embedding": st.lists(st.floats(-1, 1, width=32), min_size=3, max_size=3)
        .filter(lambda v: any(v)),
        "confidence": st.sampled_from([0.2, 0.9]),
    })
steps = st.lists(st.one_of(
    st.tuples(st.just("remember"), remembers),
    st.tuples(st.just("feedback"), st.integers(0, 20), st.booleans()),
    st.tuples(st.just("confidence"), st.integers(0, 20), st.sampled_from([0.0, 0.5])),
    st.tuples(st.just("forget"), st.integers(0, 20)),
    # A supersedes list, maybe against time order (a fact beginning earlier than the
    # one it supersedes): the policy's links never close a ring with it.
    st.tuples(st.just("supersede"), st.integers(0, 20), times),
    st.tuples(st.just("tick"), st.integers(1, 10)),
), min_size=1, max_size=25)


def build(memory: Memory, clock: ManualClock, script: list[tuple[Any, ...]]) -> list[str]:
    ids: list[str] = []
    for step in script:
        kind = step[0]
        if kind == "remember":
            fields = dict(step[1])
            if "valid_from" in fields:
                fields["valid_to"] = fields["valid_from"] + 1000
            ids.append(memory.remember(**fields).id)
        elif kind == "tick":
            clock.advance(step[1])
        elif ids:
            fid = ids[step[1] % len(ids)]
            if memory.get(fid) is None:
                continue
            if kind == "feedback":
                memory.feedback(fid, step[2])
            elif kind == "confidence":
                memory.set_confidence(fid, step[2])
            elif kind == "supersede":
                record = memory.get(fid)
                assert record is not None
                ids.append(memory.remember(
                    f"{record.text} again", subject="job", namespace=record.namespace,
                    valid_from=step[2], supersedes=[fid]).id)
            else:
                memory.forget({"ids": [fid]})
    return ids


def answers(memory: Memory, ids: list[str]) -> list[bytes]:
    """Every recall we can think of, as bytes, plus the fact records and histories."""
    out = []
    for query in QUERIES:
        for as_of in (None, 0, 15, 40, 10_000):
            for known_at in (None, 1_000_005, 1_000_030):
                for history in ("current", "all", "historical"):
                    out.append(msgspec.json.encode(memory.recall(
                        query, {"k": 50, "as_of": as_of, "known_at": known_at,
                                "history": history, "explain": True})))
    out.append(msgspec.json.encode(memory.list(limit=1000)))
    for fid in dict.fromkeys(ids):
        out.append(msgspec.json.encode(memory.get(fid)))
        if memory.get(fid) is not None:
            out.append(msgspec.json.encode(memory.history(fid)))
    return out


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=steps, batch=st.sampled_from([1, 3, 1000]))
def test_an_imported_memory_answers_every_recall_byte_for_byte_as_its_source(
        tmp_path_factory: pytest.TempPathFactory, script: list[tuple[Any, ...]],
        batch: int) -> None:
    root = tmp_path_factory.mktemp("x")
    clock = ManualClock(1_000_000)
    with Store.open(root / "source", sync="none") as source, \
            Store.open(root / "target", sync="none") as target:
        src = Memory(source, CONFIG, clock=clock)
        ids = build(src, clock, script)
        exported = list(src.export())
        dst = Memory(target, CONFIG, clock=clock)
        report = dst.import_(json.dumps(r) for r in exported)  # JSON lines, as a file has
        assert report.imported == len(exported) and report.unresolved_links == 0
        assert answers(dst, ids) == answers(src, ids)
        assert list(dst.export()) == exported
        # Again: every fact is there with the same payload, so nothing is written.
        revision = target.stats().revision
        again = dst.import_(exported, batch_size=batch)
        assert (again.imported, again.unchanged) == (0, len(exported))
        assert target.stats().revision == revision


def test_export_is_restricted_to_a_namespace_prefix(memory: Memory) -> None:
    memory.remember("Ann lives in Oslo", namespace=["u1"])
    memory.remember("Ann works as a nurse", namespace=["u1", "work"])
    memory.remember("Bob likes tea", namespace=["u2"])
    memory.remember("the root fact")
    assert [r["text"] for r in memory.export(["u1"])] == ["Ann lives in Oslo",
                                                          "Ann works as a nurse"]
    assert len(list(memory.export())) == 4


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 12), block=st.integers(1, 5), at=st.integers(1, 4),
       change=st.sampled_from(["purge", "forget", "compact", "remember", "follower"]),
       gone=st.sets(st.integers(0, 11), max_size=4))
def test_an_export_holds_every_fact_stored_when_it_began_however_a_compaction_interleaves(
        tmp_path_factory: pytest.TempPathFactory, n: int, block: int, at: int, change: str,
        gone: set[int]) -> None:
    # §4d: every fact at or under the namespace, except those forgotten before the
    # export read them and those written after it began. A purge or a compaction
    # between two blocks renumbers the slots; the facts not yet read are still there.
    root = tmp_path_factory.mktemp("x")
    with Store.open(root / "s", sync="none") as store:
        memory = Memory(store, CONFIG, clock=ManualClock(1_000_000))
        memory.remember_many([{"text": f"fact number {i}", "id": f"f{i}",
                               "namespace": ["u"] if i % 3 else ["v"]} for i in range(n)])
        under = [f"f{i}" for i in range(n) if i % 3]
        reader = Store.open(root / "s", read_only=True) if change == "follower" else store
        with reader:
            blocks = exchange.export_blocks(reader, ("u",), block)
            read = [r.id for part in itertools.islice(blocks, at) for r in part]
            forgotten = [f"f{i}" for i in sorted(gone) if i < n]
            if change == "compact":
                store.compact()
                forgotten = []
            elif change == "remember":
                memory.remember("written after the export began", id="late", namespace=["u"])
                forgotten = []
            elif forgotten:
                memory.forget({"ids": forgotten}, purge=change != "forget")
            read += [r.id for part in blocks for r in part]
        assert read == [f for i, f in enumerate(under) if i < at * block or f not in forgotten]


def test_a_link_waits_for_its_other_fact_across_batches(tmp_path: Path,
                                                        clock: ManualClock) -> None:
    with Store.open(tmp_path / "a", sync="none") as a, \
            Store.open(tmp_path / "b", sync="none") as b:
        src = Memory(a, CONFIG, clock=clock)
        src.remember("Ann lives in Rome", subject="city", event_time=2000)
        # Older news, written later: the policy links it as superseded by the first.
        src.remember("Ann lives in Oslo", subject="city", event_time=1000)
        records = list(src.export())
        assert records[0]["links"], "the first record holds the link to a later line"
        dst = Memory(b, CONFIG, clock=clock)
        assert dst.import_(records, batch_size=1).unresolved_links == 0
        assert [f.status for f in dst.list().facts] == ["current", "superseded"]


def test_a_link_to_a_fact_that_never_arrives_is_reported_not_written(
        memory: Memory) -> None:
    record = {"id": "a", "text": "Ann lives in Rome", "ingestTime": 5,
              "links": [{"supersedes": "missing", "knownAt": 5}]}
    report = memory.import_([record])
    assert (report.imported, report.unresolved_links) == (1, 1)
    assert memory.get("a").supersedes == []


def test_a_different_payload_for_a_stored_id_is_a_conflict_naming_its_line(
        memory: Memory, store: Store) -> None:
    memory.remember(id="a", text="Ann lives in Rome")
    records = list(memory.export())
    changed = [{"id": "b", "text": "Bob likes tea", "ingestTime": 9},
               {**records[0], "text": "Ann lives in Oslo"}]
    revision = store.stats().revision
    with pytest.raises(ConflictError, match=r"line 2: fact 'a'"):
        memory.import_(changed)
    assert store.stats().revision == revision and memory.get("b") is None


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "line 2"),
    ('{"id": "x", "text": "t"}', "line 2.*ingestTime"),
    ('{"id": "x", "text": "t", "ingestTime": 1, "colour": "red"}', "line 2.*colour"),
    ('{"id": "x", "text": "  ", "ingestTime": 1}', "line 2.*empty"),
    ('{"id": "x", "text": "t", "ingestTime": -1}', "line 2"),
    ('{"id": "x", "text": "t", "ingestTime": 1, "digest": "zz"}', "line 2.*digest"),
    ('{"id": "x", "text": "t", "ingestTime": 1, "format": 4}', "line 2.*format"),
    ('{"id": "x", "text": "t", "ingestTime": 1, "confidence": 3}', "line 2"),
    ('{"id": "x", "text": "t", "ingestTime": 1, "links": [{"supersedes": "x", '
     '"knownAt": 1}]}', "line 2.*itself"),
    ('[1, 2]', "line 2"),
])
def test_a_malformed_record_is_invalid_with_its_line_and_its_batch_writes_nothing(
        memory: Memory, store: Store, line: str, message: str) -> None:
    good = json.dumps({"id": "ok", "text": "Ann lives in Rome", "ingestTime": 1})
    revision = store.stats().revision
    with pytest.raises((InvalidError, LimitError), match=message):
        memory.import_([good, line])
    assert store.stats().revision == revision and memory.get("ok") is None


def deep_record(depth: int) -> dict[str, Any]:
    """A record whose metadata nests ``depth`` objects."""
    metadata: Any = "leaf"
    for _ in range(depth):
        metadata = {"k": metadata}
    return {"id": "x", "text": "t", "ingestTime": 1, "metadata": metadata}


def deep_line(depth: int) -> str:
    """:func:`deep_record` as a JSON line (written out: json would recurse)."""
    return ('{"id": "x", "text": "t", "ingestTime": 1, "metadata": '
            + '{"k": ' * depth + '"leaf"' + "}" * depth + "}")


@pytest.mark.parametrize("form", ["JSON line", "bytes", "dict"])
def test_a_record_nesting_deeper_than_a_request_may_is_refused_before_it_is_decoded(
        memory: Memory, store: Store, form: str) -> None:
    """However deep (100,000 levels: past Python's recursion limit), a record is refused
    with the contract's own depth check, naming its line (``limit``: an
    ``invalid_request`` too), as Memory.call refuses it; its batch writes nothing."""
    record, line = deep_record(100_000), deep_line(100_000)
    item = {"JSON line": line, "bytes": line.encode(), "dict": record}[form]
    good = {"id": "ok", "text": "Ann lives in Rome", "ingestTime": 1}
    revision = store.stats().revision
    with pytest.raises(LimitError, match=r"^line 2: the record nests deeper than 64 levels"):
        memory.import_([good, item])
    with pytest.raises(LimitError, match="nests deeper than 64 levels"):
        memory.call("import", {"records": [good, record]})
    assert store.stats().revision == revision and memory.get("ok") is None
    # As deep as a record may be: decoded, and then metadata's own limit (32) answers.
    with pytest.raises(LimitError, match=r"^line 1: metadata nests deeper than 32"):
        memory.import_([deep_line(nesting.MAX_REQUEST_DEPTH - 1)])


def test_blank_lines_are_skipped_but_counted(memory: Memory) -> None:
    lines = ["", json.dumps({"id": "a", "text": "t", "ingestTime": 1}), "  ", "{"]
    with pytest.raises(InvalidError, match="line 4"):
        memory.import_(lines)


@pytest.mark.parametrize("bad", ["a string", b"bytes", {"id": "x"}, 7])
def test_import_takes_an_iterable_of_records(memory: Memory, bad: object) -> None:
    with pytest.raises(InvalidError):
        memory.import_(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("size", [0, -1, True, 1.5, 10**9])
def test_the_batch_size_is_checked(memory: Memory, size: object) -> None:
    with pytest.raises((InvalidError, LimitError)):
        memory.import_([], batch_size=size)  # type: ignore[arg-type]


def test_a_cross_namespace_link_is_invalid(memory: Memory) -> None:
    records = [{"id": "a", "text": "t", "ingestTime": 1, "namespace": ["u1"]},
               {"id": "b", "text": "u", "ingestTime": 2, "namespace": ["u2"],
                "links": [{"supersedes": "a", "knownAt": 2}]}]
    with pytest.raises(InvalidError, match="another namespace"):
        memory.import_(records)


@settings(max_examples=60, deadline=None)
@given(fields=remembers, more=st.fixed_dictionaries({}, optional={
    "entities": st.lists(st.sampled_from(["Ann", "Oslo"]), min_size=1, max_size=2),
    "ttl_ms": st.integers(1, 10**6)}))
def test_a_record_without_a_digest_gets_the_digest_its_remember_has(
        tmp_path_factory: pytest.TempPathFactory, fields: dict[str, Any],
        more: dict[str, Any]) -> None:
    """A record written by hand (here: an export with its digest taken out) is given
    the digest a remember of the same fact has, so that remember, retried on the
    target, is ``created=False``, not a conflict."""
    fields = {"id": "f", **fields, **more}
    if "valid_from" in fields:
        fields["valid_to"] = fields["valid_from"] + 1000
    root = tmp_path_factory.mktemp("d")
    with Store.open(root / "a", sync="none") as a, Store.open(root / "b", sync="none") as b:
        source, target = Memory(a), Memory(b)
        source.remember(**fields)
        (record,) = source.export()
        target.import_([{**record, "digest": None}])
        assert list(target.export()) == [record]  # the same digest
        assert target.remember(**fields).created is False


def test_a_records_digest_is_kept_as_given(memory: Memory, tmp_path: Path,
                                           clock: ManualClock) -> None:
    """An exported digest is the one of the remember that first stored the fact, which
    the record cannot give again: entities an extractor found, a confidence set
    later, a vector rounded to float32 are in the record, not in that remember. So it
    is kept as given (docs/contract.md §4d), and a retry of that remember on the
    target is ``created=False``."""
    given = {"id": "f", "text": "Ann lives in Oslo", "embedding": [0.1, 0.2, 0.3]}
    with Store.open(tmp_path / "src", sync="none") as src:
        source = Memory(src, CONFIG, clock=clock)
        source.remember(**given)
        source.set_confidence("f", 0.5)
        (record,) = source.export()
    assert record["entities"] and record["confidence"] == 0.5
    assert record["embedding"] != given["embedding"]  # float32
    memory.import_([record])
    assert list(memory.export()) == [record]
    assert memory.remember(**given).created is False


def superseding(fid: str, *preds: str) -> dict[str, Any]:
    """A record of fact ``fid`` holding a link to each of ``preds``."""
    return {"id": fid, "text": f"fact {fid}", "ingestTime": 1,
            "links": [{"supersedes": p, "knownAt": 1} for p in preds]}


def has_cycle(edges: set[tuple[str, str]]) -> bool:
    """Whether ``edges`` (successor, predecessor) hold a cycle (Kahn: peel the facts
    nothing left supersedes; a cycle is what cannot be peeled)."""
    facts = {f for edge in edges for f in edge}
    above = {f: 0 for f in facts}
    for _, pred in edges:
        above[pred] += 1
    free = [f for f in facts if not above[f]]
    peeled = 0
    while free:
        fid = free.pop()
        peeled += 1
        for succ, pred in edges:
            if succ == fid:
                above[pred] -= 1
                if not above[pred]:
                    free.append(pred)
    return peeled < len(facts)


def stored_links(memory: Memory) -> set[tuple[str, str]]:
    return {(r["id"], link["supersedes"]) for r in memory.export() for link in r["links"]}


@pytest.mark.parametrize(("records", "message"), [
    ([superseding("a", "b"), superseding("b", "a")],
     r"^line 3: .*cycle \('b' supersedes 'a' supersedes 'b'\)"),
    ([superseding("a", "b"), superseding("b", "c"), superseding("c", "a")],
     r"^line 4: .*cycle \('c' supersedes 'a' supersedes 'b' supersedes 'c'\), so none of them"),
    # Successors first: each link waits for its other fact.
    ([superseding("c", "a"), superseding("b", "c"), superseding("a", "b")],
     r"^line 4: .*cycle"),
])
def test_a_supersession_cycle_is_refused_naming_its_facts_and_writes_nothing(
        memory: Memory, store: Store, records: list[dict[str, Any]], message: str) -> None:
    good = {"id": "ok", "text": "Ann lives in Rome", "ingestTime": 1}
    revision = store.stats().revision
    with pytest.raises(InvalidError, match=message):
        memory.import_([good, *records])
    assert store.stats().revision == revision and memory.get("ok") is None


def test_a_cycle_closing_through_a_fact_stored_meanwhile_is_refused(memory: Memory) -> None:
    """A link waits for its other fact across batches; when that fact is written
    between two batches by a remember that supersedes the waiting fact, the link
    would close a cycle through it: the batch is refused."""
    def records() -> Iterator[dict[str, Any]]:
        yield superseding("a", "later")  # waits: 'later' is not stored yet
        memory.remember(id="later", text="a later fact", supersedes=["a"])
        yield superseding("z")

    with pytest.raises(InvalidError, match=r"^line 1: .*cycle \('a' supersedes 'later' "
                                           r"supersedes 'a'\)"):
        memory.import_(records(), batch_size=1)
    assert memory.get("z") is None and stored_links(memory) == {("later", "a")}


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 6), data=st.data(), batch=st.sampled_from([1, 2, 1000]))
def test_an_import_is_refused_iff_its_links_would_close_a_supersession_cycle(
        tmp_path_factory: pytest.TempPathFactory, n: int, data: st.DataObject,
        batch: int) -> None:
    """Random supersession graphs, imported in two calls (the second one's links may
    close a cycle through facts of the first): a call succeeds, writing every link
    whose facts are stored, iff those links and the stored ones hold no cycle; a
    refused call writes nothing (in one batch) and never leaves a cycle behind."""
    ids = [f"f{i}" for i in range(n)]
    pairs = st.tuples(st.sampled_from(ids), st.sampled_from(ids)).filter(lambda e: e[0] != e[1])
    edges = data.draw(st.sets(pairs, max_size=n * (n - 1)))
    order = data.draw(st.permutations(ids))
    split = data.draw(st.integers(0, n))
    with Store.open(tmp_path_factory.mktemp("c") / "s", sync="none") as store:
        memory = Memory(store, clock=ManualClock(1_000_000))
        stored: set[str] = set()
        for call in (order[:split], order[split:]):
            here = stored | set(call)
            expected = stored_links(memory) | {(s, p) for s, p in edges
                                               if s in call and p in here}
            records = [superseding(f, *sorted(p for s, p in edges if s == f)) for f in call]
            revision = store.stats().revision
            if has_cycle(expected):
                with pytest.raises(InvalidError, match="cycle"):
                    memory.import_(records, batch_size=batch)
                if batch >= len(call):
                    assert store.stats().revision == revision
                assert not has_cycle(stored_links(memory))
                return
            memory.import_(records, batch_size=batch)
            assert stored_links(memory) == expected
            stored = here


def test_the_cli_exports_and_imports_json_lines(tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path / "src", sync="none") as store:
        memory = Memory(store, CONFIG, clock=clock)
        memory.remember("Ann lives in Oslo", subject="city", namespace=["u1"])
        memory.remember("Ann lives in Rome", subject="city", namespace=["u1"])
        memory.remember("Bob likes tea", namespace=["u2"])
        expected = list(memory.export())

    def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "holomem", *args], input=stdin,
                              capture_output=True, text=True, timeout=120)

    out = tmp_path / "all.jsonl"
    done = cli("export", str(tmp_path / "src"), "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in out.read_text().splitlines()] == expected
    piped = cli("export", str(tmp_path / "src"), "--namespace", '["u1"]')
    assert [json.loads(line)["namespace"] for line in piped.stdout.splitlines()] \
        == [["u1"], ["u1"]]
    loaded = cli("import", str(tmp_path / "dst"), str(out))
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout)["imported"] == 3
    again = cli("import", str(tmp_path / "dst"), "-", stdin=out.read_text())
    assert json.loads(again.stdout)["unchanged"] == 3
    bad = cli("import", str(tmp_path / "dst"), "-", stdin='{"id": "q"}\n')
    assert bad.returncode == 2 and "line 1" in bad.stderr
    with Store.open(tmp_path / "dst", sync="none") as store:
        assert list(Memory(store, clock=clock).export()) == expected


def test_the_cli_refuses_a_hostile_import_naming_the_line_and_writes_nothing(
        tmp_path: Path) -> None:
    """``holomem import`` of a record nested 100,000 levels deep, or of records whose
    links form a cycle: exit 2 (invalid input, docs/cli.md), ``error: CODE: line N:
    ...`` on stderr, no traceback, and no fact written."""
    good = json.dumps({"id": "ok", "text": "Ann lives in Rome", "ingestTime": 1})
    deep = tmp_path / "deep.jsonl"
    deep.write_text(f"{good}\n{deep_line(100_000)}\n")
    cyclic = tmp_path / "cyclic.jsonl"
    cyclic.write_text("".join(json.dumps(r) + "\n" for r in (
        json.loads(good), superseding("a", "b"), superseding("b", "a"))))
    store = tmp_path / "s"
    for path, error in ((deep, "error: limit: line 2: the record nests deeper than 64"),
                        (cyclic, "error: invalid_request: line 3: these facts would "
                                 "supersede one another in a cycle")):
        done = holomem("import", str(store), str(path))
        assert done.returncode == 2 and done.stdout == "", done
        assert error in done.stderr and "Traceback" not in done.stderr, done.stderr
        with Store.open(store, read_only=True) as s:
            assert list(Memory(s).export()) == []


def test_an_export_carries_each_confidence_set_with_its_time(tmp_path: Path) -> None:
    """A look back with known_at on the importing store shows the confidence known then,
    as the source does; a history that does not end at the record's confidence is
    invalid."""
    clock = ManualClock(1_000)
    with Store.open(tmp_path / "a", sync="none") as a, \
            Store.open(tmp_path / "b", sync="none") as b:
        src = Memory(a, clock=clock)
        src.remember("Ann lives in Oslo", id="oslo", confidence=0.8)
        clock.set(2_000)
        src.set_confidence("oslo", 0.3)
        clock.set(3_000)
        src.set_confidence("oslo", 0.0)
        exported = list(src.export())
        assert exported[0]["confidenceHistory"] == {
            "remembered": 0.8, "changes": [{"time": 2_000, "confidence": 0.3},
                                           {"time": 3_000, "confidence": 0.0}]}
        dst = Memory(b, clock=clock)
        dst.import_(exported)
        for known_at in (1_500, 2_500, None):
            theirs, ours = src.get("oslo", known_at=known_at), dst.get("oslo", known_at=known_at)
            assert theirs is not None and ours == theirs
        assert [g.confidence for g in (dst.get("oslo", known_at=t) for t in (1_500, 2_500))
                if g is not None] == [0.8, 0.3]
        assert list(dst.export()) == exported
        assert dst.import_(exported).unchanged == 1
        wrong = {**exported[0], "id": "other", "confidence": 0.5, "digest": None}
        with pytest.raises(InvalidError, match="confidenceHistory"):
            dst.import_([wrong])
