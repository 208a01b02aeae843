"""The argument types of the ``holomem`` command line: times, namespaces, JSON objects,
seconds, and a deprecated option's alias (with their shared help text).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Sequence
from typing import Any

from holomem.api.engine import nspath
from holomem.api.engine.validate import to_ms
from holomem.errors import InvalidError

TIME_HELP = ("W: milliseconds since the epoch or ISO 8601 (2025-01-01T09:30Z; UTC if no "
             "offset)")
NS_HELP = ('parts joined by "/" (users/ann; "\\/" is a "/" inside a part, "\\\\" a "\\") or a '
           'JSON array \'["users", "ann"]\'; "" is the root')


# -- argument types ------------------------------------------------------------------------
def when_ms(text: str) -> int:
    """Milliseconds from an integer (ms since the epoch) or an ISO 8601 date or date and
    time (naive means UTC)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"not a time: {text!r} (milliseconds since the epoch, or ISO 8601 such as "
            "2025-01-01 or 2025-01-01T09:30Z)") from exc
    if value.utcoffset() is None:
        value = value.replace(tzinfo=dt.UTC)
    try:
        return to_ms(value, "time") or 0
    except InvalidError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc.message}") from exc


#: A JSON value nested past what the decoder's recursion takes (far past any limit of
#: the contract, which refuses a request nested deeper than 64).
_TOO_DEEP = "JSON nested too deeply"


def namespace_parts(text: str) -> list[str]:
    """A namespace on the command line: a JSON array (``'["users", "ann"]'``), or the
    contract's one string (``users/ann``; "" is the root; docs/contract.md §4a)."""
    if text.startswith("["):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(f"not a JSON array: {exc}") from exc
        except RecursionError:
            raise argparse.ArgumentTypeError(_TOO_DEEP) from None
        if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
            raise argparse.ArgumentTypeError("a namespace is an array of strings")
        return value
    try:
        return nspath.parse(text)
    except InvalidError as exc:
        raise argparse.ArgumentTypeError(exc.message) from exc


def json_object(text: str) -> dict[str, Any]:
    """A JSON object given as an option's value (metadata, a filter)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from exc
    except RecursionError:
        raise argparse.ArgumentTypeError(_TOO_DEEP) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"not a JSON object: {text!r}")
    return value


def seconds(text: str) -> float:
    """A duration in seconds: a finite number, at least 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"not a number of seconds (0 or more): {text!r}")
    return value


class Deprecated(argparse.Action):
    """An old option name that still works, and says on stderr which one to use."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str,
                 **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"warning: {option_string} is deprecated; use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)
