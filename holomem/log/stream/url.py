"""Where a stream journal lives: the ``nats://`` address and its options.

Owns: parsing ``nats://HOST:PORT[,HOST:PORT...]/STORE[?option=value&...]`` into
:class:`Address`, the names of the streams, subjects and buckets of a store, and the
defaults. Imports the standard library and :mod:`holomem.errors`.

Options (all optional, each at most once): ``replicas`` (stream and bucket replicas; default 3 when
the first server reports a cluster, else 1), ``lease`` (seconds the writer's lease
lasts without renewal, default 10), ``timeout`` (seconds an acknowledgement may take,
retries included, before the call fails ``unavailable``; default 15), ``wait``
(seconds an opening writer waits for another's lease to expire, default 0), ``local``
(the directory for this node's local files; default ``$HOLOMEM_NATS_LOCAL`` or a
directory under the system's temporary directory), ``advertise`` (an ``http(s)://``
base URL the writer records beside its lease, so that a server that is not the
writer can send a write there: ``holomem serve`` sets it to its own address).
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from typing import NamedTuple
from urllib.parse import parse_qsl, urlsplit

from holomem.errors import InvalidError

SCHEME = "nats://"
STORE_RE = re.compile(r"[A-Za-z0-9_-]{1,200}")  # (fullmatch: $ takes a final \n)
_PORT_RE = re.compile(r"[0-9]{1,5}")  # (isdigit() takes "²", which int() refuses)
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
DEFAULT_LEASE = 10.0
DEFAULT_TIMEOUT = 15.0
MIN_LEASE = 1.0
OPTIONS = ("replicas", "lease", "timeout", "wait", "local", "advertise")


class Address(NamedTuple):
    servers: tuple[str, ...]
    store: str
    #: None: decided at connect time (3 on a cluster, 1 on a single server)
    replicas: int | None
    lease: float
    timeout: float
    wait: float
    local: str
    #: Where this process serves HTTP (recorded with its lease), or "" for nowhere.
    advertise: str = ""

    @property
    def url(self) -> str:
        """The address without options (what errors and stats name)."""
        hosts = ",".join(s.removeprefix(SCHEME) for s in self.servers)
        return f"{SCHEME}{hosts}/{self.store}"

    # -- names in the server (one store's are disjoint from every other's) ------------
    def stream(self, generation: int) -> str:
        return f"HM_{self.store}_G{generation}"

    def subject(self, generation: int) -> str:
        return f"hm.{self.store}.g{generation}"

    @property
    def meta_bucket(self) -> str:
        return f"HM_{self.store}_META"

    @property
    def lease_bucket(self) -> str:
        return f"HM_{self.store}_LEASE"


def is_stream(path: object) -> bool:
    """Whether a store path names a stream journal."""
    return isinstance(path, str) and path.startswith(SCHEME)


def _seconds(name: str, raw: str, low: float) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise InvalidError(f"option {name} must be a number of seconds, got {raw!r}") from None
    if not math.isfinite(value) or value < low or value > 3600:
        raise InvalidError(f"option {name} must be between {low} and 3600 seconds")
    return value


def parse(path: str) -> Address:
    """The address of a ``nats://`` store. Errors: ``invalid_request``."""
    if not is_stream(path) or len(path) > 4096:
        raise InvalidError("a stream store is nats://HOST:PORT[,HOST:PORT]/STORE")
    if _CONTROL_RE.search(path):
        # urlsplit drops tabs and line breaks wherever they are: "s\nx" would be "sx".
        raise InvalidError("a stream store's address holds no control characters "
                           "(tabs, line breaks)")
    parts = urlsplit(path)
    hosts = [h.strip() for h in parts.netloc.split(",") if h.strip()]
    if not hosts or any("@" in h for h in hosts):
        raise InvalidError("a stream store names at least one HOST:PORT (no credentials "
                           "in the address)")
    for h in hosts:
        host, _, port = h.rpartition(":")
        if not host or not _PORT_RE.fullmatch(port) or not 0 < int(port) < 65536:
            raise InvalidError(f"server {h!r} is not HOST:PORT")
    store = parts.path.strip("/")
    if not STORE_RE.fullmatch(store):
        raise InvalidError("the store name (after the servers) must be 1-200 letters, "
                           f"digits, '_' or '-', got {store!r}")
    opts: dict[str, str] = {}
    for k, v in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        if k not in OPTIONS:
            raise InvalidError(f"unknown option {k!r} (known: {', '.join(OPTIONS)})")
        if k in opts:
            raise InvalidError(f"option {k} is given twice")
        opts[k] = v
    replicas: int | None = None
    if "replicas" in opts:
        if opts["replicas"] not in ("1", "2", "3", "4", "5"):  # (isdigit takes '²', '٣')
            raise InvalidError("option replicas must be 1 to 5")
        replicas = int(opts["replicas"])
    advertise = opts.get("advertise", "")
    if advertise and (not advertise.startswith(("http://", "https://"))
                      or len(advertise) > 500 or any(c.isspace() for c in advertise)):
        raise InvalidError("option advertise must be an http:// or https:// URL without "
                           f"spaces (at most 500 characters), got {advertise[:80]!r}")
    if "\x00" in opts.get("local", ""):
        raise InvalidError("option local must be a directory's path, without NUL")
    local = opts.get("local") or os.environ.get("HOLOMEM_NATS_LOCAL") or os.path.join(
        tempfile.gettempdir(), f"holomem-nats-{os.getuid()}")
    return Address(
        servers=tuple(SCHEME + h for h in hosts), store=store, replicas=replicas,
        lease=_seconds("lease", opts["lease"], MIN_LEASE) if "lease" in opts else DEFAULT_LEASE,
        timeout=_seconds("timeout", opts["timeout"], 0.5) if "timeout" in opts
        else DEFAULT_TIMEOUT,
        wait=_seconds("wait", opts["wait"], 0.0) if "wait" in opts else 0.0,
        local=os.path.abspath(local), advertise=advertise.rstrip("/"))
