"""HTML for the inspector: escaping, links that keep the page's moment, and the frame of
every page (its navigation and its "as of" / "known at" controls).

Owns: :func:`esc` (every value from a store is hostile input: a fact's text, its
metadata, an id, a namespace — all of it goes out escaped, in text and in attributes),
:class:`Here` (the request as the pages see it: its base path, the parameters that
stay from page to page, the form token), times as a person reads them, and
:func:`frame`. Imports only the memory tier's reading of a time (``dates.moment``).
"""

from __future__ import annotations

import html
import json
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from holomem.api.memory.dates import moment

#: The parameters every link and form keeps: the moment and the tenant.
STICKY = ("asOf", "knownAt", "tenant")


def esc(value: object) -> str:
    """``value`` as text in HTML, quotes escaped too (safe in an attribute)."""
    return html.escape("" if value is None else str(value), quote=True)


def when(ms: int | None) -> str:
    """A time in milliseconds as a person reads it, in UTC (empty for None)."""
    if ms is None:
        return ""
    at = moment(ms)
    if at is None:  # a year outside 1..9999: the number, which a form takes back
        return str(ms)
    shown = (f"{at.year:04d}-{at.month:02d}-{at.day:02d} "
             f"{at.hour:02d}:{at.minute:02d}:{at.second:02d}")
    if ms % 1000:
        shown += f".{ms % 1000:03d}"
    return shown + "Z"


def first_time(record: Mapping[str, Any], *fields: str) -> int | None:
    """The first of ``fields`` that ``record`` holds a time for (0, 1970-01-01, is one),
    or None."""
    for name in fields:
        value = record.get(name)
        if value is not None:
            return int(value)
    return None


def when_input(ms: int | None) -> str:
    """A time as it goes back into a form field (ISO 8601, UTC, milliseconds kept)."""
    return when(ms).replace(" ", "T")


def dumped(value: Any, limit: int = 4096) -> str:
    """A JSON value as compact text, cut at ``limit`` characters."""
    out = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return out if len(out) <= limit else out[:limit] + f"… ({len(out)} characters)"


def namespace_text(parts: Iterable[str] | None) -> str:
    parts = list(parts or [])
    if any("/" in p for p in parts):
        return json.dumps(parts, ensure_ascii=False)
    return "/".join(parts)


class Here(NamedTuple):
    """A request as the pages see it."""

    #: where the inspector is mounted ("" or "/ui")
    base: str
    #: the page's own path under ``base`` ("/", "/fact", ...)
    path: str
    #: the request's query parameters
    params: Mapping[str, str]
    #: the token every form that changes something carries
    token: str
    #: the tenant, when the inspector serves a server's tenants
    tenant: str | None
    #: whether this inspector never writes (a follower, or --read-only)
    read_only: bool

    def sticky(self) -> dict[str, str]:
        return {k: self.params[k] for k in STICKY if self.params.get(k)}

    def url(self, path: str, params: Mapping[str, object] | None = None, *,
            keep: bool = True) -> str:
        """A link to ``path`` with ``params`` (empty ones left out), keeping the moment
        and the tenant when ``keep``."""
        query = self.sticky() if keep else {}
        for k, v in (params or {}).items():
            if v is None or v == "":
                query.pop(k, None)
            else:
                query[k] = str(v)
        encoded = urllib.parse.urlencode(query)
        return f"{self.base}{path}" + (f"?{encoded}" if encoded else "")

    def hidden(self, params: Mapping[str, object] | None = None, *,
               keep: bool = True) -> str:
        """Hidden form fields: the sticky parameters and ``params``."""
        fields: dict[str, object] = dict(self.sticky()) if keep else {}
        fields.update({k: v for k, v in (params or {}).items() if v not in (None, "")})
        return "".join(f'<input type="hidden" name="{esc(k)}" value="{esc(v)}">'
                       for k, v in fields.items())

    def token_field(self) -> str:
        return f'<input type="hidden" name="token" value="{esc(self.token)}">'


def link(href: str, label: object, cls: str = "") -> str:
    extra = f' class="{esc(cls)}"' if cls else ""
    return f'<a href="{esc(href)}"{extra}>{esc(label)}</a>'


def status_badge(status: object) -> str:
    name = str(status or "unknown")
    return f'<span class="status s-{esc(name)}">{esc(name)}</span>'


def table(head: Iterable[str], rows: Iterable[Iterable[str]], cls: str = "") -> str:
    """A table of cells that are HTML already (escaped by the caller)."""
    out = [f'<table class="{esc(cls)}"><thead><tr>']
    out += [f"<th>{h}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def fields(pairs: Iterable[tuple[str, str]]) -> str:
    """A definition list of (name, HTML) pairs."""
    return '<dl class="fields">' + "".join(
        f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in pairs) + "</dl>"


NAV = (("/", "Facts"), ("/conversations", "Conversations"), ("/store", "Store"))


def _moment_form(here: Here) -> str:
    """The "as of" and "known at" controls: a GET form back to this page, keeping its
    other parameters (not its cursor: a page of another moment starts over)."""
    kept = {k: v for k, v in here.params.items()
            if k not in ("asOf", "knownAt", "cursor", "token")}
    as_of = here.params.get("asOf", "")
    known = here.params.get("knownAt", "")
    now = "" if not (as_of or known) else link(
        here.url(here.path, {**kept, "asOf": None, "knownAt": None}), "back to now",
        "now")
    return (f'<form class="moment" method="get" action="{esc(here.base + here.path)}">'
            + "".join(f'<input type="hidden" name="{esc(k)}" value="{esc(v)}">'
                      for k, v in kept.items())
            + '<label>as of <input name="asOf" id="asOf" size="22" placeholder="now" '
            f'value="{esc(as_of)}"></label>'
            '<label>known at <input name="knownAt" id="knownAt" size="22" '
            f'placeholder="everything" value="{esc(known)}"></label>'
            f'<button type="submit">Travel</button> {now}</form>')


def frame(here: Here, title: str, body: str, *, role: str = "") -> str:
    """The whole page: head, navigation, the moment's controls, ``body`` (HTML)."""
    nav = "".join(
        f'<a href="{esc(here.url(path))}"'
        + (' class="here"' if path == here.path else "") + f">{esc(name)}</a>"
        for path, name in NAV)
    tenant = ""
    if here.tenant is not None:
        tenant = (f'<form class="tenant" method="get" action="{esc(here.base + "/")}">'
                  + here.hidden({"tenant": None}, keep=False)
                  + f'<label>tenant <input name="tenant" size="12" value="{esc(here.tenant)}">'
                  '</label><button type="submit">Open</button></form>')
    as_of = here.params.get("asOf") or here.params.get("knownAt")
    travelling = ('<p class="travel">Answering as of '
                  f'<b>{esc(here.params.get("asOf") or "now")}</b>, knowing what was '
                  f'ingested by <b>{esc(here.params.get("knownAt") or "now")}</b>.</p>'
                  if as_of else "")
    shown_role = f'<span class="role">{esc(role)}</span>' if role else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} · holomem</title>"
        f'<link rel="stylesheet" href="{esc(here.base)}/static/ui.css">'
        f'<link rel="icon" href="{esc(here.base)}/static/icon.svg" type="image/svg+xml">'
        f'</head><body><header><span class="brand">holomem</span><nav>{nav}</nav>'
        f"{tenant}{shown_role}</header>"
        f'<div class="bar">{_moment_form(here)}</div>{travelling}'
        f"<main><h1>{esc(title)}</h1>{body}</main></body></html>")
