"""Working contexts: an agent's scratch state, saved as facts (docs/contract.md §4
"Working contexts").

Owns: how a state becomes facts and back — its checks (a JSON value, not empty, at
most :data:`MAX_STATE_BYTES` in canonical form), the reserved subject
(:data:`SUBJECT_PREFIX` + session), the ids of one save's parts, the supersession
links that make every save a version of the previous one (:func:`plan`), and the
reading of the latest (or a given) save and of a namespace's sessions over a view
(:func:`heads`, :func:`sessions`, :func:`assemble`). Imports the engine's view, the
forgetting module's walk over live facts, the types and validate.

A save of state S for session s in namespace N is one transaction of facts in N,
each of subject ``holomem:working/s``: part 0 (the head) to part p-1, each holding a
slice of S's canonical JSON in its metadata (a fact's metadata holds at most 64 KiB,
so a large state takes several parts). Save number n's parts have ids
``wc-<digest of N and s>-<n>-<i>``; part i supersedes part i of save n-1, and the head
supersedes every part of save n-1 no part of save n replaces, so ``history`` of a head
shows every save and only the latest save is current.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import msgspec

from holomem.api.engine import View, validate
from holomem.api.memory.forget.removal import live_facts
from holomem.api.memory.types import RememberInput
from holomem.errors import InvalidError, LimitError, NotFoundError
from holomem.projections.namespaces import Namespace

#: The subject of every working-context fact: this prefix, then the session.
SUBJECT_PREFIX = "holomem:working/"
#: The largest state, in bytes of its canonical JSON (sorted keys, no whitespace).
MAX_STATE_BYTES = 1 << 20
#: The longest session name.
MAX_SESSION_CHARS = 256
#: The JSON of a state slice in one part's metadata stays under a fact's 64 KiB.
PART_BYTES = 60_000
#: The metadata key holding a part's slice, and the one describing the save.
STATE_KEY = "state"
INFO_KEY = "holomem.working"


class WorkingContext(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A loaded working context: its state, which save it is, when it was saved (the
    head's ingest time) and the id of its head fact (for ``history``)."""

    namespace: list[str]
    session: str
    state: Any
    save: int
    saved_at: int
    bytes: int
    head: str


class WorkingContextInfo(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One session of ``list_working_contexts``: its latest save."""

    session: str
    save: int
    saved_at: int
    bytes: int
    head: str


class WorkingContextList(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    namespace: list[str]
    sessions: list[WorkingContextInfo]


def session(value: object) -> str:
    s = validate.doc_id(value, "session")
    if len(s) > MAX_SESSION_CHARS:
        raise LimitError(f"session is longer than {MAX_SESSION_CHARS} characters")
    return s


def subject(name: str) -> str:
    return SUBJECT_PREFIX + name


def canonical(state: object) -> bytes:
    """The state's canonical JSON. Errors: ``invalid_request`` (not JSON, empty),
    ``limit`` (over :data:`MAX_STATE_BYTES`)."""
    if state is None or (isinstance(state, (Mapping, Sequence)) and not state
                         and not isinstance(state, bytes)):
        raise InvalidError("a working context's state must not be empty (a save never "
                           "erases the previous one; forget the session to remove it)")
    try:
        raw = json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                         allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidError(f"a working context's state must be JSON: {exc}") from None
    if len(raw) > MAX_STATE_BYTES:
        raise LimitError(f"the state is {len(raw)} bytes of JSON; the limit is "
                         f"{MAX_STATE_BYTES}")
    return raw


def _slices(raw: bytes) -> list[str]:
    """The state's JSON cut into slices whose JSON string form fits a part."""
    text = raw.decode("utf-8")
    out: list[str] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + PART_BYTES // 6)  # 6 bytes: the worst escape
        grow = PART_BYTES // 6
        while end < len(text) and grow > 0:  # take more while it fits
            trial = min(len(text), end + grow)
            if len(json.dumps(text[start:trial], ensure_ascii=False).encode()) <= PART_BYTES:
                end = trial
            else:
                grow //= 2
        out.append(text[start:end])
        start = end
    return out


def _key(ns: Namespace, name: str) -> str:
    return hashlib.sha256(json.dumps([list(ns), name]).encode()).hexdigest()[:16]


def part_id(ns: Namespace, name: str, save: int, part: int) -> str:
    return f"wc-{_key(ns, name)}-{save}-{part}"


class Head(NamedTuple):
    save: int
    parts: int
    bytes: int
    sha256: str
    id: str
    ingest: int


def heads(view: View, ns: Namespace, name: str) -> list[Head]:
    """Every stored save of session ``name`` in exactly ``ns``, oldest first."""
    facts = view.facts
    out = []
    for fid in facts.subject_members(subject(name), ns):
        info = _info(view, fid)
        if info is not None and info.get("part") == 0:
            out.append(Head(int(info["save"]), int(info["parts"]), int(info["bytes"]),
                            str(info["sha256"]), fid, facts.ingest.item(facts.slot(fid))))
    return sorted(out)


def _info(view: View, fid: str) -> dict[str, Any] | None:
    meta = validate.load_metadata(view.record(view.slot(fid)).metadata)
    info = meta.get(INFO_KEY) if meta else None
    return info if isinstance(info, dict) else None


def plan(view: View, ns: Namespace, name: str, raw: bytes) -> list[RememberInput]:
    """The facts of the next save of ``raw`` (under the write lock)."""
    saved = heads(view, ns, name)
    last = saved[-1] if saved else None
    n = last.save + 1 if last else 1
    slices = _slices(raw)
    digest = hashlib.sha256(raw).hexdigest()
    old = [part_id(ns, name, last.save, i) for i in range(last.parts)] if last else []
    old = [i for i in old if view.facts.slot(i) >= 0]
    out = []
    for i, piece in enumerate(slices):
        replaces = [part_id(ns, name, n - 1, i)] if last and i < last.parts else []
        if i == 0:
            replaces += [p for p in old[len(slices):]]
        info: dict[str, Any] = {"session": name, "save": n, "part": i}
        if i == 0:
            info.update(parts=len(slices), bytes=len(raw), sha256=digest)
        out.append(RememberInput(
            id=part_id(ns, name, n, i), subject=subject(name), namespace=list(ns) or None,
            text=f"working context {name}: save {n}, part {i + 1} of {len(slices)}",
            metadata={INFO_KEY: info, STATE_KEY: piece},
            supersedes=[r for r in replaces if r in old] or None))
    return out


def assemble(view: View, ns: Namespace, name: str, save: int | None) -> WorkingContext:
    """The state of the latest save of ``name`` (or of save number ``save``).

    Errors: ``not_found`` naming the namespace's other sessions.
    """
    saved = heads(view, ns, name)
    chosen = ([h for h in saved if h.save == save] if save is not None else saved[-1:])
    if not chosen:
        others = [s for s in sessions(view, ns) if s.session != name]
        listed = ", ".join(repr(s.session) for s in others[:50]) or "none"
        what = f"save {save} of session {name!r}" if saved else f"session {name!r}"
        raise NotFoundError(f"no working context {what} in namespace {list(ns)}; the "
                            f"namespace's sessions: {listed}")
    head = chosen[0]
    pieces = []
    for i in range(head.parts):
        fid = part_id(ns, name, head.save, i)
        if view.facts.slot(fid) < 0:
            raise NotFoundError(f"part {i} of save {head.save} of session {name!r} was "
                                "forgotten; that save cannot be loaded")
        meta = validate.load_metadata(view.record(view.slot(fid)).metadata) or {}
        pieces.append(str(meta.get(STATE_KEY, "")))
    raw = "".join(pieces).encode("utf-8")
    if hashlib.sha256(raw).hexdigest() != head.sha256:
        raise InvalidError(f"save {head.save} of session {name!r} does not match its "
                           "digest: its facts were changed by hand")
    return WorkingContext(namespace=list(ns), session=name, state=json.loads(raw),
                          save=head.save, saved_at=head.ingest, bytes=head.bytes,
                          head=head.id)


def sessions(view: View, ns: Namespace) -> list[WorkingContextInfo]:
    """The sessions saved in exactly ``ns``, by name, each with its latest save."""
    facts = view.facts
    latest: dict[str, Head] = {}
    for s in live_facts(view, ns):
        slot = int(s)
        if facts.namespace(slot) != ns:
            continue
        subj = facts.times(slot).subject
        if subj is None or not subj.startswith(SUBJECT_PREFIX):
            continue
        name = subj[len(SUBJECT_PREFIX):]
        if name not in latest:
            hs = heads(view, ns, name)
            if hs:
                latest[name] = hs[-1]
    return [WorkingContextInfo(session=name, save=h.save, saved_at=h.ingest, bytes=h.bytes,
                               head=h.id) for name, h in sorted(latest.items())]
