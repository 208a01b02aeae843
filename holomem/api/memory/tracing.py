"""OpenTelemetry spans around each ``Memory`` op, when the ``otel`` extra is installed.

Owns: :func:`traced` — what :class:`~holomem.api.memory.binding.Call` wraps each op
method in, so that every op, called from Python or through any door (``Memory.call``
runs the same methods), runs in one span named ``holomem.<op>`` (``holomem.recall``,
``holomem.remember_many``) — and what a span may say. Its attributes are
``holomem.op``, ``holomem.namespace`` (when the call names one that validation accepts),
``holomem.result.count`` (the results, facts, records... a result holds) and, for a
failure, ``error.type`` (the library's error code, e.g. ``invalid_request``, else the
exception's class): never a query, a fact's text, metadata, a working context's state,
an id or an error's message, which may quote them. The namespace is read only where the
call names it (:func:`namespace_finder`): its ``namespace`` parameter, else the
``namespace`` field of its request (remember's input, recall's options, forget's scope),
never a field of any other argument (a fact's metadata, a saved state).

Without ``opentelemetry-api`` importable this module imports nothing more and
:func:`traced` hands the method back as it is: no span, no cost. With it, spans go to
the tracer provider the application configured (:data:`TRACER` is OpenTelemetry's
proxy, which follows it); until one is configured no span is started at all (the ops
look whether one was at most once a second: a provider set after ops ran is followed
within a second), and no attribute is computed for a span that records nothing (a
sampler's no). Imports opentelemetry (optional), msgspec (the request structs), the
namespace check and string form (:mod:`holomem.api.engine`) and the errors.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import msgspec

from holomem.api.engine import nspath, validate
from holomem.errors import HolomemError

try:
    from opentelemetry import trace
except ImportError:  # the otel extra is not installed: nothing is traced
    TRACER: Any = None
else:
    TRACER = trace.get_tracer("holomem")
#: OpenTelemetry's proxy tracer, as got at import (a test may put another in TRACER).
_PROXY = TRACER
#: Whether the application has set its global tracer provider (once set, it stays),
#: and when to look again while it has not (seconds of ``time.monotonic``).
_provider_set = False
_next_look = 0.0
#: How often, at most, an op looks whether a provider was set, in seconds.
LOOK_EVERY = 1.0

R = TypeVar("R")

#: The parameters that hold an op's request (a struct or a mapping): the namespace a
#: call names, when it has no ``namespace`` parameter, is their ``namespace`` field.
REQUESTS = ("input", "options", "scope")

#: Finds the namespace a call names in its arguments (see :func:`namespace_finder`).
Finder = Callable[[Sequence[Any], Mapping[str, Any]], object]

#: A result's fields whose length is its count (the first one it has, in this order).
COUNTED = ("results", "facts", "records", "removed", "pairs", "namespaces", "links",
           "turns", "decisions", "sessions", "nodes")


def enabled() -> bool:
    """Whether ops run in spans (OpenTelemetry's API is importable)."""
    return TRACER is not None


def traced(op: str, method: Callable[..., R],
           signature: inspect.Signature) -> Callable[..., R]:
    """``method`` (``method(holder, *args, **kwargs)``, op ``op``, the arguments those
    of ``signature`` after its first, the session) run in a span named
    ``holomem.<op>``; ``method`` itself when OpenTelemetry is not installed."""
    if TRACER is None:
        return method
    name = op.rstrip("_")  # import_ is the op import
    span_name = f"holomem.{name}"
    find = namespace_finder(signature)

    def run(holder: Any, /, *args: Any, **kwargs: Any) -> R:
        if TRACER is _PROXY and not _provider_is_set():
            return method(holder, *args, **kwargs)  # no provider: not even a no-op span
        with TRACER.start_as_current_span(span_name, record_exception=False,
                                          set_status_on_exception=False) as span:
            if not span.is_recording():
                return method(holder, *args, **kwargs)
            span.set_attribute("holomem.op", name)
            namespace = _namespace(find(args, kwargs))
            if namespace is not None:
                span.set_attribute("holomem.namespace", namespace)
            try:
                result = method(holder, *args, **kwargs)
            except BaseException as exc:
                code = getattr(exc, "code", None)
                span.set_attribute("error.type", code if isinstance(code, str)
                                   else type(exc).__qualname__)
                # No description: an error's message may quote what the caller sent.
                span.set_status(trace.StatusCode.ERROR)
                raise
            count = _count(result)
            if count is not None:
                span.set_attribute("holomem.result.count", count)
            return result

    return run


def _provider_is_set() -> bool:
    """Whether spans go anywhere: the application set a global tracer provider. Until
    it does, OpenTelemetry's proxy answers every span with a no-op one, which costs
    microseconds an op need not spend; asking OpenTelemetry costs some too, so it is
    asked at most once a second (:data:`LOOK_EVERY`) until the answer is yes, which
    stays."""
    global _provider_set, _next_look
    if _provider_set:
        return True
    now = time.monotonic()
    if now < _next_look:
        return False
    _next_look = now + LOOK_EVERY
    _provider_set = not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    return _provider_set


def namespace_finder(signature: inspect.Signature) -> Finder:
    """How to find, in the arguments of a call of ``signature`` (its first parameter,
    the session, left out), the namespace it names: its ``namespace`` parameter, a
    ``namespace`` keyword among its ``**fields``, else the ``namespace`` field of its
    request parameter (:data:`REQUESTS`). Nothing else is looked into: a mapping
    argument such as a fact's metadata or a working context's state may hold a
    ``namespace`` key of its own."""
    params = list(signature.parameters.values())[1:]
    named = [(i, p) for i, p in enumerate(params) if p.name == "namespace"]
    requests = [(i, p) for i, p in enumerate(params) if p.name in REQUESTS]
    fields = not named and any(p.kind is p.VAR_KEYWORD for p in params)
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)

    def given(args: Sequence[Any], kwargs: Mapping[str, Any], i: int,
              p: inspect.Parameter) -> object:
        if p.kind in positional and i < len(args):
            return args[i]
        return kwargs.get(p.name) if p.kind is not p.POSITIONAL_ONLY else None

    def find(args: Sequence[Any], kwargs: Mapping[str, Any]) -> object:
        if named:
            return given(args, kwargs, *named[0])
        if fields and kwargs.get("namespace") is not None:
            return kwargs["namespace"]
        for i, p in requests:
            request = given(args, kwargs, i, p)
            found = (request.get("namespace") if isinstance(request, Mapping) else
                     getattr(request, "namespace", None)
                     if isinstance(request, msgspec.Struct) else None)
            if found is not None:
                return found
        return None

    return find


def _namespace(found: object) -> str | None:
    """``found`` in its one-string form when it is a namespace validation accepts (a
    string, or a list or tuple of strings); None otherwise, so that nothing a caller
    sent in its place reaches a span."""
    if not isinstance(found, (str, list, tuple)):
        return None
    try:
        return nspath.format(validate.namespace(found))
    except HolomemError:
        return None


def _count(result: Any) -> int | None:
    """How many items ``result`` holds: its length (a list), or its first
    :data:`COUNTED` field's; None for a result that is no collection."""
    if isinstance(result, (list, tuple)):
        return len(result)
    for field in COUNTED:
        held = getattr(result, field, None)
        if isinstance(held, (list, tuple)):
            return len(held)
    return None
