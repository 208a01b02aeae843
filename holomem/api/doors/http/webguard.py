"""What keeps web pages and oversized requests away from the HTTP server.

Owns: request bodies (JSON only, bounded in size; decoded by the contract's
:func:`~holomem.api.memory.contract.decode_body`, its nesting counted first), the
Host check against DNS rebinding, allowed browser Origins,
the bound on request heads (:class:`Guard`, and the httptools protocol that
enforces it while a head arrives), and the JSON error response every refusal uses.
Imports starlette, uvicorn's protocol (when present) and validate (the contract's
depth check).
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import urllib.parse
from collections.abc import Iterable, Mapping

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from holomem.api.doors.http.heldhead import HeldHead
from holomem.errors import InvalidError

#: A request's head: at most this many headers, and this many bytes of request line
#: and headers together.
MAX_HEADERS = 100
MAX_HEAD_BYTES = 32 * 1024
#: Host values whose answer :meth:`Hosts.accept` remembers.
SEEN_HOSTS = 64
SEEN_HOST_CHARS = 255


def error_response(status: int, code: str, message: str,
           headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status,
                        headers=headers)


# -- bodies --------------------------------------------------------------------------------

def is_json(request: Request) -> bool:
    media = request.headers.get("content-type", "").split(";", 1)[0]
    return media.strip().lower() == "application/json"


async def read_body(request: Request, limit: int) -> bytes | JSONResponse:
    """The request's body, or the error response to send instead."""
    if not is_json(request):
        # A browser sends text/plain, a form or no body cross-site without asking.
        return error_response(415, "invalid_request",
                      "send the body with Content-Type: application/json")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return error_response(413, "limit", f"the request body is over {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return error_response(413, "limit", f"the request body is over {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


# -- who may ask ---------------------------------------------------------------------------
_HOST_RE = re.compile(r"^(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9-]*[a-z0-9])?"
                      r"(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*)(?::([0-9]{1,5}))?$")


def _split_host(value: str) -> tuple[str, int | None] | None:
    """``(name, port)`` of a Host value (lowercased; IPv6 in brackets), or None."""
    m = _HOST_RE.match(value.strip().lower())
    if m is None:
        return None
    port = int(m.group(5)) if m.group(5) is not None else None
    if port is not None and port > 65535:
        return None
    return m.group(1), port


def _is_ip(name: str) -> bool:
    try:
        address = ipaddress.ip_address(name[1:-1] if name.startswith("[") else name)
    except ValueError:
        return False
    return name.startswith("[") == (address.version == 6)


class Hosts:
    """The Host values this server answers to (DNS rebinding: the attacker's name
    resolves to our address, but the browser still sends the attacker's name).

    An IP literal (it cannot be rebound), ``localhost`` and the bound host, each with
    the bound port (80 when the Host names none); and every ``allowed`` entry, a
    ``NAME`` (any port) or ``NAME:PORT``.
    """

    def __init__(self, host: str, port: int | None, allowed: Iterable[str]) -> None:
        self.port = port or None  # port 0 (the OS picks) cannot be checked
        self.names = {"localhost"}
        bound = _split_host(f"[{host}]" if ":" in host else host)
        if bound is not None and not _is_ip(bound[0]):
            self.names.add(bound[0])
        self.allowed: set[tuple[str, int | None]] = set()
        for entry in allowed:
            parsed = _split_host(entry)
            if parsed is None:
                raise InvalidError(f"allowed host (--allow-host) {entry!r} is not a host "
                                   "name or IP, optionally with :PORT")
            self.allowed.add(parsed)
        self._seen: dict[str, bool] = {}

    def accept(self, value: str) -> bool:
        """Whether a request's Host ``value`` names this server. The answer is
        remembered for up to :data:`SEEN_HOSTS` values (of at most
        :data:`SEEN_HOST_CHARS`): a client sends the same one every time."""
        if len(value) > SEEN_HOST_CHARS:
            return self._accept(value)
        known = self._seen.get(value)
        if known is None:
            if len(self._seen) >= SEEN_HOSTS:
                self._seen.clear()
            known = self._seen[value] = self._accept(value)
        return known

    def _accept(self, value: str) -> bool:
        parsed = _split_host(value)
        if parsed is None:
            return False
        name, port = parsed
        port = 80 if port is None else port  # this server speaks plain HTTP
        if (name, None) in self.allowed or (name, port) in self.allowed:
            return True
        if self.port is not None and port != self.port:
            return False
        return name in self.names or _is_ip(name)


def origins(allowed: Iterable[str]) -> frozenset[str]:
    """Each origin as a browser writes it: lowercase, the scheme's default port left out."""
    out = set()
    for entry in allowed:
        try:
            parts = urllib.parse.urlsplit(entry.strip())
            host = _split_host(parts.netloc) if parts.username is None else None
        except ValueError:
            host = None
        if (host is None or parts.scheme not in ("http", "https") or parts.path not in ("", "/")
                or parts.query or parts.fragment):
            raise InvalidError(f"allowed origin (--allow-origin) {entry!r} must be "
                               "scheme://host[:port], e.g. https://app.example")
        name, port = host
        default = 443 if parts.scheme == "https" else 80
        out.add(f"{parts.scheme}://{name}" + ("" if port in (None, default) else f":{port}"))
    return frozenset(out)


class Guard:
    """Refuses, before routing, what no client of this server sends: a head with too
    many or too large headers (431), a Host that is not this server, or an Origin
    that is not allowed (403).

    ``own_pages``: a path prefix whose requests may also come from this server's own
    pages (the inspector's forms): there an Origin that is ``http://`` and the request's
    Host — checked first, so never a rebound name — is allowed too.
    """

    def __init__(self, app: ASGIApp, *, hosts: Hosts, origins: frozenset[str],
                 own_pages: str | None = None) -> None:
        self.app = app
        self.hosts = hosts
        self.origins = origins
        self.own_pages = own_pages

    def _allowed(self, origin: bytes, host: bytes, path: str) -> bool:
        value = origin.decode("latin-1").lower()
        if value in self.origins:
            return True
        return (self.own_pages is not None and path.startswith(self.own_pages)
                and value == "http://" + host.decode("latin-1").lower())

    def refusal(self, raw_headers: list[tuple[bytes, bytes]],
                path: str = "") -> JSONResponse | None:
        size = 0
        hosts: list[bytes] = []
        origins: list[bytes] = []
        for name, value in raw_headers:
            size += len(name) + len(value) + 4
            if name == b"host":
                hosts.append(value)
            elif name == b"origin":
                origins.append(value)
        if len(raw_headers) > MAX_HEADERS or size > MAX_HEAD_BYTES:
            return error_response(431, "limit", f"at most {MAX_HEADERS} headers and "
                          f"{MAX_HEAD_BYTES} bytes of them")
        if len(hosts) != 1 or not self.hosts.accept(hosts[0].decode("latin-1")):
            return error_response(403, "forbidden", "the Host header does not name this server "
                          "(allow other names with --allow-host)")
        if origins and (len(origins) > 1 or not self._allowed(origins[0], hosts[0], path)):
            return error_response(403, "forbidden", "requests from this Origin are not allowed "
                          "(allow one with --allow-origin)")
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = self.refusal(scope["headers"], scope.get("path", ""))
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


def bounded_httptools() -> type[asyncio.Protocol] | None:
    """uvicorn's httptools protocol, refusing a request head past MAX_HEAD_BYTES, and
    writing each answer's head with its body (:class:`~.heldhead.HeldHead`).

    httptools keeps a header's value until it is complete, with no limit, and
    uvicorn's ``h11_max_incomplete_event_size`` applies to h11 only. So while a head
    is being read its bytes are fed in slices and counted, and once they pass the
    bound the connection gets a 431 and is closed.
    """
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return None
    slice_size = 4096
    refusal = msgspec.json.encode({"error": {
        "code": "limit", "message": f"the request head is over {MAX_HEAD_BYTES} bytes"}})

    class BoundedHead(HttpToolsProtocol):
        in_head = True  # between requests, or reading a request's line and headers
        head_bytes = 0

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self.in_head, self.head_bytes = True, 0

        def on_headers_complete(self) -> None:
            self.in_head = False
            before = self.cycle
            super().on_headers_complete()
            if self.cycle is not before and self.cycle is not None:
                # its answer's head leaves with its body, in one write
                self.cycle.transport = HeldHead(self.transport, self.loop)

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self.in_head = True

        def data_received(self, data: bytes) -> None:
            while data and self.in_head and not self.transport.is_closing():
                piece, data = data[:slice_size], data[slice_size:]
                super().data_received(piece)
                if self.in_head:
                    self.head_bytes += len(piece)
                    if self.head_bytes > MAX_HEAD_BYTES + slice_size:
                        self.refuse()
                        return
            if data and not self.transport.is_closing():
                super().data_received(data)

        def refuse(self) -> None:
            cycle = getattr(self, "cycle", None)
            if cycle is None or cycle.response_complete:  # not inside another answer
                self.transport.write(
                    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                    b"content-type: application/json\r\nconnection: close\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(refusal), refusal))
            self.transport.close()

    return BoundedHead
