"""The inspector's one page that changes the store: forget, always a dry run first.

Owns the three steps: (1) ``GET /forget`` with a scope (a fact's id, or the facts
page's subject, metadata match or namespace) runs ``forget`` with ``dryRun`` and shows
exactly what would go — every fact and why (matched by the scope, in its supersession
chain, or derived from one that goes), the supersession links re-made around them, and
every typed link that would be dropped with it — and a confirmation form; (2) ``POST
/forget`` (the form's token checked by the routes) plans the same forget again and
refuses if anything differs from what the person saw (the store changed meanwhile),
else forgets; purging is a separate box, unticked; (3) the report.

Two choices widen a scope, each shown before it is confirmed: ``chain`` (forget's
``includeChain``) and ``derived``: also the facts a conversation's extractor derived
from the facts that go (they hold a ``derived_from`` link to one; a forget alone keeps
them and drops the link), as one ``ids`` scope. Imports the pages' parameters, the
HTML helpers and the source.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, NamedTuple

from holomem.api.doors.ui import query
from holomem.api.doors.ui.html import Here, esc, fields, frame, link, namespace_text, table
from holomem.api.doors.ui.source import Source

#: The facts page's parameters a forget scope is made of (any other filter is refused).
FILTERS = ("namespace", "subject", "metadata", "status", "filter", "q")
#: Every parameter of a forget: the scope's, and the two choices that widen it.
PARAMS = ("ids", *FILTERS, "chain", "derived")
#: The most facts a dry run or a report lists with their text and links (the rest are
#: counted), and the most links listed per fact.
MAX_SHOWN = 200
MAX_LINKS = 20
#: The relation from an extracted fact to the turn it came from (conversation/links.py).
DERIVED_FROM = "derived_from"


def scope_of(params: Mapping[str, str]) -> tuple[dict[str, Any], list[str] | None]:
    """The forget scope and ``within`` the parameters name: ``ids`` (one fact), else the
    facts page's filter. Errors: :class:`~.query.BadInput`."""
    fid = query.text(params, "ids")
    if fid:
        return {"ids": [fid]}, None
    return query.listing({k: v for k, v in params.items()
                          if k in FILTERS}).forget_scope()


def _request(scope: dict[str, Any], within: list[str] | None, chain: bool, *,
             dry_run: bool, purge: bool = False) -> dict[str, Any]:
    req: dict[str, Any] = {"scope": scope, "includeChain": chain, "dryRun": dry_run,
                           "purge": purge}
    if within is not None:
        req["within"] = within
    return req


class Plan(NamedTuple):
    """A forget as the person sees it before confirming."""

    #: the scope and within the page named
    asked: dict[str, Any]
    within: list[str] | None
    chain: bool
    derived: bool
    #: the request that does it (its scope: ``ids`` when derived facts are added)
    request: dict[str, Any]
    #: its dry run
    report: dict[str, Any]
    #: why each removed fact goes: "matched", "chain" or "derived"
    why: dict[str, str]


def plan(source: Source, tenant: str | None, params: Mapping[str, str]) -> Plan:
    """The forget the parameters ask for, planned by dry runs only (nothing changes)."""
    asked, within = scope_of(params)
    chain = params.get("chain", "") == "1"
    derived = params.get("derived", "") == "1"

    def dry(scope: dict[str, Any], with_chain: bool) -> dict[str, Any]:
        return source.call(tenant, "forget", _request(scope, within, with_chain,
                                                      dry_run=True))

    matched = dry(asked, False)
    why = {fid: "matched" for fid in matched["removed"]}
    report = dry(asked, True) if chain else matched
    for fid in report["removed"]:
        why.setdefault(fid, "chain")
    scope = asked
    if derived:
        extra = [d for fid in report["removed"] for d in _derived_from(source, tenant, fid)
                 if d not in why]
        if extra:
            for d in extra:
                why[d] = "derived"
            scope = {"ids": [*report["removed"], *dict.fromkeys(extra)]}
            report = dry(scope, chain)
            for fid in report["removed"]:
                why.setdefault(fid, "chain")
    return Plan(asked, within, chain, derived, _request(scope, within, chain, dry_run=True),
                report, why)


def _derived_from(source: Source, tenant: str | None, fid: str) -> list[str]:
    """The facts that hold a ``derived_from`` link to ``fid``."""
    got = source.call(tenant, "links", {"id": fid, "direction": "in",
                                        "relation": DERIVED_FROM})
    return [k["fromId"] for k in got["links"]]


def digest(report: Mapping[str, Any]) -> str:
    """What a dry run would do, in a few characters: the same digest, the same change."""
    h = hashlib.sha256()
    for fid in sorted(report["removed"]):
        h.update(fid.encode() + b"\0")
    for r in sorted((r["successor"], r["predecessor"]) for r in report["relinked"]):
        h.update(f"{r[0]}>{r[1]}\0".encode())
    h.update(str(report.get("unlinked", 0)).encode())
    return h.hexdigest()[:24]


def _describe(scope: Mapping[str, Any], within: list[str] | None) -> str:
    (kind, value), = scope.items()
    shown = {"ids": lambda v: f"the fact {v[0]}", "subject": lambda v: f"subject {v}",
             "metadata": lambda v: f"metadata matching {v}",
             "namespace": lambda v: f"namespace {namespace_text(v) or '(root)'} and under"}
    text = shown[kind](value)
    return text + (f", within {namespace_text(within)}" if within else "")


WHY = {"matched": "in the scope", "chain": "in its supersession chain",
       "derived": "derived from one that goes"}


def _what_goes(here: Here, source: Source, p: Plan) -> str:
    removed = p.report["removed"]
    gone = set(removed)
    rows, dropped = [], []
    for fid in removed[:MAX_SHOWN]:
        fact = source.call(here.tenant, "get", {"id": fid})["fact"]
        text = fact["text"] if fact else "(gone)"
        rows.append([link(here.url("/fact", {"id": fid}), fid),
                     esc(text[:200] + ("…" if len(text) > 200 else "")),
                     esc(fact.get("subject") or "") if fact else "",
                     esc(WHY.get(p.why.get(fid, "matched"), ""))])
        links = source.call(here.tenant, "links", {"id": fid, "direction": "both"})["links"]
        for k in links[:MAX_LINKS]:
            other = k["toId"] if k["fromId"] == fid else k["fromId"]
            if other in gone and k["fromId"] != fid:
                continue  # a link between two that go: listed once, from its source
            stays = other not in gone
            note = ("stays; derived from this fact" if stays and k["relation"] == DERIVED_FROM
                    and k["toId"] == fid else "stays" if stays else "goes too")
            dropped.append([esc(k["fromId"]), esc(k["relation"]), esc(k["toId"]),
                            link(here.url("/fact", {"id": other}), note)])
    more = (f'<p class="hint">and {len(removed) - MAX_SHOWN} more.</p>'
            if len(removed) > MAX_SHOWN else "")
    relinks = [[esc(r["successor"]), esc(r["predecessor"])]
               for r in p.report["relinked"][:100]]
    return (f'<h2>{len(removed)} fact(s)</h2>'
            + (table(["Fact", "Text", "Subject", "Why it goes"], rows, "removed") if rows else
               '<p class="empty">Nothing matches: nothing would go.</p>') + more
            + ("<h2>Supersession links re-made around them</h2>"
               + table(["Successor", "now supersedes"], relinks) if relinks else "")
            + f"<h2>Typed links dropped: {esc(p.report.get('unlinked', 0))}</h2>"
            + (table(["From", "Relation", "To", "The other fact"], dropped, "dropped")
               if dropped else ""))


def _keep(params: Mapping[str, str]) -> dict[str, str | None]:
    return {k: params.get(k) for k in PARAMS}


def dry_run_page(here: Here, source: Source) -> str:
    """Step 1: what a forget of the page's scope would remove, and the confirmation."""
    p = plan(source, here.tenant, here.params)
    keep = _keep(here.params)
    toggles = [
        link(here.url("/forget", {**keep, "chain": None if p.chain else "1"}),
             "leave the supersession chain out" if p.chain else
             "include the whole supersession chain (earlier and later versions)"),
        link(here.url("/forget", {**keep, "derived": None if p.derived else "1"}),
             "leave the facts derived from them out" if p.derived else
             "include the facts a conversation's extractor derived from them")]
    removed = p.report["removed"]
    if here.read_only or not source.writes(here.tenant):
        confirm = ('<p class="hint">This inspector only reads the store (another process '
                   "writes it, or --read-only): it cannot forget.</p>")
    elif not removed:
        confirm = ""
    else:
        confirm = (
            f'<form class="confirm" method="post" action="{esc(here.base + "/forget")}">'
            + here.hidden({**keep, "expect": digest(p.report)}) + here.token_field()
            + '<p><label class="purge"><input type="checkbox" name="purge" value="1" '
            'id="purge"> also <b>purge</b>: compact the store so that no file keeps the '
            "removed text (slower; a separate choice)</label></p>"
            f'<button type="submit" id="confirm" class="danger">Forget {len(removed)} '
            f'fact(s)</button> {link(here.url("/"), "cancel")}</form>')
    body = (f'<p class="dry">Dry run: nothing has changed yet. Forgetting '
            f'<b>{esc(_describe(p.asked, p.within))}</b> would remove:</p>'
            + _what_goes(here, source, p)
            + "<p>" + " · ".join(toggles) + "</p>" + confirm)
    return frame(here, "Forget: dry run", body, role=source.role(here.tenant))


def forget_page(here: Here, source: Source, form: Mapping[str, str]) -> tuple[int, str]:
    """Steps 2 and 3: forget what the confirmed dry run showed, and report."""
    p = plan(source, here.tenant, form)
    if digest(p.report) != form.get("expect", ""):
        body = ('<p class="error">The store changed since the dry run: what would go is no '
                "longer what you saw, so nothing was forgotten.</p><p>"
                + link(here.url("/forget", _keep(form)), "Look again") + "</p>")
        return 409, frame(here, "Forget: not done", body)
    purge = form.get("purge", "") == "1"
    report = source.call(here.tenant, "forget",
                         {**p.request, "dryRun": False, "purge": purge}, writes=True)
    rows = [[esc(fid)] for fid in report["removed"][:MAX_SHOWN]]
    body = (f'<p class="done">Forgot <b>{len(report["removed"])}</b> fact(s) of '
            f"{esc(_describe(p.asked, p.within))}"
            + ("; the store was purged: no file keeps their text." if report["purged"]
               else "; not purged (their bytes go at the next compaction).") + "</p>"
            + table(["Removed"], rows, "removed")
            + fields([("supersession links re-made", esc(len(report["relinked"]))),
                      ("typed links dropped", esc(report.get("unlinked", 0)))])
            + f'<p>{link(here.url("/"), "Back to the facts")}</p>')
    return 200, frame(here, "Forget: done", body, role=source.role(here.tenant))
