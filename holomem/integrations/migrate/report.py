"""What a migration did: :class:`MigrationReport` (docs/migrate.md).

Owns: the report every ``from_*`` call of :mod:`holomem.integrations.migrate` returns and
the ``holomem migrate`` command prints as JSON — what was read from the peer, created,
already there, linked by supersession, skipped and why, where it went, and what became
of the peer's vectors — and :class:`Tally`, which adds it up as a migration runs.
Imports msgspec and the memory tier's response base.
"""

from __future__ import annotations

from collections import Counter

import msgspec

from holomem.api.memory.shapes import Response

#: The most skipped records a report names one by one (every one is counted), and the
#: most distinct reasons it counts apart (the rest under :data:`OTHER`).
MAX_NAMED_SKIPS = 100
MAX_REASONS = 100
OTHER = "other reasons"


class Skipped(Response, frozen=True):
    """A peer record that was not moved: its id in the peer and the reason."""

    source_id: str
    reason: str


class NamespaceCount(Response, frozen=True):
    """A holomem namespace the migration wrote to, and how many of the peer's records
    are there (created by this run or already there)."""

    namespace: list[str]
    facts: int


class MigrationReport(Response, frozen=True):
    """What one migration did (JSON: camelCase, as ``holomem migrate`` prints it).

    ``read``: the peer's records read (a Mem0 memory counts once per version of its
    history). ``created``: facts this run wrote; ``unchanged``: records already moved by
    an earlier run (a second run over the same peer reports ``created == 0``).
    ``superseded``: supersession links written (a Mem0 memory's history, or a value the
    peer changed since an earlier run). ``skipped``: records not moved, counted by
    reason in ``skipped_reasons``, the first :data:`MAX_NAMED_SKIPS` named in
    ``skipped_examples``. ``namespaces``: where the moved records are. ``vectors``:
    ``"kept"`` (the peer's vectors were stored with the facts), ``"dropped"`` (they were
    not: ``vectors_note`` says why; the memory's embedder, if any, embedded the text)
    or ``"none"`` (the peer gave none); ``vectors_kept`` counts the facts stored with
    one. ``batches``: the transactions written.
    """

    source: str
    read: int
    created: int
    unchanged: int
    superseded: int
    skipped: int
    skipped_reasons: dict[str, int]
    skipped_examples: list[Skipped]
    namespaces: list[NamespaceCount]
    vectors: str
    vectors_kept: int
    vectors_note: str
    batches: int

    def to_dict(self) -> dict[str, object]:
        """The report's JSON form (camelCase), as ``holomem migrate`` prints it."""
        out: dict[str, object] = msgspec.to_builtins(self)
        return out


class Tally:
    """The counts of a migration under way; :meth:`report` freezes them."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.read = 0
        self.created = 0
        self.unchanged = 0
        self.superseded = 0
        self.batches = 0
        self.vectors_kept = 0
        self.reasons: Counter[str] = Counter()
        self.examples: list[Skipped] = []
        self.namespaces: Counter[tuple[str, ...]] = Counter()

    def skip(self, source_id: str, reason: str) -> None:
        counted = reason if reason in self.reasons or len(self.reasons) < MAX_REASONS \
            else OTHER
        self.reasons[counted] += 1
        if len(self.examples) < MAX_NAMED_SKIPS:
            self.examples.append(Skipped(source_id=source_id, reason=reason))

    def report(self, vectors: str, note: str) -> MigrationReport:
        return MigrationReport(
            source=self.source, read=self.read, created=self.created,
            unchanged=self.unchanged, superseded=self.superseded,
            skipped=sum(self.reasons.values()), skipped_reasons=dict(self.reasons),
            skipped_examples=list(self.examples),
            namespaces=[NamespaceCount(namespace=list(ns), facts=n)
                        for ns, n in sorted(self.namespaces.items()) if n > 0],
            vectors=vectors, vectors_kept=self.vectors_kept, vectors_note=note,
            batches=self.batches)
