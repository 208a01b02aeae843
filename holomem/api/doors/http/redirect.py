"""Where a write goes when another server is the tenant's writer (docs/scale-out.md §8.7).

Owns: the answer to a write that met ``locked`` on a server sharing its tenants over a
``--journal``: a ``307 Temporary Redirect`` to the same route on the writer's advertised
URL (recorded beside its lease), with the usual error body plus ``holder`` and
``writer``; or ``423 locked`` when no other URL is known (no URL was advertised, or the
lease is this very server's, left by a previous run of it until it expires). Imports
starlette and :mod:`holomem.errors`.

307 and not 303: a client that follows it sends the same method and the same body, so
the write reaches the writer exactly as it was sent.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from holomem.errors import StoreLockedError

REDIRECT_STATUS = 307


def advertised(journal: str | None) -> str:
    """The ``advertise=`` option of a ``--journal`` address (this server's URL), or ""."""
    if not journal:
        return ""
    opts = dict(parse_qsl(urlsplit(journal).query, keep_blank_values=True))
    return opts.get("advertise", "").rstrip("/")


def locked(exc: StoreLockedError, request: Request, own: str) -> Response:
    """The answer to a write refused ``locked``: a redirect to the writer's server for
    the same route, or 423 when there is none to send it to."""
    body: dict[str, object] = {"code": exc.code, "message": exc.message}
    if exc.holder is not None:
        body["holder"] = exc.holder
    writer = exc.writer
    if writer is None or writer.rstrip("/") == own:
        if writer is not None:
            body["writer"] = writer
        return JSONResponse({"error": body}, status_code=exc.status)
    body["writer"] = writer
    query = request.url.query
    location = writer.rstrip("/") + request.url.path + (f"?{query}" if query else "")
    return JSONResponse({"error": body}, status_code=REDIRECT_STATUS,
                        headers={"location": location})
