"""Every error holomem raises, in one tree with stable codes.

Owns: the exception classes and their codes, and how holomem says that an optional
extra is missing (:func:`missing_extra`, :func:`install_extra`). Imports nothing from
holomem.

A child's code extends its parent's, the way SQLite's extended result codes
extend the primary ones, so ``err.code.startswith("corrupt")`` catches every
kind of damage. Codes are part of the contract: never reused, never renamed.

    HolomemError                 "error"
    ├── InvalidError             "invalid_request"   the caller passed something wrong
    │   └── LimitError           "limit"             a documented limit was exceeded
    ├── NotFoundError            "not_found"
    ├── ConflictError            "conflict"
    ├── ClosedError              "closed"            the handle was closed
    ├── ReadOnlyError            "read_only"         a write on a read-only handle
    ├── StoreLockedError         "locked"            another writer holds the store
    ├── KeyError_                "key"               encryption key problems
    │   ├── WrongKeyError        "key.wrong"         the key does not open this store
    │   ├── KeyRequiredError     "key.required"      the store is encrypted, no key given
    │   └── UnexpectedKeyError   "key.unexpected"    a key given for a plaintext store
    ├── FormatVersionError       "format.version"    written by a newer, incompatible build
    ├── CorruptError             "corrupt"           damage found on disk (names file, offset)
    │   ├── ChecksumError        "corrupt.checksum"
    │   ├── SequenceError        "corrupt.sequence"  a gap or reordering of sequence numbers
    │   ├── HeaderError          "corrupt.header"    a bad segment or file header
    │   ├── FrameError           "corrupt.frame"     a frame header that cannot be valid
    │   ├── TruncatedError       "corrupt.truncated" a frame cut short by the end of its file
    │   ├── MissingSegmentError  "corrupt.missing"   a journal segment is missing
    │   └── AuthenticationError  "corrupt.auth"      an encrypted frame failed authentication
    ├── StorageIOError           "io"                the operating system refused
    │   ├── FsyncError           "io.fsync"          fsync failed: the journal stopped
    │   └── JournalFailedError   "io.failed"         the journal stopped after an earlier failure
    ├── PurgedError              "purged"            the data was erased on purpose
    └── UnavailableError         "unavailable"       a server or backend cannot be reached

Caller errors (``invalid_request``, ``limit``, ``not_found``, ``conflict``,
``closed``, ``read_only``, ``locked``, ``key``) are kept apart from disk failures
(``corrupt``, ``io``). The library, the JSON contract, HTTP and the client share
this one vocabulary: :data:`HTTP_STATUS` maps every code to an HTTP status, and
:func:`from_code` turns a code received over the wire back into the class the
library raises. ``LimitError`` is an ``InvalidError`` (catch either), with its own
code so that a client can tell "too much" from "wrong".

``MemoryError`` (the contract error of the first release) is a deprecated alias of
:class:`HolomemError`; no name here shadows a Python builtin when imported with ``*``.
"""

from __future__ import annotations

import warnings

__all__ = [
    "HTTP_STATUS",
    "AuthenticationError",
    "ChecksumError",
    "ClosedError",
    "ConflictError",
    "CorruptError",
    "FormatVersionError",
    "FrameError",
    "FsyncError",
    "HeaderError",
    "HolomemError",
    "InvalidError",
    "JournalFailedError",
    "KeyError_",
    "KeyRequiredError",
    "LimitError",
    "MissingSegmentError",
    "NotFoundError",
    "PurgedError",
    "ReadOnlyError",
    "SequenceError",
    "StorageIOError",
    "StoreLockedError",
    "TruncatedError",
    "UnavailableError",
    "UnexpectedKeyError",
    "WrongKeyError",
    "from_code",
    "install_extra",
    "missing_extra",
]


class HolomemError(Exception):
    """Base of every holomem error; ``code`` is stable and machine-readable."""

    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        #: The HTTP status this error maps to (HTTP_STATUS; 500 if unlisted).
        self.status = HTTP_STATUS.get(self.code, 500)


class InvalidError(HolomemError):
    """The caller passed an argument that cannot be accepted."""

    code = "invalid_request"


class LimitError(InvalidError):
    """A documented limit (text size, word count, metadata size, ...) was exceeded."""

    code = "limit"


class NotFoundError(HolomemError):
    code = "not_found"


class ConflictError(HolomemError):
    code = "conflict"


class ClosedError(HolomemError):
    code = "closed"


class ReadOnlyError(HolomemError):
    code = "read_only"


class StoreLockedError(HolomemError):
    """Another process (or another handle in this one) is the store's writer."""

    code = "locked"
    #: Who holds the store, when known: the process holding a store's writer lock
    #: (``process PID (its command line)``), or a stream store's lease (host:pid:tag).
    holder: str | None = None
    #: The HTTP base URL the holder advertised with its lease, when it did (a server
    #: answers a write with a redirect there; docs/scale-out.md §8.7).
    writer: str | None = None


class KeyError_(HolomemError):
    code = "key"


class WrongKeyError(KeyError_):
    code = "key.wrong"


class KeyRequiredError(KeyError_):
    code = "key.required"


class UnexpectedKeyError(KeyError_):
    code = "key.unexpected"


class FormatVersionError(HolomemError):
    """The file was written by a newer build whose format this build cannot read."""

    code = "format.version"


class CorruptError(HolomemError):
    """Damage found on disk. ``path``, ``offset`` and ``length`` locate it."""

    code = "corrupt"

    def __init__(
        self, message: str, *, path: str = "", offset: int = -1, length: int = 0
    ) -> None:
        where = f"{path} at offset {offset}" if path else ""
        super().__init__(f"{where}: {message}" if where else message)
        self.path = path
        self.offset = offset
        self.length = length
        self.reason = message


class ChecksumError(CorruptError):
    code = "corrupt.checksum"


class SequenceError(CorruptError):
    code = "corrupt.sequence"


class HeaderError(CorruptError):
    code = "corrupt.header"


class FrameError(CorruptError):
    code = "corrupt.frame"


class TruncatedError(CorruptError):
    code = "corrupt.truncated"


class MissingSegmentError(CorruptError):
    code = "corrupt.missing"


class AuthenticationError(CorruptError):
    code = "corrupt.auth"


class StorageIOError(HolomemError):
    code = "io"


class FsyncError(StorageIOError):
    """fsync failed. The data it covered may be lost; the journal accepts no more writes."""

    code = "io.fsync"


class JournalFailedError(StorageIOError):
    """An earlier write or fsync failed; reopen the store to recover from what is durable."""

    code = "io.failed"


class PurgedError(HolomemError):
    code = "purged"


class UnavailableError(HolomemError):
    """A server or a journal backend did not answer (names what was tried)."""

    code = "unavailable"


#: The one table from error code to HTTP status. Codes not listed map to 500.
HTTP_STATUS: dict[str, int] = {
    "invalid_request": 422,
    "limit": 422,
    "not_found": 404,
    "conflict": 409,
    "read_only": 403,
    "locked": 423,
    "closed": 503,
    "unavailable": 503,
}

_BY_CODE: dict[str, type[HolomemError]] = {
    cls.code: cls for cls in (
        InvalidError, LimitError, NotFoundError, ConflictError, ClosedError, ReadOnlyError,
        StoreLockedError, KeyError_, WrongKeyError, KeyRequiredError, UnexpectedKeyError,
        FormatVersionError, StorageIOError, FsyncError, JournalFailedError, PurgedError,
        UnavailableError)
}


def from_code(code: str, message: str) -> HolomemError:
    """The error the library raises for ``code`` (a ``HolomemError`` carrying the code
    when no class owns it), e.g. to re-raise what a server answered."""
    cls = _BY_CODE.get(code)
    if cls is not None:
        return cls(message)
    err = HolomemError(message)
    err.code = code
    err.status = HTTP_STATUS.get(code, 500)
    return err


def install_extra(extra: str) -> str:
    """The command that installs holomem with its optional ``extra`` (pyproject.toml)."""
    return f"pip install 'holomem-db[{extra}]'"


def missing_extra(exc: ImportError, what: str, extra: str) -> ModuleNotFoundError:
    """The error for ``what`` (a module or a feature of holomem) whose import ``exc``
    failed because the optional ``extra`` is not installed: still an ImportError, for
    the module that is missing (``name``), with the command that installs the extra.
    Every optional import of holomem fails through this one wording."""
    return ModuleNotFoundError(f"{what} needs {exc.name or 'a module'}, which the {extra} "
                               f"extra installs: {install_extra(extra)} ({exc})",
                               name=exc.name)


def __getattr__(name: str) -> object:
    if name == "MemoryError":
        warnings.warn("holomem.errors.MemoryError is deprecated: catch HolomemError (or "
                      "InvalidError, NotFoundError, ConflictError)", DeprecationWarning,
                      stacklevel=2)
        return HolomemError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
