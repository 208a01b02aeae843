"""What ``holomem serve`` tells an operator's monitoring: ``GET /metrics`` in the
Prometheus text format (docs/http.md "Metrics and traces").

Owns: one server's registry (:class:`Metrics`: a ``CollectorRegistry`` of its own, never
the process-wide one, so that several servers, or tests, in one process never share or
collide), the request metrics the access log feeds (:meth:`Metrics.observe`), the
store metrics read from the tenant pool at each scrape (:class:`StoreCollector`), and
the answer to a scrape (:meth:`Metrics.exposition`). Every metric's name starts with
``holomem_`` (plus the client library's standard ``process_*`` and ``python_info``).
Imports prometheus_client (the ``serve`` extra) and the tenant pool.

Labels are bounded whatever a client sends: the route is the matched route's template
(``-`` for none), the op a contract op (``?`` for another name), the method one of
:data:`METHODS` (``other`` for the rest), the status the code sent (``none`` when the
client left first). The tenant is never a label: tenant ids are chosen by clients (up
to ``--max-tenant-stores`` of them, 1000 by default), and a series per tenant and route
would grow with them; the store metrics add up the open tenants instead (the oldest
checkpoint, the longest tail), and the access log names the tenant of each request.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from holomem.errors import missing_extra

try:
    from prometheus_client import CollectorRegistry, Counter, Histogram, Info
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
    from prometheus_client.exposition import choose_encoder
    from prometheus_client.platform_collector import PlatformCollector
    from prometheus_client.process_collector import ProcessCollector
    from prometheus_client.registry import Collector
except ImportError as _missing:  # the serve extra is not installed
    raise missing_extra(_missing, "holomem.api.doors.http.metrics", "serve") from _missing

from holomem.api.doors.http.tenants import Counted, TenantPool

#: The route of the scrape.
PATH = "/metrics"
#: The request methods a label names; any other is ``other``.
METHODS = frozenset({"GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"})
#: The request duration histogram's buckets, in seconds: a durable write over loopback
#: takes about a millisecond, a large recall or import up to seconds.
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
           5.0, 10.0)


class StoreCollector(Collector):
    """The tenant stores' figures, read from the pool when scraped (one consistent look:
    :meth:`~.tenants.TenantPool.counted`; no store lock is waited for)."""

    def __init__(self, pool: TenantPool) -> None:
        self.pool = pool

    def describe(self) -> Iterable[Metric]:
        return list(self._families())

    def collect(self) -> Iterable[Metric]:
        return list(self._families(self.pool.counted(), time.time()))

    def _families(self, counted: Counted | None = None, now: float = 0.0) -> Iterator[Metric]:
        """Each family; with no ``counted`` (describing), without samples."""
        def gauge(name: str, doc: str, value: float | None) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, doc)
            if counted is not None and value is not None:
                family.add_metric([], value)
            return family

        def counter(name: str, doc: str, value: int) -> CounterMetricFamily:
            family = CounterMetricFamily(name, doc)
            if counted is not None:
                family.add_metric([], value)
            return family

        opened = counted.open if counted is not None else ()
        times = [c.checkpoint_time for c in opened if c.checkpoint_time is not None]
        yield gauge("holomem_open_tenants", "Tenant stores open now",
                    len(opened))
        yield gauge("holomem_open_tenants_limit", "The most tenant stores open at once "
                    "(--max-tenants)", counted.max_open if counted else None)
        yield gauge("holomem_tenant_stores", "Tenant stores that exist",
                    counted.stores if counted else None)
        yield gauge("holomem_tenant_stores_limit", "The most tenant stores that may exist "
                    "(--max-tenant-stores)", counted.max_stores if counted else None)
        yield counter("holomem_acknowledged_writes", "Write transactions the tenant "
                      "stores' journals acknowledged (made durable) since the server "
                      "started", sum(c.acknowledged_writes for c in opened)
                      + (counted.closed_writes if counted else 0))
        yield counter("holomem_journal_fsyncs", "fsyncs of the tenant stores' journal "
                      "segment files since the server started",
                      sum(c.fsyncs for c in opened)
                      + (counted.closed_fsyncs if counted else 0))
        yield gauge("holomem_journal_bytes", "Bytes of the open tenant stores' live "
                    "journal generations", sum(c.journal_bytes for c in opened))
        yield gauge("holomem_checkpoint_age_seconds", "Seconds since the oldest newest "
                    "checkpoint among the open tenant stores that have one was written "
                    "(no sample when none has)",
                    max(0.0, now - min(times)) if times else None)
        yield gauge("holomem_checkpoint_tail_bytes", "The most journal bytes an open "
                    "tenant store holds past its newest checkpoint (what its reopen "
                    "replays)", max((c.checkpoint_tail_bytes for c in opened), default=0))
        yield gauge("holomem_open_tenants_without_checkpoint", "Open tenant stores that "
                    "have no checkpoint (their reopen replays the whole journal)",
                    sum(1 for c in opened if c.checkpoint_time is None))


class Metrics:
    """One server's metrics: its own registry, the request metrics, the store collector."""

    def __init__(self, pool: TenantPool, *, version: str) -> None:
        self.registry = registry = CollectorRegistry()
        self.requests = Counter(
            "holomem_http_requests", "HTTP requests answered, by route template, contract "
            "op, method and status", ["route", "op", "method", "status"], registry=registry)
        self.durations = Histogram(
            "holomem_http_request_duration_seconds", "How long HTTP requests took, from "
            "their head to the end of their answer, by route template, op and method",
            ["route", "op", "method"], buckets=BUCKETS, registry=registry)
        Info("holomem_build", "This holomem's version", registry=registry).info(
            {"version": version})
        registry.register(StoreCollector(pool))
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        #: each label set's two children, so a request costs no label lookup
        self._children: dict[tuple[str, str, str, str], tuple[Any, Any]] = {}

    def observe(self, method: str, route: str, op: str | None, status: int | None,
                seconds: float) -> None:
        """Count one request and its duration (the labels bounded: see the module doc)."""
        key = (route, op or "", method if method in METHODS else "other",
               "none" if status is None else str(status))
        children = self._children.get(key)
        if children is None:
            children = (self.requests.labels(*key), self.durations.labels(*key[:3]))
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def exposition(self, accept: str) -> tuple[bytes, str]:
        """The scrape's body and content type: the Prometheus text format, or
        OpenMetrics when ``accept`` (the request's Accept header) asks for it."""
        encode, content_type = choose_encoder(accept)
        return encode(self.registry), content_type
