"""Caller vectors: what an embedding may be given as, and the one check it passes
(docs/contract.md §2, "Embeddings").

Owns: :func:`vector`, the check every path runs on a caller's vector — remember and
remember_many (a Python call, the JSON contract, HTTP, MCP), import, the document
engine and a query's vector — and :func:`matrix`, the same check over a batch at once.
Both return little-endian float32 arrays (what the events store, byte for byte),
copies that the caller's later writes cannot reach, so what is checked is carried on
and never checked again. Imports numpy and the errors.

What a vector may be, one rule for every form: a list or tuple of numbers (booleans,
strings and nested lists are not numbers), a 1-d numpy array of integers or floats,
or any other 1-d buffer of float32 or float64 items (``array.array("f")`` or
``("d")``, a ``memoryview`` of one); 1 to :data:`MAX_DIM` of them, each finite once
rounded to float32, not all zero, and as many as the store's dimension once it has
one. ``bytes`` and ``bytearray`` are refused: their items are bytes, and nothing says
whether they hold float32, float64 or 8-bit numbers (``numpy.frombuffer(raw, "<f4")``
says it). Every form of the same numbers gives the same float32 bytes.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence

import msgspec
import numpy as np

from holomem.errors import InvalidError

#: The most numbers in one vector (docs/contract.md §5d).
MAX_DIM = 8192
#: The item formats a buffer may have (float32, float64; native, little or big endian).
_FLOAT_FORMATS = frozenset({"f", "d", "<f", "<d", ">f", ">d", "=f", "=d", "@f", "@d", "!f",
                            "!d"})
_F32 = np.dtype("<f4")


def vector(value: object, dim: int = 0, field: str = "embedding", *,
           decoded: bool = False) -> np.ndarray:
    """``value`` checked as a vector (see the module docstring): a new 1-d ``<f4`` array.

    ``dim`` is the store's dimension (0: none yet). ``decoded``: ``value``, when a list,
    was decoded as JSON numbers (msgspec's ``list[float]``), so its items' types need
    no look; it changes no answer, only the work. Errors: ``invalid_request`` naming
    ``field``.
    """
    if isinstance(value, np.ndarray):
        arr = _numeric(value, field)
    elif type(value) is list or type(value) is tuple:
        # Only a list comes out of a JSON decoder: a tuple's items are looked at.
        arr = _from_list(value, field, decoded and type(value) is list)
    elif isinstance(value, (bytes, bytearray)):
        raise InvalidError(f"{field} must be a sequence of numbers, not {type(value).__name__}"
                           " (raw bytes could hold float32, float64 or 8-bit numbers: give"
                           " numpy.frombuffer(raw, '<f4') for float32)")
    elif isinstance(value, (str, Mapping, set, frozenset)):
        raise InvalidError(f"{field} must be a sequence of numbers")
    else:
        arr = _from_other(value, field)
    return _checked(arr, dim, field)


def matrix(values: Sequence[object], field: str = "embedding", *,
           decoded: bool = True) -> np.ndarray | None:
    """:func:`vector` of each of ``values`` at once, as the rows of one ``<f4`` matrix,
    when they are all of one length and all lists (of Python floats; with ``decoded``,
    lists decoded as JSON numbers may hold ints too), all numeric 1-d numpy arrays, or
    all 1-d buffers of float32 or float64 items; None when they are not, or when any
    fails a check (the caller then checks them one at a time, and the first bad one is
    named: a list that holds itself or is nested too deep too). ``decoded``: as
    :func:`vector`'s, for the lists."""
    if not values:
        return None
    kinds = set(map(type, values))
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            if kinds == {list}:
                m = _float_lists(values)  # type: ignore[arg-type]
                if m is None and decoded:
                    lengths = set(map(len, values))  # type: ignore[arg-type]
                    if len(lengths) != 1 or not 1 <= lengths.pop() <= MAX_DIM:
                        return None
                    m = np.array(values, dtype=_F32)
            elif kinds == {np.ndarray}:
                m = _arrays(values)  # type: ignore[arg-type]
            elif len(kinds) == 1 and not kinds & _NOT_BUFFERS:
                m = _buffers(values)
            else:
                return None
    except (TypeError, ValueError, OverflowError, BufferError, RecursionError):
        # (RecursionError: a list that holds itself, or lists nested past the
        # interpreter's limit, which msgspec or numpy walk down)
        return None
    if m is None or m.ndim != 2 or not np.isfinite(m).all() or not m.any(axis=1).all():
        return None
    return m


#: Types that are never read as a buffer of numbers (bytes: see the module docstring).
_NOT_BUFFERS = frozenset({list, tuple, bytes, bytearray, str, dict, set, frozenset})
_MSGPACK = msgspec.msgpack.Encoder()
#: A msgpack float64: its marker byte, then the number, big-endian.
_MSGPACK_FLOAT = 0xCB


def _float_lists(rows: Sequence[list[object]]) -> np.ndarray | None:
    """The rows, lists of one length each holding only Python floats, as float32; None
    when they are not. One pass of C reads and checks every number: msgspec writes the
    rows as msgpack, where a float (and nothing else: not a bool, an int, a str, a float
    subclass or a numpy scalar) is the byte 0xcb and eight bytes of float64, so the
    rows are floats alone exactly when their encoding is each row's array header and
    then that byte every nine bytes. A few hundred KiB of rows at a time, into one
    buffer (kept in the cache)."""
    lengths = set(map(len, rows))
    if len(lengths) != 1:
        return None
    dim = lengths.pop()
    if not 1 <= dim <= MAX_DIM:
        return None
    head = np.frombuffer(bytes([0x90 | dim]) if dim < 16 else b"\xdc" + dim.to_bytes(2, "big"),
                         dtype=np.uint8)
    out = np.empty((len(rows), dim), dtype=_F32)
    step = max(1, _CHUNK_BYTES // (9 * dim))
    buf = bytearray()
    for start in range(0, len(rows), step):
        part = rows[start : start + step]
        try:
            _MSGPACK.encode_into(part, buf)
        except (TypeError, ValueError, OverflowError, RecursionError):
            return None  # (RecursionError: a list that holds itself, or nested too deep)
        if not _floats_into(buf, len(part), head, out[start : start + len(part)]):
            return None
    return out


#: The bytes of msgpack :func:`_float_lists` encodes at a time.
_CHUNK_BYTES = 2**19


def _floats_into(buf: bytearray, n: int, head: np.ndarray, out: np.ndarray) -> bool:
    """Whether ``buf``, the msgpack of ``n`` lists, holds ``head`` and then floats alone
    in each (they are then written to ``out``, as float32). The views of ``buf`` end
    here, so that the next encoding may resize it."""
    dim = out.shape[1]
    width = len(head) + 9 * dim
    outer = 1 if n < 16 else 3  # (an array header: n is below 2**16)
    if len(buf) != outer + width * n:
        return False
    table = np.frombuffer(buf, dtype=np.uint8, offset=outer).reshape(n, width)
    if not (table[:, : len(head)] == head).all():
        return False
    # Each row's cells, nine bytes apart: the markers, and the numbers after them.
    markers = np.ndarray((n, dim), dtype=np.uint8, buffer=buf, offset=outer + len(head),
                         strides=(width, 9))
    if not (markers == _MSGPACK_FLOAT).all():
        return False
    out[...] = np.ndarray((n, dim), dtype=">f8", buffer=buf, offset=outer + len(head) + 1,
                          strides=(width, 9))
    return True


def _arrays(rows: Sequence[np.ndarray]) -> np.ndarray | None:
    """Numeric 1-d numpy arrays of one length as the rows of a float32 matrix (None:
    they are not). Arrays of one type are concatenated (one loop in C, into memory numpy
    allocates); others are stacked."""
    shapes = {v.shape for v in rows}
    dtypes = {v.dtype for v in rows}
    if (len(shapes) != 1 or not {d.kind for d in dtypes} <= set("iuf")
            or len(shape := shapes.pop()) != 1 or not 1 <= shape[0] <= MAX_DIM):
        return None
    if len(dtypes) == 1:
        flat = np.concatenate(rows)
        return flat.reshape(len(rows), shape[0]).astype(_F32, copy=False)
    return np.stack(rows).astype(_F32, copy=False)


def _buffers(values: Sequence[object]) -> np.ndarray | None:
    """Buffers of float32 or float64 items (``array.array``, ``memoryview``, ...), all
    of one item format and length, as the rows of a float32 matrix; None when they
    are not."""
    views = [memoryview(v) for v in values]  # type: ignore[arg-type]
    try:
        formats = {v.format for v in views}
        shapes = {v.shape for v in views}
        if (len(formats) != 1 or not formats <= _FLOAT_FORMATS or len(shapes) != 1
                or len(shape := shapes.pop() or ()) != 1
                or not 1 <= shape[0] <= MAX_DIM):
            return None
        joined = b"".join(views)  # (a buffer that is not contiguous raises)
        dtype = _item_dtype(views[0].format)
    finally:
        for v in views:
            v.release()
    return np.frombuffer(joined, dtype=dtype).reshape(len(values), shape[0]).astype(_F32)


def _item_dtype(fmt: str) -> np.dtype:
    """The numpy type of a float buffer's item format (one of :data:`_FLOAT_FORMATS`)."""
    order = {"<": "<", ">": ">", "!": ">"}.get(fmt[0], "=") if len(fmt) == 2 else "="
    return np.dtype(order + ("f4" if fmt[-1] == "f" else "f8"))


def _numeric(arr: np.ndarray, field: str) -> np.ndarray:
    """A numpy array of numbers, its shape checked before anything is converted."""
    if arr.dtype.kind == "O":  # Python objects: each must be a number
        if arr.ndim != 1:
            raise _not_flat(field)
        return _from_items(arr.tolist(), field)
    if arr.dtype.kind not in "iuf":  # booleans, complex, strings, bytes, dates
        raise InvalidError(f"{field} must hold only numbers")
    if arr.ndim != 1 or not 1 <= arr.shape[0] <= MAX_DIM:
        raise _not_flat(field)
    return arr


def _from_list(items: list[object] | tuple[object, ...], field: str,
               decoded: bool) -> np.ndarray:
    if not 1 <= len(items) <= MAX_DIM:
        raise _not_flat(field)
    if not decoded:
        return _from_items(items, field)
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            return np.array(items, dtype=_F32)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise InvalidError(f"{field} must be a sequence of numbers") from exc


_PLAIN_NUMBERS = frozenset({float, int})


def other_numbers(items: list[object] | tuple[object, ...]) -> bool:
    """Whether ``items`` are numbers, not all of them Python floats and ints: numpy
    scalars or subclasses of float or int (not booleans), which a decoder of
    ``list[float]`` refuses but :func:`vector` takes, as it takes them in an array."""
    kinds = set(map(type, items))
    return not kinds <= _PLAIN_NUMBERS and all(
        issubclass(t, (int, float, np.integer, np.floating)) and not issubclass(t, bool)
        for t in kinds)


def _from_items(items: Sequence[object], field: str) -> np.ndarray:
    """Numbers given one by one (a list not decoded as JSON, an object array, another
    iterable), each looked at: a bool or a str is not a number, though numpy would
    take it for one."""
    if not 1 <= len(items) <= MAX_DIM:
        raise _not_flat(field)
    # Plain floats and ints are told apart from the rest in one pass of C (a bool's
    # type is bool, not int); anything else is looked at one by one.
    if not set(map(type, items)) <= _PLAIN_NUMBERS and any(
            isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating))
            for x in items):
        raise InvalidError(f"{field} must hold only numbers")
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            return np.array(items, dtype=np.float64)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise InvalidError(f"{field} must hold finite float32 numbers") from exc


def _from_other(value: object, field: str) -> np.ndarray:
    """A buffer of float32 or float64 items, else any other iterable of numbers."""
    try:
        view = memoryview(value)  # type: ignore[arg-type]
    except TypeError:
        view = None
    if view is not None:
        with view:
            if view.format not in _FLOAT_FORMATS:
                raise InvalidError(f"{field}: a buffer must hold float32 or float64 items "
                                   f"(format 'f' or 'd'), not format {view.format!r}")
            if view.ndim != 1 or not 1 <= view.shape[0] <= MAX_DIM:  # type: ignore[index]
                raise _not_flat(field)
            return np.array(view, copy=True)
    if not isinstance(value, Iterable):
        raise InvalidError(f"{field} must be a sequence of numbers")
    # At most one number past the limit is read: an endless iterator stops here.
    try:
        items = list(itertools.islice(value, MAX_DIM + 1))
    except Exception as exc:  # the caller's iterator failed: its error, named
        raise InvalidError(f"{field} could not be read: {exc!r}") from exc
    return _from_items(items, field)


def _checked(arr: np.ndarray, dim: int, field: str) -> np.ndarray:
    """The shared checks on a 1-d numeric array; a new ``<f4`` array."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = arr.astype(_F32)  # a copy, always: nothing the caller holds
    if not np.isfinite(out).all():
        raise InvalidError(f"{field} must hold finite float32 numbers")
    if not out.any():
        raise InvalidError(f"{field} must not be all zeros (its direction is undefined)")
    if dim and out.shape[0] != dim:
        raise InvalidError(f"{field} has dimension {out.shape[0]}; this store's is {dim}")
    return out


def _not_flat(field: str) -> InvalidError:
    return InvalidError(f"{field} must be a flat list of 1 to {MAX_DIM} numbers")
