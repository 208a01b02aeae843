"""The inspector's reading pages: the facts, one fact, the store, the conversations and
working contexts, and the page that says what went wrong.

Owns: what each page asks the store (contract calls through the :class:`~.source.Source`,
every one bounded: a page of at most :data:`~.query.MAX_PAGE` facts, a search of at most
that many results, at most :data:`MAX_VERSIONS` versions of a fact's chain, a ``why`` of
two hops) and how it shows the answer. Each function
runs in a worker thread and returns the page's HTML. Imports the pages' parameters
(:mod:`.query`), the HTML helpers (:mod:`.html`), the timeline and graph drawings
(:mod:`.drawing`) and the source.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any, NamedTuple

from holomem.api.doors.ui import drawing, query
from holomem.api.doors.ui.html import (
    Here,
    dumped,
    esc,
    fields,
    first_time,
    frame,
    link,
    namespace_text,
    status_badge,
    table,
    when,
)
from holomem.api.doors.ui.source import Source
from holomem.errors import HolomemError, NotFoundError

#: How much of a fact's text a row of a list shows.
ROW_TEXT = 160
#: The most versions of a fact's supersession chain its page reads and shows: the
#: nearest ones along the chain's links (:func:`versions`).
MAX_VERSIONS = 100
#: The most links of a fact its page lists, and the most removed facts a forget report
#: shows with their text.
MAX_LINKS = 100
#: The most working-context sessions the conversations page lists.
MAX_SESSIONS = 200
#: The most bytes of a working context's state its page shows.
MAX_STATE = 64 * 1024


def short(value: str, limit: int = ROW_TEXT) -> str:
    return value if len(value) <= limit else value[:limit] + "…"


# -- the facts ---------------------------------------------------------------------------
def _sort_header(here: Here, column: str, label: str, current: str, descending: bool) -> str:
    desc = column == current and not descending
    arrow = "" if column != current else (" ▼" if descending else " ▲")
    return link(here.url(here.path, {**here.params, "sort": column,
                                     "order": "desc" if desc else "asc", "cursor": None}),
                label + arrow, "sort")


def fact_rows(here: Here, records: list[dict[str, Any]], *, scores: bool,
              sort: tuple[str, bool] | None = None, q: str = "") -> str:
    """A table of facts (as the contract gives them), each linked to its page."""
    column, descending = sort if sort is not None else ("", False)
    heads = [("status", "Status"), ("", "Text"), ("subject", "Subject"),
             ("namespace", "Namespace"), ("speaker", "Speaker"), ("ingested", "Ingested"),
             ("valid", "Valid from"), ("", "Valid to"), ("event", "Event")]
    if scores:
        heads.insert(0, ("score", "Score"))
    head = [_sort_header(here, c, label, column, descending) if c and sort is not None
            else esc(label) for c, label in heads]
    rows = []
    for r in records:
        cells = [status_badge(r.get("status")),
                 link(here.url("/fact", {"id": r["id"], "q": q or None}),
                      short(r.get("text", "")) or r["id"], "fact"),
                 esc(r.get("subject") or ""), esc(namespace_text(r.get("namespace"))),
                 esc(r.get("speaker") or ""), esc(when(r.get("ingestTime"))),
                 esc(when(r.get("validFrom"))), esc(when(r.get("validTo"))),
                 esc(when(r.get("eventTime")))]
        if scores:
            cells.insert(0, f'{float(r.get("score", 0.0)):.4f}')
        rows.append(cells)
    return table(head, rows, "facts")


def sorted_records(records: list[dict[str, Any]], column: str,
                   descending: bool) -> list[dict[str, Any]]:
    """``records`` by ``column``: the facts of one page (never more), missing last."""
    if not column:
        return records
    key = query.sort_key(column)
    present = [r for r in records if key(r)[0] == 0]
    missing = [r for r in records if key(r)[0] == 1]
    try:
        present.sort(key=key, reverse=descending)
    except TypeError:  # values of mixed types: compare their text
        present.sort(key=lambda r: str(key(r)[1]), reverse=descending)
    return present + missing


def _filter_form(here: Here, lst: query.Listing) -> str:
    statuses = "".join(
        f'<option value="{s}"' + (" selected" if s == lst.status else "") + f">{s}</option>"
        for s in ("", *query.STATUSES))
    p = here.params
    return (
        f'<form class="filters" method="get" action="{esc(here.base + "/")}">{here.hidden()}'
        '<label>search <input name="q" id="q" size="28" placeholder="recall: a query" '
        f'value="{esc(p.get("q", ""))}"></label>'
        '<label>namespace <input name="namespace" id="namespace" size="14" placeholder="a/b" '
        f'value="{esc(p.get("namespace", ""))}"></label>'
        '<label>subject <input name="subject" id="subject" size="14" '
        f'value="{esc(p.get("subject", ""))}"></label>'
        f'<label>status <select name="status" id="status">{statuses}</select></label>'
        '<label>metadata <input name="metadata" id="metadata" size="22" '
        f'placeholder=\'{{"source": "chat"}}\' value="{esc(p.get("metadata", ""))}"></label>'
        '<label>filter <input name="filter" id="filter" size="26" '
        'placeholder=\'{"metadata": {"n": {"$gt": 2}}}\' '
        f'value="{esc(p.get("filter", ""))}"></label>'
        '<label>per page <input name="limit" id="limit" size="4" '
        f'value="{esc(p.get("limit", query.DEFAULT_PAGE))}"></label>'
        '<button type="submit">Show</button> '
        f'{link(here.url("/"), "clear", "clear")}</form>')


def facts_page(here: Here, source: Source) -> str:
    """The facts: a page of ``list`` (write order, a cursor to the next), or with a
    query the results of ``recall`` with their scores; sorted within the page."""
    lst = query.listing(here.params)
    moment = query.moment(here.params)
    tenant = here.tenant
    next_cursor = None
    if lst.query:
        results = source.call(tenant, "recall", lst.recall_request(moment))["results"]
        records = [{**r["fact"], "score": r["score"]} for r in results]
        if lst.status and lst.status != "current":
            records = [r for r in records if r["status"] == lst.status]
        caption = (f"{len(records)} result(s) of recall for <b>{esc(lst.query)}</b>, best "
                   f"first (at most {lst.limit}); open one to see why it came back.")
    else:
        page = source.call(tenant, "list", lst.list_request(moment))
        records, next_cursor = page["facts"], page.get("nextCursor")
        caption = (f"{len(records)} fact(s) in write order"
                   + (", continuing" if lst.cursor else "") + f" ({page['scanned']} "
                   "examined); the column headers sort this page.")
    records = sorted_records(records, lst.sort, lst.descending)
    pager = []
    if lst.cursor:
        pager.append(link(here.url("/", {**here.params, "cursor": None}), "« first page",
                          "first"))
    if next_cursor:
        pager.append(link(here.url("/", {**here.params, "cursor": next_cursor}),
                          "next page »", "next"))
    try:
        lst.forget_scope()
        forget = link(here.url("/forget", {k: here.params.get(k) for k in
                                           ("namespace", "subject", "metadata")}),
                      "Forget these facts…", "danger")
    except query.BadInput:
        forget = ('<span class="hint">To forget by filter, choose a subject, a metadata '
                  "match or a namespace (and no status, filter box or search).</span>")
    body = (_filter_form(here, lst) + f'<p class="caption">{caption}</p>'
            + (fact_rows(here, records, scores=bool(lst.query),
                         sort=(lst.sort, lst.descending), q=lst.query)
               if records else '<p class="empty">No facts here.</p>')
            + f'<p class="pager">{" ".join(pager)}</p><p class="actions">{forget}</p>')
    return frame(here, "Facts", body, role=source.role(tenant))


# -- one fact ------------------------------------------------------------------------------
def _field_rows(fact: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = []
    for name, value in fact.items():
        if name in ("text",):
            continue
        if name == "embedding":
            shown = "none" if value is None else f"{len(value)} dimensions"
        elif name.endswith("Time") or name in ("validFrom", "validTo", "expiresAt"):
            shown = f"{when(value)} ({value})" if value is not None else ""
        elif name == "namespace":
            shown = namespace_text(value) or "(root)"
        elif name == "status":
            out.append((name, status_badge(value)))
            continue
        elif isinstance(value, (dict, list)):
            shown = dumped(value)
        else:
            shown = "" if value is None else str(value)
        out.append((name, esc(shown)))
    return out


class Versions(NamedTuple):
    """The part of a fact's supersession chain its page shows (:func:`versions`)."""

    #: the versions read, in effect order (the fact among them)
    records: list[dict[str, Any]]
    #: id -> how many versions linked to it are not read (the chain goes on there)
    beyond: dict[str, int]


def versions(source: Source, tenant: str | None, fact: dict[str, Any],
             at: Mapping[str, int]) -> Versions:
    """The versions of ``fact``'s supersession chain nearest to it: from the fact along
    its ``supersedes`` and ``supersededBy`` links, one step at a time, each version read
    with ``get`` at the page's moment, until :data:`MAX_VERSIONS` have been asked for.
    The work is bounded by that number, never by the chain's length (which would take
    ``history``, all of it, to know). In effect order: when each starts to hold, then
    when it was ingested."""
    got: dict[str, dict[str, Any]] = {fact["id"]: fact}
    asked = {fact["id"]}
    walk = collections.deque([fact])
    while walk and len(asked) < MAX_VERSIONS:
        for other in _linked(walk.popleft()):
            if len(asked) >= MAX_VERSIONS:
                break
            if other in asked:
                continue
            asked.add(other)
            record = source.call(tenant, "get", {"id": other, **at})["fact"]
            if record is not None:  # (None: not known at the page's moment)
                got[other] = record
                walk.append(record)
    beyond = {fid: n for fid, r in got.items()
              if (n := sum(1 for o in _linked(r) if o not in asked))}
    order = sorted(got.values(), key=lambda r: (drawing.start(r), int(r["ingestTime"])))
    return Versions(order, beyond)


def _linked(record: Mapping[str, Any]) -> list[str]:
    """The ids a version is linked to by supersession, both ways."""
    return [*(record.get("supersedes") or ()), *(record.get("supersededBy") or ())]


def _chain(here: Here, shown: Versions, fid: str) -> str:
    rows = []
    for n, r in enumerate(shown.records, 1):
        mark = " ◀ this fact" if r["id"] == fid else ""
        more = shown.beyond.get(r["id"])
        onward = (f' <span class="hint">(linked to {more} more not shown: open it to see '
                  "the versions around it)</span>" if more else "")
        rows.append([str(n), status_badge(r["status"]),
                     link(here.url("/fact", {"id": r["id"]}), short(r["text"], 100), "version")
                     + esc(mark) + onward,
                     esc(when(first_time(r, "validFrom", "eventTime", "ingestTime"))),
                     esc(when(r.get("validTo"))), esc(when(r["ingestTime"]))])
    count = len(shown.records)
    if shown.beyond:
        caption = (f"The {count} versions nearest this fact along its supersession links "
                   f"(at most {MAX_VERSIONS} are read); the chain goes on past the ones "
                   "marked, and each one's page shows the versions around it.")
    else:
        caption = f"Every version of its supersession chain ({count})."
    return (f'<p class="caption chain-window">{caption}</p>'
            + table(["#", "Status", "Version", "Holds from", "Valid to", "Known since"], rows,
                    "chain"))


def _links(here: Here, links: list[dict[str, Any]], fid: str) -> str:
    if not links:
        return '<p class="empty">No typed links.</p>'
    rows = []
    for k in links[:MAX_LINKS]:
        other = k["toId"] if k["fromId"] == fid else k["fromId"]
        arrow = "→" if k["fromId"] == fid else "←"
        rows.append([esc(arrow), esc(k["relation"]),
                     link(here.url("/fact", {"id": other}), other), esc(when(k["time"])),
                     esc(dumped(k.get("metadata")) if k.get("metadata") else "")])
    more = (f'<p class="hint">and {len(links) - MAX_LINKS} more</p>'
            if len(links) > MAX_LINKS else "")
    return table(["", "Relation", "Fact", "Made", "Metadata"], rows, "links") + more


def _explain(here: Here, source: Source, fid: str, q: str,
             moment: query.Moment) -> str:
    form = (f'<form class="explain" method="get" action="{esc(here.base + "/fact")}">'
            + here.hidden({"id": fid})
            + '<label>query <input name="q" id="explain-q" size="32" '
            f'value="{esc(q)}"></label><button type="submit">Explain</button></form>')
    if not q:
        return form + ('<p class="hint">Search from the facts page (or type a query) to '
                       "see whether and why this fact comes back for it.</p>")
    e = source.call(here.tenant, "explain",
                    {"query": q, "id": fid, "history": "all", **moment.request()}
                    )["explanation"]
    terms = ", ".join(f"{t['term']} (tf {t['tf']}, idf {t['idf']:.2f})"
                      for t in e.get("matchedTerms", [])[:20])
    pairs = [("retrieved", esc(e["retrieved"])), ("rank", esc(e.get("rank"))),
             ("score", esc(f"{e.get('score', 0.0):.4f}")),
             ("lexical score", esc(f"{e['lexicalScore']:.4f}")),
             ("semantic score", esc(e.get("semanticScore"))),
             ("matched terms", esc(terms)),
             ("recency, history", esc(f"{e['recencyMultiplier']:.3f}, "
                                       f"{e['historyMultiplier']:.3f}")),
             ("status then", status_badge(e.get("status"))),
             ("reason", esc(e.get("reason", "")))]
    return form + fields(pairs)


def fact_page(here: Here, source: Source) -> str:
    """One fact at the page's moment: its text, every field, its status, the
    supersession chain drawn on both time axes, its links and the graph of ``why``
    around it, and ``explain`` for the last query. Errors: ``not_found``."""
    fid = query.text(here.params, "id")
    if not fid:
        raise query.BadInput("which fact? give its id")
    moment = query.moment(here.params)
    q = query.text(here.params, "q")
    tenant = here.tenant
    at = moment.request()
    fact = source.call(tenant, "get", {"id": fid, **at})["fact"]
    if fact is None:
        raise NotFoundError(f"no fact {fid!r}" + (" known at that moment" if at else ""))
    shown = versions(source, tenant, fact, at)
    links = source.call(tenant, "links", {"id": fid, "direction": "both", **at})["links"]
    try:
        why = source.call(tenant, "why", {"query": fid, "maxHops": 2, **at})
    except HolomemError:
        why = None
    forget = (link(here.url("/forget", {"ids": fid}), "Forget this fact…", "danger")
              if source.writes(tenant) else "")
    body = (
        f'<p class="lead">{status_badge(fact["status"])} <span class="id">{esc(fid)}</span>'
        f'</p><blockquote class="text">{esc(fact["text"])}</blockquote>'
        f'<p class="actions">{forget}</p>'
        "<h2>History on both time axes</h2>"
        + drawing.timeline(shown.records, fid, moment)
        + _chain(here, shown, fid)
        + "<h2>Every field</h2>" + fields(_field_rows(fact))
        + "<h2>Links</h2>" + _links(here, links, fid)
        + "<h2>Why: the evidence around it</h2>"
        + (drawing.graph(here, why, fid) if why else '<p class="empty">No graph.</p>')
        + "<h2>Explain</h2>" + _explain(here, source, fid, q, moment))
    return frame(here, "Fact", body, role=source.role(tenant))


# -- the store ---------------------------------------------------------------------------
def _check_block(here: Here, source: Source) -> str:
    last = source.last_check(here.tenant)
    button = (f'<form method="post" action="{esc(here.base + "/store/check")}">'
              + here.hidden() + here.token_field()
              + '<button type="submit" id="run-check">Run a check (fsck)</button></form>')
    if last is None:
        return '<p class="empty">No check run from this inspector yet.</p>' + button
    verdict = {0: "clean", 1: "errors corrected", 4: "errors found",
               8: "could not check"}.get(last["exit"], f"exit {last['exit']}")
    report = last.get("report") or {}
    findings = report.get("findings", []) if isinstance(report, dict) else []
    rows = [[esc(f.get("code", "")), esc(f.get("message", f.get("detail", ""))),
             esc(f.get("segment", "")), esc(f.get("offset", ""))] for f in findings[:100]]
    return (fields([("last check", esc(when(last["time"]))),
                    ("result", f'<b class="verdict v{last["exit"]}">{esc(verdict)}</b>'),
                    ("took", esc(f"{last['seconds']} s")),
                    ("stderr", esc(short(last.get("stderr", ""), 400)))])
            + (table(["Finding", "What", "Segment", "Offset"], rows) if rows else "")
            + button)


def store_page(here: Here, source: Source) -> str:
    """The store: facts, namespaces, generation, checkpoint, bytes on disk, the
    embedder, the configuration, and the last check with a button to run one."""
    tenant = here.tenant
    stats = source.stats(tenant)
    info = source.call(tenant, "info", {})
    spaces = source.call(tenant, "listNamespaces", {"limit": 50})
    pairs = [("directory", esc(source.where(tenant) or "(none on this machine)")),
             ("opened as", esc(source.role(tenant))),
             ("facts", esc(info["facts"])), ("namespaces", esc(info["namespaces"]))]
    if stats is None:
        pairs.append(("store", "this tenant has no store yet: its first write makes one"))
    else:
        on_disk = stats.journal_bytes + stats.text_bytes + stats.index_bytes
        pairs += [("store id", esc(stats.store_id)), ("documents", esc(stats.documents)),
                  ("revision", esc(stats.revision)), ("generation", esc(stats.generation)),
                  ("segments", esc(stats.segments)),
                  ("checkpoint", esc(f"at transaction {stats.checkpoint_seq}, "
                                     f"{stats.checkpoint_tail_bytes} bytes after it"
                                     if stats.checkpoint_seq else "none yet")),
                  ("opened by", esc(f"{stats.opened_by} in {stats.open_seconds:.2f} s")),
                  ("bytes on disk", esc(f"{on_disk:,} (journal {stats.journal_bytes:,}, "
                                        f"text {stats.text_bytes:,}, indexes "
                                        f"{stats.index_bytes:,})")),
                  ("encrypted", esc(stats.encrypted))]
    pairs += [("embedder", esc(dumped(info.get("embedder")) if info.get("embedder")
                               else "none pinned")),
              ("re-embed pending", esc(dumped(info.get("reembedPending"))
                                       if info.get("reembedPending") else "no"))]
    ns_rows = [[link(here.url("/", {"namespace": namespace_text(n["namespace"])}),
                     namespace_text(n["namespace"]) or "(root)"), esc(n["facts"])]
               for n in spaces["namespaces"]]
    more = ('<p class="hint">The first 50 namespaces; <code>holomem list-namespaces</code> '
            "lists them all.</p>" if spaces.get("nextCursor") else "")
    body = (fields(pairs) + "<h2>Namespaces</h2>"
            + (table(["Namespace", "Facts"], ns_rows) if ns_rows else
               '<p class="empty">No namespaces.</p>') + more
            + "<h2>Configuration</h2>"
            + f'<pre class="config">{esc(dumped(info["config"], 16384))}</pre>'
            + "<h2>Check</h2>" + _check_block(here, source))
    return frame(here, "Store", body, role=source.role(tenant))


# -- conversations and working contexts ----------------------------------------------------
def conversations_page(here: Here, source: Source) -> str:
    """The turns of conversations (a session's, or every turn), a page at a time in
    write order, and the working contexts saved in a namespace."""
    tenant = here.tenant
    moment = query.moment(here.params)
    session = query.text(here.params, "session")
    ns = query.namespace(query.text(here.params, "namespace"))
    limit = query.page_size(here.params)
    cursor = query.text(here.params, "cursor")
    flt: dict[str, Any] = {"session": session if session else {"$exists": True}}
    req: dict[str, Any] = {"limit": limit, "filter": flt, **moment.request()}
    if ns is not None:
        req["namespace"] = ns
    if cursor:
        req["cursor"] = cursor
    page = source.call(tenant, "list", req)
    rows = [[esc(r.get("session") or ""), esc(r.get("position")), esc(r.get("speaker") or ""),
             link(here.url("/fact", {"id": r["id"]}), short(r["text"]) or r["id"]),
             status_badge(r["status"]),
             esc(when(first_time(r, "eventTime", "ingestTime")))]
            for r in page["facts"]]
    nxt = page.get("nextCursor")
    pager = (link(here.url("/conversations", {**here.params, "cursor": nxt}), "next page »",
                  "next") if nxt else "")
    form = (f'<form class="filters" method="get" action="{esc(here.base + "/conversations")}">'
            + here.hidden()
            + '<label>session <input name="session" id="session" size="20" '
            f'value="{esc(session)}"></label>'
            '<label>namespace <input name="namespace" size="14" '
            f'value="{esc(here.params.get("namespace", ""))}"></label>'
            '<button type="submit">Show</button></form>')
    contexts = source.call(tenant, "listWorkingContexts",
                           {"namespace": ns} if ns is not None else {})["sessions"]
    ctx_rows = [[link(here.url("/context", {"session": c["session"],
                                            "namespace": here.params.get("namespace")}),
                      c["session"]), esc(c["save"]), esc(when(c["savedAt"])),
                 esc(f"{c['bytes']:,}")] for c in contexts[:MAX_SESSIONS]]
    body = (form + "<h2>Turns</h2>"
            + (table(["Session", "Position", "Speaker", "Text", "Status", "When"], rows,
                     "turns") if rows else '<p class="empty">No conversation turns here.</p>')
            + f'<p class="pager">{pager}</p>'
            + "<h2>Working contexts</h2><p class=\"hint\">The sessions saved in exactly "
            f"the namespace <b>{esc(namespace_text(ns) or '(root)')}</b>.</p>"
            + (table(["Session", "Saves", "Last saved", "Bytes"], ctx_rows) if ctx_rows
               else '<p class="empty">No working contexts saved here.</p>'))
    return frame(here, "Conversations and working contexts", body, role=source.role(tenant))


def context_page(here: Here, source: Source) -> str:
    """One working context: its latest save (or the one asked for)."""
    session = query.text(here.params, "session")
    if not session:
        raise query.BadInput("which session? give its name")
    ns = query.namespace(query.text(here.params, "namespace"))
    req: dict[str, Any] = {"session": session}
    if ns is not None:
        req["namespace"] = ns
    ctx = source.call(here.tenant, "loadWorkingContext", req)["workingContext"]
    state = dumped(ctx["state"], MAX_STATE)
    body = (fields([("session", esc(ctx["session"])),
                    ("namespace", esc(namespace_text(ctx["namespace"]) or "(root)")),
                    ("save", esc(ctx["save"])), ("saved at", esc(when(ctx["savedAt"]))),
                    ("bytes", esc(ctx["bytes"])),
                    ("head fact", link(here.url("/fact", {"id": ctx["head"]}), ctx["head"]))])
            + f'<h2>State</h2><pre class="state">{esc(state)}</pre>')
    return frame(here, "Working context", body, role=source.role(here.tenant))


# -- errors ----------------------------------------------------------------------------------
def error_page(here: Here, status: int, code: str, message: str) -> str:
    body = (f'<p class="error"><b>{esc(status)} {esc(code)}</b>: {esc(message)}</p>'
            f'<p>{link(here.url("/"), "Back to the facts")}</p>')
    return frame(here, "Not possible" if status < 500 else "Error", body)
