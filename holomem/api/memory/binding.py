"""How ``Memory`` is put together from the concepts' calls: :class:`Call` and :class:`Derived`.

Owns: the two descriptors a class holding a :class:`~holomem.api.memory.session.Session`
uses to offer the calls of each concept as its own methods. ``Call(fn)`` turns
``fn(session, ...)`` (a function of a concept's ``calls`` module) into a method whose
name, signature (without the session), docstring and types are ``fn``'s: what
``help(memory.recall)``, an IDE and mypy show is the call itself, written once.
``Derived(fn)`` does the same for the ``with_*`` calls, which return a copy of the
holder over the session ``fn`` derives. Read on the class, either gives that method
as a plain function, as a method defined in the class would. Every ``Call`` runs in an
OpenTelemetry span named for it when the ``otel`` extra is installed
(:mod:`.tracing`; nothing otherwise). Arguments that do not fit a call's signature
(an unknown keyword, a missing one) are ``invalid_request``, as every other wrong
argument is. Imports the session, the tracing and the errors.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, Self, TypeVar, overload

from holomem.api.memory import tracing
from holomem.api.memory.session import Session
from holomem.errors import InvalidError

P = ParamSpec("P")
R = TypeVar("R")


class Holder(Protocol):
    """What a class whose methods are :class:`Call` and :class:`Derived` holds."""

    session: Session

    def _derive(self, session: Session) -> Self:
        """The same kind of value over ``session`` (what a ``with_*`` call returns)."""
        ...


H = TypeVar("H", bound=Holder)


def _method(fn: Callable[..., Any], owner: type[Any], name: str,
            body: Callable[..., Any]) -> Callable[..., Any]:
    """``body`` dressed as ``owner.name``: ``fn``'s docstring and signature, with
    ``self`` in place of the session."""
    signature = inspect.signature(fn)
    rest = list(signature.parameters.values())[1:]
    # ``self`` is positional-only when the call's first parameter is (as in a method
    # written ``def remember(self, input, /)``), else an ordinary first parameter.
    kind = (inspect.Parameter.POSITIONAL_ONLY
            if rest and rest[0].kind is inspect.Parameter.POSITIONAL_ONLY
            else inspect.Parameter.POSITIONAL_OR_KEYWORD)
    body.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[inspect.Parameter("self", kind), *rest])
    body.__doc__ = fn.__doc__
    body.__module__ = fn.__module__
    body.__name__ = name
    body.__qualname__ = f"{owner.__qualname__}.{name}"
    return body


def _fitting(signature: inspect.Signature, name: str, session: Session,
             args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """After a call raised TypeError: ``invalid_request`` when its arguments do not fit
    its signature (an unknown keyword, one missing, too many), as a wrong argument is
    everywhere else; nothing when they fit (the TypeError is then the call's own)."""
    try:
        signature.bind(session, *args, **kwargs)
    except TypeError as exc:
        raise InvalidError(f"{name}: {exc}") from None


class Call(Generic[P, R]):
    """A method that runs ``fn(self.session, ...)``."""

    def __init__(self, fn: Callable[Concatenate[Session, P], R]) -> None:
        self.fn = fn
        self.method: Callable[..., R] = fn

    def __set_name__(self, owner: type[Any], name: str) -> None:
        fn = self.fn
        signature = inspect.signature(fn)

        def method(holder: Holder, /, *args: Any, **kwargs: Any) -> R:
            try:
                return fn(holder.session, *args, **kwargs)
            except TypeError:
                _fitting(signature, name, holder.session, args, kwargs)
                raise  # (the arguments fit: the error is the call's own)

        self.method = _method(fn, owner, name, tracing.traced(name, method, signature))

    @overload
    def __get__(self, holder: None, owner: type[Any]) -> Callable[Concatenate[Any, P], R]: ...
    @overload
    def __get__(self, holder: Holder, owner: type[Any]) -> Callable[P, R]: ...
    def __get__(self, holder: Holder | None, owner: type[Any]
                ) -> Callable[Concatenate[Any, P], R] | Callable[P, R]:
        if holder is None:
            return self.method
        return types.MethodType(self.method, holder)


class Derived(Generic[P]):
    """A ``with_*`` method: ``self.derive(fn(self.session, ...))``."""

    def __init__(self, fn: Callable[Concatenate[Session, P], Session]) -> None:
        self.fn = fn
        self.method: Callable[..., Any] = fn

    def __set_name__(self, owner: type[Any], name: str) -> None:
        fn = self.fn
        signature = inspect.signature(fn)

        def method(holder: Holder, /, *args: Any, **kwargs: Any) -> Any:
            try:
                derived = fn(holder.session, *args, **kwargs)
            except TypeError:
                _fitting(signature, name, holder.session, args, kwargs)
                raise
            return holder._derive(derived)

        self.method = _method(fn, owner, name, method)

    @overload
    def __get__(self, holder: None, owner: type[Any]) -> Callable[..., Any]: ...
    @overload
    def __get__(self, holder: H, owner: type[Any]) -> Callable[P, H]: ...
    def __get__(self, holder: H | None, owner: type[Any]
                ) -> Callable[..., Any] | Callable[P, H]:
        if holder is None:
            return self.method
        return types.MethodType(self.method, holder)
