"""An import cut into parts: the bounded ``import`` requests a client of a served store sends.

Owns: :class:`ImportParts`, one ``import_`` call of a client, and :class:`Part`, one
request of it. A server's ``import`` takes at most ``requests.MAX_IMPORT_RECORDS``
records and ``requests.MAX_IMPORT_RELATIONS`` relations a request, and a body of about
1 MiB: a client's ``import_`` of any size is sent as parts within those bounds, each one
``Memory.import_`` on the server (one or more transactions), its records checked here
first as ``Memory.import_`` checks them (:mod:`.exchange`), so a bad one raises the
library's own error naming its line before anything is sent. The typed relations go
after every record, in the source's order. The reports of the parts add up to the
call's; an error the server gives for a part names the caller's line, not the part's.
Sending is the client's (:mod:`holomem.client`). Imports the import's checks
(:mod:`.exchange`), its records, the request shape and its bounds, and progress.
"""

from __future__ import annotations

import copy
import re
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import msgspec

from holomem.api.memory import requests
from holomem.api.memory.progress import Progress, callback
from holomem.api.memory.transfer import exchange
from holomem.api.memory.transfer.records import ImportReport
from holomem.errors import HolomemError, LimitError

#: The most bytes of records one import request carries (the server takes 1 MiB bodies).
REQUEST_BYTES = 1_000_000
#: How an error of the server names a record or a relation of the request it refused.
_LINE, _RELATION = re.compile(r"line (\d+): "), re.compile(r"relations\[(\d+)\]: ")


class Part(NamedTuple):
    """One import request, and the input line of each record or relation it carries
    (None: a relation of the call's own ``relations``)."""

    request: requests.ImportRequest
    lines: list[int | None]
    records: int


class _Entry(NamedTuple):
    line: int
    id: str
    record: dict[str, Any]
    size: int
    #: The ids its supersession links name.
    targets: frozenset[str]


async def _incoming(records: Iterable[Any] | AsyncIterable[Any]
                    ) -> AsyncIterator[exchange.Incoming]:
    """Every record checked as ``Memory.import_`` checks it (errors name its line)."""
    if not isinstance(records, AsyncIterable):
        for batch in exchange.batches(records, 1):
            yield batch[0]
        return
    line = 0
    async for item in records:
        line += 1
        if isinstance(item, (str, bytes)) and not item.strip():
            continue  # a blank line, as Memory.import_ skips it
        yield exchange.check(exchange.decode(item, line), line)


class _Plan:
    """Cuts an import's records into requests of at most ``per_request`` records and
    :data:`REQUEST_BYTES` bytes, in input order but for links: one request is one
    ``Memory.import_`` on the server, which writes a link only when both of its facts
    are stored by its end. So a record whose link names a fact neither in its request
    nor sent before is held back, and sent at the front of the request after the one
    that carries that fact (or at the end, after the held records it names: the fact
    may be in the target store, else the link is unresolved, as Memory reports); its
    write order, which orders ``list``, can then differ from the source's."""

    def __init__(self, per_request: int) -> None:
        self.per_request = per_request
        self.sent: set[str] = set()
        self.current: list[_Entry] = []
        self.held: list[_Entry] = []

    def add(self, entry: _Entry) -> list[list[_Entry]]:
        """The requests ready once ``entry`` is taken."""
        self.current.append(entry)
        out = []
        while (len(self.current) > self.per_request
               or sum(e.size for e in self.current) > REQUEST_BYTES):
            out += self._cut(final=False)
        return out

    def finish(self) -> list[list[_Entry]]:
        """The remaining requests, the held records last (each after what it names)."""
        out = []
        while self.current:
            out += self._cut(final=False)
        # What a held record names and the input does not hold will not come: it may be
        # in the target store; if not, its link is unresolved (as Memory reports it).
        held = {e.id for e in self.held}
        self.sent |= {t for e in self.held for t in e.targets if t not in held}
        self.current, self.held = self.held, []
        while self.current:
            out += self._cut(final=False)
        self.current, self.held = self.held, []  # only links in a cycle are left
        while self.current:
            out += self._cut(final=True)
        return out

    def _cut(self, *, final: bool) -> list[list[_Entry]]:
        n, size = 0, 0
        for e in self.current[: self.per_request]:
            if size + e.size > REQUEST_BYTES:
                break
            n, size = n + 1, size + e.size
        assert n >= 1  # every entry fits a request on its own (ImportParts._add checks it)
        candidate, self.current = self.current[:n], self.current[n:]
        if not final:  # whatever names a fact not sent yet waits (and what names it)
            moved: set[int] = set()
            while True:
                here = self.sent | {e.id for i, e in enumerate(candidate) if i not in moved}
                more = {i for i, e in enumerate(candidate)
                        if i not in moved and not e.targets <= here}
                if not more:
                    break
                moved |= more
            self.held += [e for i, e in enumerate(candidate) if i in moved]
            candidate = [e for i, e in enumerate(candidate) if i not in moved]
        if not candidate:
            return []
        self.sent.update(e.id for e in candidate)
        ready = [e for e in self.held if e.targets <= self.sent]
        if ready:
            self.held = [e for e in self.held if not e.targets <= self.sent]
            self.current = ready + self.current
        return [candidate]


class ImportParts:
    """One ``import_`` call of a client, with ``Memory.import_``'s arguments (checked
    here, ``progress`` first): its records cut into requests (:class:`_Plan`), its typed
    relations sent after them in the source's order (``order``; those without one
    last, as given), and the reports of the requests added up in :attr:`report`.
    Errors: ``invalid_request``, ``limit`` (a record over :data:`REQUEST_BYTES` as JSON)."""

    def __init__(self, batch_size: int, drop_embeddings: bool, relations: Iterable[Any],
                 progress: Progress | None) -> None:
        self.progress = callback(progress)
        self.size = exchange.batch_size(batch_size)
        self.drop = drop_embeddings
        # (the input line of the record that carried it, or None: the call's own)
        self.links: list[tuple[int | None, dict[str, Any]]] = [
            (None, msgspec.to_builtins(x.record)) for x in exchange.relation_list(relations)]
        self.plan = _Plan(min(self.size, requests.MAX_IMPORT_RECORDS))
        self.report = ImportReport(imported=0, unchanged=0, batches=0)
        self.done = 0

    def parts(self, records: Iterable[Any]) -> Iterator[Part]:
        """The requests: records as they come, then the relations."""
        for batch in exchange.batches(records, 1):
            yield from self._add(batch[0])
        yield from map(self._part, self.plan.finish())
        yield from self._relations()

    async def aparts(self, records: Iterable[Any] | AsyncIterable[Any]) -> AsyncIterator[Part]:
        """:meth:`parts` of a plain or an async iterable."""
        async for item in _incoming(records):
            for part in self._add(item):
                yield part
        for part in [*map(self._part, self.plan.finish()), *self._relations()]:
            yield part

    def _add(self, item: exchange.Incoming) -> Iterator[Part]:
        x = item.record
        self.links += [(item.line, msgspec.to_builtins(r)) for r in x.relations]
        x = msgspec.structs.replace(x, relations=[])
        if self.drop and x.embedding is not None:
            x = msgspec.structs.replace(x, embedding=None)
        record = exchange.as_dict(x)
        size = len(msgspec.json.encode(record)) + 1
        if size > REQUEST_BYTES:
            raise LimitError(f"line {item.line}: the record is {size} bytes as JSON; "
                             f"one import request holds at most {REQUEST_BYTES}")
        targets = frozenset(k.supersedes for k in x.links)
        return map(self._part, self.plan.add(_Entry(item.line, x.id, record, size, targets)))

    def _part(self, entries: list[_Entry], links: Sequence[tuple[int | None, Any]] = ()
              ) -> Part:
        request = requests.ImportRequest(
            records=[e.record for e in entries], batch_size=self.size,
            drop_embeddings=self.drop, relations=[r for _, r in links])
        return Part(request, [e.line for e in entries] or [n for n, _ in links], len(entries))

    def _relations(self) -> Iterator[Part]:
        ranked = sorted(range(len(self.links)), key=lambda i: (
            self.links[i][1].get("order") is None, self.links[i][1].get("order") or 0, i))
        part: list[tuple[int | None, dict[str, Any]]] = []
        size = 0
        for i in ranked:
            n = len(msgspec.json.encode(self.links[i][1])) + 1
            if part and (len(part) >= requests.MAX_IMPORT_RELATIONS or size + n > REQUEST_BYTES):
                yield self._part([], part)
                part, size = [], 0
            part.append(self.links[i])
            size += n
        if part:
            yield self._part([], part)

    def sent(self, part: Part, report: ImportReport) -> None:
        """Count ``part``, which the server wrote with ``report`` (and tell ``progress``)."""
        self.report = ImportReport(**{f: getattr(self.report, f) + getattr(report, f)
                                      for f in ImportReport.__struct_fields__})
        self.done += part.records
        if part.records and self.progress is not None:
            self.progress(self.done)

    @staticmethod
    def renumbered(exc: HolomemError, part: Part) -> HolomemError:
        """``exc`` naming the line of the caller's input where it names the request's."""
        m = _LINE.match(exc.message) or _RELATION.match(exc.message)
        at = -1 if m is None else int(m[1]) - (m.re is _LINE)
        if m is None or not 0 <= at < len(part.lines) or part.lines[at] is None:
            return exc  # one of the call's own relations: its message names it already
        out = copy.copy(exc)
        out.message = f"line {part.lines[at]}: {exc.message[m.end():]}"
        out.args = (out.message,)
        return out
