"""The inspector's web application: its routes, who may use it, and the headers of every
answer.

Owns :func:`create_ui`, a Starlette application (``holomem ui`` serves it behind the
HTTP door's :class:`~holomem.api.doors.http.webguard.Guard`; ``holomem serve`` mounts it
at ``/ui`` behind its own):

- ``GET /`` the facts, ``GET /fact?id=`` one fact, ``GET /store``, ``GET
  /conversations``, ``GET /context?session=`` a working context; ``GET /forget`` a dry
  run, ``POST /forget`` the forget itself; ``POST /store/check`` runs a check;
  ``GET|POST /login`` when a key is required; ``GET /static/NAME`` the stylesheet and
  the icon, read from the package (nothing is fetched from another host).
- Every page runs its store calls in a worker thread, and is bounded
  (:mod:`.pages`); a bad parameter is a 400 page naming it, a missing fact a 404.
- Who may use it: with an API key, a request carries it (``X-API-Key`` or
  ``Authorization: Bearer``, as the HTTP API takes it) or the sign-in cookie the login
  form sets (``HttpOnly``, ``SameSite=Strict``), which holds a keyed digest, never the
  key.
- Cross-site requests: the Guard lets a request with an ``Origin`` through only from
  this server's own pages; on top of that every POST must be a form of this
  application: ``application/x-www-form-urlencoded``, at most :data:`MAX_FORM` bytes,
  carrying the token every form here holds (a keyed digest no other site can read).
- Every answer forbids scripts, frames, and any source but this server
  (Content-Security-Policy), and says ``nosniff`` and ``same-origin`` referrers (with
  ``no-referrer`` a browser sends a form's Origin as ``null``, which the Guard refuses).

Imports starlette, the pages, the source, and the errors.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from holomem.api.doors.ui import forms, pages, query
from holomem.api.doors.ui.html import STICKY, Here, esc, frame
from holomem.api.doors.ui.source import Source
from holomem.errors import HolomemError, InvalidError
from holomem.log import fs

#: The largest form body taken.
MAX_FORM = 64 * 1024
#: The sign-in cookie.
COOKIE = "holomem_ui"
#: What every answer says about where its page may load anything from: this server
#: only; no script at all; no frame around it; forms post back here only.
CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
HEADERS = {"content-security-policy": CSP, "x-content-type-options": "nosniff",
           "referrer-policy": "same-origin", "x-frame-options": "DENY",
           "cache-control": "no-store"}
#: The files under static/ that are served, and their media types.
STATIC = {"ui.css": "text/css; charset=utf-8", "icon.svg": "image/svg+xml"}

Page = Callable[[Here, Source], str]


def _static_files() -> dict[str, bytes]:
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
    return {name: fs.read_file(os.path.join(root, name)) for name in STATIC}


def _html(body: str, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return HTMLResponse(body, status_code=status, headers={**HEADERS, **(headers or {})})


def create_ui(source: Source, *, api_key: str | None = None) -> Starlette:
    """The inspector over ``source``. ``api_key``: the key a request must carry (or the
    sign-in cookie made from it); None: none needed (a loopback ``holomem ui``)."""
    expected = api_key.encode() if api_key else None
    secret = os.urandom(32)  # this process's: its forms' token and its cookie
    token = hmac.new(secret, b"holomem-ui-form", hashlib.sha256).hexdigest()
    session = (hmac.new(expected, b"holomem-ui-session", hashlib.sha256).hexdigest()
               if expected is not None else "")
    static = _static_files()

    def authorised(request: Request) -> bool:
        if expected is None:
            return True
        given = request.headers.get("x-api-key", "")
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given = auth[7:]
        if given and hmac.compare_digest(given.encode(), expected):
            return True
        cookie = request.cookies.get(COOKIE, "")
        return bool(cookie) and hmac.compare_digest(cookie.encode(), session.encode())

    def here_of(request: Request, params: dict[str, str] | None = None) -> Here:
        base = request.scope.get("root_path", "")
        path = request.url.path[len(base):] or "/"
        given = dict(request.query_params) if params is None else params
        tenant = None
        if source.tenants:
            tenant = given.get("tenant") or "default"
        else:
            given.pop("tenant", None)
        return Here(base, path, given, token, tenant, source.read_only)

    async def answer(request: Request, work: Callable[[Here], str | tuple[int, str]],
                     here: Here | None = None) -> Response:
        here = here if here is not None else here_of(request)
        if not authorised(request):
            return _html(_login(here, ""), 401)

        def run() -> tuple[int, str]:
            try:
                out = work(here)
                return out if isinstance(out, tuple) else (200, out)
            except query.BadInput as exc:
                return 400, pages.error_page(here, 400, "invalid_request", str(exc))
            except HolomemError as exc:
                # What the page's parameters asked for, refused: the page's input is bad
                status = 400 if isinstance(exc, InvalidError) else \
                    exc.status if 400 <= exc.status < 600 else 500
                return status, pages.error_page(here, status, exc.code, exc.message)

        status, body = await run_in_threadpool(run)
        return _html(body, status)

    def page(render: Page) -> Callable[[Request], Awaitable[Response]]:
        async def route(request: Request) -> Response:
            return await answer(request, lambda here: render(here, source))
        return route

    async def form_fields(request: Request) -> dict[str, str] | Response:
        """A POST's form fields (a form of at most :data:`MAX_FORM` bytes), or the
        refusal to send."""
        media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media != "application/x-www-form-urlencoded":
            return _html(pages.error_page(here_of(request), 415, "invalid_request",
                                          "send this application's own form"), 415)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM:
                return _html(pages.error_page(here_of(request), 413, "limit",
                                              f"a form of at most {MAX_FORM} bytes"), 413)
        try:
            return dict(urllib.parse.parse_qsl(body.decode("utf-8"), max_num_fields=64))
        except (UnicodeDecodeError, ValueError):
            return {}

    async def read_form(request: Request) -> dict[str, str] | Response:
        """The POST's form fields, or the refusal to send: only this application's own
        forms, with their token."""
        form = await form_fields(request)
        if isinstance(form, Response):
            return form
        if not hmac.compare_digest(form.get("token", "").encode(), token.encode()):
            return _html(pages.error_page(here_of(request, form), 403, "forbidden",
                                          "this form did not come from this inspector "
                                          "(reload the page and try again)"), 403)
        return form

    async def forget(request: Request) -> Response:
        if request.method == "GET":
            return await answer(request, lambda here: forms.dry_run_page(here, source))
        if not authorised(request):
            return _html(_login(here_of(request), ""), 401)
        form = await read_form(request)
        if isinstance(form, Response):
            return form
        here = here_of(request, {k: v for k, v in form.items() if k in STICKY})
        return await answer(request, lambda h: forms.forget_page(h, source, form), here)

    async def check(request: Request) -> Response:
        if not authorised(request):
            return _html(_login(here_of(request), ""), 401)
        form = await read_form(request)
        if isinstance(form, Response):
            return form
        here = here_of(request, {k: v for k, v in form.items() if k in STICKY})

        def run(h: Here) -> str:
            source.check(h.tenant)
            return pages.store_page(h, source)

        return await answer(request, run, here)

    async def login(request: Request) -> Response:
        here = here_of(request)
        if expected is None:
            return RedirectResponse(here.base + "/", 303)
        if request.method == "GET":
            return _html(_login(here, ""), 200)
        form = await form_fields(request)
        if isinstance(form, Response):
            return form
        given = form.get("key", "")
        if not hmac.compare_digest(given.encode(), expected):
            return _html(_login(here, "That is not the key."), 401)
        response = RedirectResponse(here.base + "/", 303, headers=HEADERS)
        response.set_cookie(COOKIE, session, httponly=True, samesite="strict",
                            path=(here.base or "") + "/")
        return response

    async def static_file(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in static:
            return Response(b"", 404, headers=HEADERS)
        return Response(static[name], media_type=STATIC[name],
                        headers={**HEADERS, "cache-control": "max-age=3600"})

    async def not_found(request: Request, exc: Any) -> Response:
        here = here_of(request)
        return _html(pages.error_page(here, 404, "not_found", f"no page {request.url.path}"),
                     404)

    async def not_allowed(request: Request, exc: Any) -> Response:
        here = here_of(request)
        return _html(pages.error_page(here, 405, "invalid_request",
                                      f"{request.method} is not allowed on "
                                      f"{request.url.path}"), 405)

    routes = [
        Route("/", page(pages.facts_page), methods=["GET"]),
        Route("/fact", page(pages.fact_page), methods=["GET"]),
        Route("/store", page(pages.store_page), methods=["GET"]),
        Route("/store/check", check, methods=["POST"]),
        Route("/conversations", page(pages.conversations_page), methods=["GET"]),
        Route("/context", page(pages.context_page), methods=["GET"]),
        Route("/forget", forget, methods=["GET", "POST"]),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/static/{name}", static_file, methods=["GET"]),
    ]
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})


def _login(here: Here, problem: str) -> str:
    note = f'<p class="error">{esc(problem)}</p>' if problem else ""
    body = (note + '<p>This inspector needs the API key.</p>'
            f'<form method="post" action="{esc(here.base + "/login")}">'
            '<label>API key <input type="password" name="key" id="key" '
            'autocomplete="current-password"></label> <button type="submit">Sign in</button>'
            "</form>")
    return frame(here, "Sign in", body)
