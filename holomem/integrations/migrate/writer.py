"""Writing a peer's records into a Memory, in bounded atomic batches, idempotently.

Owns: :class:`Entry` (one peer record as the fact it becomes), :func:`fact_id` (the
fact's id, derived from the peer, the target namespace and the record's own identity,
so a second run finds every record already stored and writes nothing), and
:class:`Writer`, which every peer module feeds: each batch is checked against the store
(a record whose fact is there and still the latest of its chain, or whose record's
latest fact holds the same value, is counted ``unchanged`` and left alone), a record
whose key holds an older value stored by an earlier run supersedes it — a value the
record held before, then changed, and now holds again included: it is a new fact that
supersedes the record's latest — and the rest go in one
``Memory.import_`` transaction — with the peer's ingest times, supersession links and
(when kept) vectors, and no policy of the memory run on them: what the peer held is
what the store holds. Imports the memory API and its export record types.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from msgspec.structs import replace

from holomem.api.memory.memory import Memory
from holomem.api.memory.transfer import exchange
from holomem.api.memory.transfer.records import FactExport, LinkRecord
from holomem.api.memory.types import FactRecord
from holomem.errors import InvalidError, LimitError
from holomem.integrations.migrate.report import Tally

#: Records per transaction unless the caller says otherwise, and the most it may say.
BATCH = 500
MAX_BATCH = 10_000
#: Facts read per page when looking for the value a changed record replaces.
_PAGE = 100
#: The most facts looked at to find whether a fact descends from a migrated one.
_ANCESTORS = 1000

Progress = Callable[[int], None]


class Entry(NamedTuple):
    """One peer record as the fact it becomes.

    ``key``: the record's identity in the peer (with its version), from which the
    fact id derives; ``supersedes``: the keys of the versions it replaces (a history
    the peer recorded; those versions are entries of the same migration);
    ``replaces``: a filter (``Memory.list``'s) that finds, under the entry's exact
    namespace, the current fact an earlier run stored for the same record, which
    this one supersedes if it is new (None: no such lookup).
    """

    source_id: str
    key: tuple[str, ...]
    namespace: tuple[str, ...]
    text: str
    ingest_time: int
    subject: str | None = None
    metadata: dict[str, Any] | None = None
    embedding: list[float] | None = None
    event_time: int | None = None
    valid_from: int | None = None
    valid_to: int | None = None
    supersedes: tuple[tuple[str, ...], ...] = ()
    replaces: dict[str, Any] | None = None


def fact_id(source: str, namespace: Sequence[str], key: Sequence[str]) -> str:
    """The id of a migrated record: ``SOURCE-`` and 32 hex digits of a SHA-256 over the
    peer's name, the target namespace and the record's key (so one record migrated
    into two namespaces is two facts, and a retry is the same fact)."""
    raw = json.dumps([source, list(namespace), list(key)], ensure_ascii=False,
                     separators=(",", ":"))
    return f"{source}-{hashlib.sha256(_utf8(raw)).hexdigest()[:32]}"


def batch_size(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidError(f"batch_size must be a positive integer, got {value!r}")
    if value > MAX_BATCH:
        raise LimitError(f"batch_size is at most {MAX_BATCH}")
    return value


def progress_callback(value: object) -> Progress | None:
    if value is None or callable(value):
        return value
    raise InvalidError("progress must be a callable taking the number of records read, "
                       "or None")


def digest(value: object) -> str:
    """A short, stable digest of a JSON value (a record's content, in its key).

    A peer holds what its own checks let in, which is more than JSON: a dict whose
    keys are of several types (which ``sort_keys`` cannot order) is digested with its
    keys as JSON writes them; a lone surrogate is digested as its code point. Values
    that cannot be written at all (a cycle, nesting past the recursion limit) are an
    ``invalid_request``, which a reader reports as a skipped record. Text that was
    digested before keeps its digest (and so its fact id)."""
    try:
        try:
            raw = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str,
                             separators=(",", ":"))
        except TypeError:  # keys of several types: ordered as the strings JSON makes
            keyed = json.loads(json.dumps(value, default=str))
            raw = json.dumps(keyed, sort_keys=True, ensure_ascii=False,
                             separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidError(f"the value cannot be written as JSON ({exc})") from None
    return hashlib.sha256(_utf8(raw)).hexdigest()[:16]


def _utf8(text: str) -> bytes:
    # Lone surrogates pass as their code points: the bytes of valid text are unchanged.
    return text.encode("utf-8", "surrogatepass")


class Writer:
    """Moves entries into ``memory`` ``size`` at a time (one transaction each), counting
    in ``tally``; ``progress(n)`` is told the records read after each batch.

    ``moved_only``: a new value supersedes only the current facts of its record that a
    migration from this peer stored, or that supersede one of them (an edit made in
    holomem over it): never a fact of the caller's own that happens to share the
    record's subject. (False: every fact ``Entry.replaces`` finds, when that filter
    says itself which facts are the peer's, as LangGraph's item marker does.)"""

    def __init__(self, memory: Memory, tally: Tally, size: int,
                 progress: Progress | None, *, moved_only: bool = True) -> None:
        self.memory = memory
        self.moved_only = moved_only
        self.tally = tally
        self.size = size
        self.progress = progress
        self.pending: list[Entry] = []
        # Namespaces that held no fact when first seen: nothing there to supersede
        # but what this run writes, so no lookup is needed.
        self._empty: dict[tuple[str, ...], bool] = {}

    def already(self, namespace: tuple[str, ...], key: tuple[str, ...]) -> bool:
        """Whether the record of ``key`` in ``namespace`` was moved by an earlier run and
        is still the latest fact of its chain — then it is counted ``unchanged`` here,
        and its reader need not build its entry. (A fact stored by an earlier run and
        superseded since is left to :meth:`add`, which decides whether the record's
        value is current.)"""
        fid = fact_id(self.tally.source, namespace, key)
        if not self.memory.store.has_document(fid) or not self._latest(fid):
            return False
        self.tally.unchanged += 1
        self.tally.namespaces[namespace] += 1
        return True

    def add(self, entry: Entry) -> None:
        self.pending.append(entry)
        if len(self.pending) >= self.size:
            self.flush()

    def flush(self) -> None:
        batch, self.pending = self.pending, []
        if batch:
            self._write(batch)
        if self.progress is not None:
            self.progress(self.tally.read)

    def _id(self, entry: Entry, key: tuple[str, ...] | None = None) -> str:
        return fact_id(self.tally.source, entry.namespace, entry.key if key is None else key)

    def _was_empty(self, namespace: tuple[str, ...]) -> bool:
        if namespace not in self._empty:
            page = self.memory.list(limit=1, namespace=list(namespace))
            self._empty[namespace] = not page.facts
        return self._empty[namespace]

    def _latest(self, fid: str) -> bool:
        """Whether the stored fact ``fid`` is the latest of its chain (nothing supersedes it)."""
        record = self.memory.get(fid)
        return record is not None and not record.superseded_by

    def _current(self, entry: Entry) -> list[FactRecord]:
        """The current facts stored for the entry's record (found by ``entry.replaces``)."""
        if entry.replaces is None or self._was_empty(entry.namespace):
            return []
        out: list[FactRecord] = []
        cursor = None
        while True:
            page = self.memory.list(cursor=cursor, limit=_PAGE, filter=entry.replaces,
                                    history="current", namespace=list(entry.namespace))
            out.extend(r for r in page.facts if tuple(r.namespace) == entry.namespace
                       and (not self.moved_only or self._from_peer(r)))
            if page.next_cursor is None:
                return out
            cursor = page.next_cursor

    def _from_peer(self, record: FactRecord) -> bool:
        """Whether ``record`` is a fact a migration from this peer stored, or supersedes
        one (looked for through what it supersedes, at most :data:`_ANCESTORS` facts)."""
        prefix = f"{self.tally.source}-"
        seen = {record.id}
        todo = [record]
        while todo and len(seen) <= _ANCESTORS:
            fact = todo.pop()
            if fact.id.startswith(prefix):
                return True
            for earlier in fact.supersedes:
                if earlier not in seen:
                    seen.add(earlier)
                    found = self.memory.get(earlier)
                    if found is not None:
                        todo.append(found)
        return False

    def _again(self, entry: Entry, before: list[str]) -> str:
        """The id of a value the record held before (its fact is stored, superseded) and
        holds again: derived from the record's key and the facts it supersedes now, so
        each return to an earlier value is a fact of its own."""
        has = self.memory.store.has_document
        key = (*entry.key, "again", *before)
        fid = self._id(entry, key)
        n = 1
        while has(fid):  # the same facts superseded twice over (one was forgotten since)
            fid = self._id(entry, (*key, str(n)))
            n += 1
        return fid

    def _placed(self, entry: Entry, fid: str) -> tuple[str, list[str]] | None:
        """The id the entry is stored under and the facts it supersedes, or None when
        holomem already holds its value as the record's current one (``unchanged``).

        A fact already stored under ``fid`` is the record's value when it is the latest
        of its chain; when something superseded it since (the record changed, then
        changed back), the record's value is current only if one of its current facts
        holds the same text, subject and metadata; it is left as it is too when the last
        run moved this very value (a fact written in holomem over it since stands);
        otherwise the peer changed it back, and the value becomes current again as a
        new fact superseding them. Errors: ``invalid_request`` (a key no lookup
        takes)."""
        if not self.memory.store.has_document(fid):
            # The version before it (a history the peer kept), and whatever else is
            # current for the record (an edit made in holomem, or a history cut short).
            explicit = [self._id(entry, k) for k in entry.supersedes]
            current = self._current(entry)
            if not explicit and any(r.id.startswith(f"{self.tally.source}-")
                                    and _holds(r, entry) for r in current):
                # Its value is the record's current fact already, moved under another
                # key (by a holomem whose keys were made otherwise): left as it is.
                return None
            return fid, list(dict.fromkeys([*explicit, *(r.id for r in current)]))
        if entry.replaces is None or self._latest(fid):
            return None
        current = self._current(entry)
        if any(_holds(r, entry) for r in current) or self._moved_last(fid, entry):
            return None
        before = [r.id for r in current]
        return self._again(entry, before), before

    def _moved_last(self, fid: str, entry: Entry) -> bool:
        """Whether the value the last run moved for the record is the entry's: the fact
        a migration from this peer wrote last on the way from ``fid`` through what
        supersedes it (the peer's ingest times say nothing of which run came last). The
        peer has not changed it since, so a fact written in holomem over it stands."""
        prefix = f"{self.tally.source}-"
        last, frontier, seen = fid, [fid], {fid}
        while frontier:
            after: list[str] = []
            for fact in frontier:
                record = self.memory.get(fact)
                for later in record.superseded_by if record is not None else ():
                    if later not in seen:
                        seen.add(later)
                        after.append(later)
                        if later.startswith(prefix):
                            last = later
            frontier = after
        record = self.memory.get(last)
        return record is not None and _holds(record, entry)

    def _takeable(self, records: list[tuple[Entry, list[str], FactExport]]
                  ) -> list[tuple[Entry, list[str], FactExport]]:
        """The records the import refused a batch for, skipped (named in the report):
        the others, checked as the import checks them (a vector included: its
        dimension must be the store's, or the first kept vector's in an empty store)."""
        out = []
        dim = self.memory.store.embedding_dim
        for entry, before, record in records:
            try:
                exchange.check(record, 0)
                n = len(record.embedding) if record.embedding is not None else 0
                if n and dim and n != dim:
                    raise InvalidError(f"its vector has {n} dimensions, the store's "
                                       f"vectors {dim}")
            except InvalidError as exc:  # LimitError included
                self.tally.namespaces[entry.namespace] -= 1
                self.tally.skip(entry.source_id, exc.message.removeprefix("line 0: "))
                continue
            dim = dim or n
            out.append((entry, before, record))
        return out

    def _linked(self, records: list[tuple[Entry, list[str], FactExport]]
                ) -> list[tuple[Entry, list[str], FactExport]]:
        """``records`` without the links to facts neither stored nor among them (a
        version of the peer's history skipped, here or in an earlier batch): no link
        is written to a fact that is not there, nor counted."""
        here = {r.id for _, _, r in records}
        has = self.memory.store.has_document
        out = []
        for entry, before, record in records:
            kept = [b for b in before if b in here or has(b)]
            if kept != before:
                record = replace(record, requested=kept, links=[
                    link for link in record.links if link.supersedes in kept])
            out.append((entry, kept, record))
        return out

    def _write(self, batch: list[Entry]) -> None:
        records: list[tuple[Entry, list[str], FactExport]] = []
        for entry in batch:
            self.tally.namespaces[entry.namespace] += 1
            try:
                placed = self._placed(entry, self._id(entry))
            except InvalidError as exc:  # (LimitError included) a key no lookup takes,
                # e.g. a subject past its limit, which the import would refuse too
                self.tally.namespaces[entry.namespace] -= 1
                self.tally.skip(entry.source_id, exc.message.removeprefix("filter."))
                continue
            if placed is None:
                self.tally.unchanged += 1
                continue
            fid, before = placed
            valid_from = entry.valid_from
            if before and valid_from is None and entry.event_time is not None:
                # A supersession takes effect at valid_from, else at the event time: a
                # new value whose event time is its record's creation (older than the
                # value it replaces) takes effect when the peer learned it instead.
                valid_from = entry.ingest_time
            records.append((entry, before, FactExport(
                id=fid, text=entry.text, ingest_time=entry.ingest_time,
                namespace=list(entry.namespace), subject=entry.subject,
                metadata=entry.metadata, embedding=entry.embedding,
                event_time=entry.event_time, valid_from=valid_from, valid_to=entry.valid_to,
                requested=before,
                links=[LinkRecord(supersedes=b, known_at=entry.ingest_time)
                       for b in before])))
        records = self._linked(records)
        if not records:
            return
        try:  # checked once, by the import, in the common case of a batch it takes whole
            done = self.memory.import_([r for _, _, r in records], batch_size=len(records))
        except InvalidError:  # it wrote nothing: the records it refuses are skipped
            records = self._linked(self._takeable(records))
            if not records:
                return
            done = self.memory.import_([r for _, _, r in records], batch_size=len(records))
        for _, before, record in records:
            self.tally.superseded += len(before)
            if record.embedding is not None:
                self.tally.vectors_kept += 1
        self.tally.created += done.imported
        self.tally.unchanged += done.unchanged
        self.tally.batches += done.batches


def _holds(record: FactRecord, entry: Entry) -> bool:
    """Whether a stored fact holds the entry's value: its text, subject and metadata."""
    return (record.text, record.subject, record.metadata or None) == \
        (entry.text, entry.subject, entry.metadata or None)


def metadata_of(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A peer's metadata as holomem keeps it: a plain dict, None when empty."""
    return dict(value) if value else None
