"""The inspector's one page that changes the store: forget, always a dry run first.

Owns the three steps: (1) ``GET /forget`` with a scope (a fact's id, or the facts
page's subject, metadata match or namespace) runs ``forget`` with ``dryRun`` and shows
exactly what would go — every fact (with the supersession chain when asked), the links
re-made around them, the typed links dropped — and a confirmation form; (2) ``POST
/forget`` (the form's token checked by the routes) runs the dry run again and refuses
if anything differs from what the person saw (the store changed meanwhile), else
forgets; purging is a separate box, unticked; (3) the report. Imports the pages'
parameters, the HTML helpers and the source.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from holomem.api.doors.ui import query
from holomem.api.doors.ui.html import Here, esc, fields, frame, link, namespace_text, table
from holomem.api.doors.ui.source import Source

#: The facts page's parameters a forget scope is made of (any other filter is refused).
FILTERS = ("namespace", "subject", "metadata", "status", "filter", "q")
#: The most facts a dry run or a report lists with their text (the rest are counted).
MAX_SHOWN = 200


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


def _what_goes(here: Here, source: Source, report: Mapping[str, Any]) -> str:
    removed = report["removed"]
    rows = []
    for fid in removed[:MAX_SHOWN]:
        fact = source.call(here.tenant, "get", {"id": fid})["fact"]
        text = fact["text"] if fact else "(gone)"
        rows.append([link(here.url("/fact", {"id": fid}), fid),
                     esc(text[:200] + ("…" if len(text) > 200 else "")),
                     esc(fact.get("subject") or "") if fact else ""])
    more = (f'<p class="hint">and {len(removed) - MAX_SHOWN} more.</p>'
            if len(removed) > MAX_SHOWN else "")
    relinks = [[esc(r["successor"]), esc(r["predecessor"])] for r in report["relinked"][:100]]
    return (f'<h2>{len(removed)} fact(s)</h2>'
            + (table(["Fact", "Text", "Subject"], rows, "removed") if rows else
               '<p class="empty">Nothing matches: nothing would go.</p>') + more
            + ("<h2>Supersession links re-made around them</h2>"
               + table(["Successor", "now supersedes"], relinks) if relinks else "")
            + fields([("typed links dropped", esc(report.get("unlinked", 0)))]))


def dry_run_page(here: Here, source: Source) -> str:
    """Step 1: what a forget of the page's scope would remove, and the confirmation."""
    scope, within = scope_of(here.params)
    chain = here.params.get("chain", "") == "1"
    report = source.call(here.tenant, "forget",
                         _request(scope, within, chain, dry_run=True))
    keep = {k: here.params.get(k) for k in ("ids", "namespace", "subject", "metadata")}
    toggle = link(here.url("/forget", {**keep, "chain": None if chain else "1"}),
                  "leave the supersession chain out" if chain else
                  "include the whole supersession chain (earlier and later versions)")
    if here.read_only:
        confirm = ('<p class="hint">This inspector only reads the store: it cannot '
                   "forget.</p>")
    elif not report["removed"]:
        confirm = ""
    else:
        confirm = (
            f'<form class="confirm" method="post" action="{esc(here.base + "/forget")}">'
            + here.hidden({**keep, "chain": "1" if chain else None, "expect": digest(report)})
            + here.token_field()
            + '<p><label class="purge"><input type="checkbox" name="purge" value="1" '
            'id="purge"> also <b>purge</b>: compact the store so that no file keeps the '
            "removed text (slower; a separate choice)</label></p>"
            f'<button type="submit" id="confirm" class="danger">Forget '
            f'{len(report["removed"])} fact(s)</button> '
            f'{link(here.url("/"), "cancel")}</form>')
    body = (f'<p class="dry">Dry run: nothing has changed yet. Forgetting '
            f'<b>{esc(_describe(scope, within))}</b> would remove:</p>'
            + _what_goes(here, source, report) + f"<p>{toggle}</p>" + confirm)
    return frame(here, "Forget: dry run", body, role=source.role(here.tenant))


def forget_page(here: Here, source: Source, form: Mapping[str, str]) -> tuple[int, str]:
    """Steps 2 and 3: forget what the confirmed dry run showed, and report."""
    scope, within = scope_of(form)
    chain = form.get("chain", "") == "1"
    purge = form.get("purge", "") == "1"
    again = source.call(here.tenant, "forget", _request(scope, within, chain, dry_run=True))
    if digest(again) != form.get("expect", ""):
        body = ('<p class="error">The store changed since the dry run: what would go is no '
                "longer what you saw, so nothing was forgotten.</p><p>"
                + link(here.url("/forget", {k: form.get(k) for k in
                                            ("ids", "namespace", "subject", "metadata",
                                             "chain")}), "Look again")
                + "</p>")
        return 409, frame(here, "Forget: not done", body)
    report = source.call(here.tenant, "forget",
                         _request(scope, within, chain, dry_run=False, purge=purge),
                         writes=True)
    rows = [[esc(fid)] for fid in report["removed"][:MAX_SHOWN]]
    body = (f'<p class="done">Forgot <b>{len(report["removed"])}</b> fact(s) of '
            f"{esc(_describe(scope, within))}"
            + ("; the store was purged: no file keeps their text." if report["purged"]
               else "; not purged (their bytes go at the next compaction).") + "</p>"
            + table(["Removed"], rows, "removed")
            + fields([("supersession links re-made", esc(len(report["relinked"]))),
                      ("typed links dropped", esc(report.get("unlinked", 0)))])
            + f'<p>{link(here.url("/"), "Back to the facts")}</p>')
    return 200, frame(here, "Forget: done", body, role=source.role(here.tenant))
