"""Holographic reduced representations: deterministic vectors for text and entities.

Owns: the atoms, the algebra (bind, unbind, bundle, similarity), how a document is
encoded, and the packed per-document vectors with similarity search. Imports
numpy, :mod:`hashlib`, :mod:`holomem.events` and the other projections.

**Atoms.** Every word, entity and role name has an atom: a vector of D = 1024
entries in {-1, +1}, the bits of SHA-256(kind ‖ 0x00 ‖ name ‖ counter) for
counter = 0, 1, 2, 3 (bit 1 -> +1). No model, no random generator: the same name
gives the same atom on every machine and Python version.

**Algebra** (Plate's HRR, with integer atoms):

- ``bind(a, b)`` is circular convolution. It is computed with a float64 FFT and
  rounded to integers; for integer inputs of this size the FFT's error is below
  1e-9, so the result is the exact integer convolution on every platform.
- ``unbind(c, a)`` is circular correlation (convolution with the involution of
  ``a``), the approximate inverse of binding: ``unbind(bind(a, b), a)`` is ``b``
  plus noise, with cosine similarity about 0.7 to ``b`` (measured in
  tests/replay/test_hrr.py; documented floor 0.5).
- ``bundle`` is the sum; ``similarity`` is cosine.
- a fixed permutation P (from SHA-256) makes order matter: ``bind(a, P(b))``
  differs from ``bind(b, P(a))``. (A cyclic shift would not: convolution commutes
  with shifts, so ``bind(a, roll(b))`` equals ``bind(b, roll(a))``.)

**Encoding a document** (two vectors, each a bundle):

- *content* = 32·Σ atom(w_i) + Σ bind(atom(w_i), P(atom(w_{i+1}))) over its
  words (the BM25 tokenizer's words, before stemming): the unigrams carry
  what is said, the bound bigrams carry the order (a bound pair of ±1 atoms has
  entries of size about sqrt(D) = 32, hence the unigrams' weight) ("Alice owes Bob" and "Bob owes
  Alice" share every unigram but no bigram);
- *structure* = Σ_j bind(ROLE_ENTITY, entity(e_j)) + bind(ROLE_ORDER_j, entity(e_j))
  over its entities e_0, e_1, ... in the order given (up to ORDER_ROLES of them get
  an order role, so "who comes first" is recoverable; ROLE_ORDER_0 marks the first).

**Storage.** Each bundle is stored as its sign pattern (a 0 entry takes the sign
of a fixed tie-break atom), packed 8 entries per byte: D / 8 = 128 bytes per
vector, 256 bytes per document for both. Similarity with a stored vector is the
cosine between its ±1 pattern and the (unquantised) query.

**Laziness.** Encoding is not free (an FFT per document), and default search does
not use HRR (it did not help on LoCoMo; see projections/fusion.py), so vectors are
computed on first use, for every document at once, then kept up to date as
documents are written.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from holomem.projections.base import GrowArray, Snapshot
from holomem.projections.catalog import Catalog
from holomem.projections.tokenize import tokenize

D = 1024
PACKED = D // 8
ORDER_ROLES = 4
#: A bound pair of ±1 atoms has entries of size about sqrt(D); unigrams are scaled to
#: match, so that what is said and in which order weigh alike.
UNIGRAM_WEIGHT = 32
_CHUNK = 256  # documents encoded per batch
#: The most probe keys an index keeps (:meth:`HRRIndex.probe_key`).
PROBE_KEYS = 65536


def atom(name: str, kind: str = "word") -> np.ndarray:
    """The ±1 atom of ``name`` in namespace ``kind`` (int8, length D)."""
    seed = kind.encode() + b"\x00" + name.encode("utf-8", "surrogatepass")
    raw = b"".join(hashlib.sha256(seed + bytes([i])).digest() for i in range(D // 256))
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8))
    out: np.ndarray = bits.astype(np.int8) * 2 - 1
    return out


def _permutation() -> np.ndarray:
    """A fixed permutation of the D positions, from SHA-256 (stable sort of hash words)."""
    raw = b"".join(hashlib.sha256(b"holomem/hrr/order" + i.to_bytes(2, "little")).digest()
                   for i in range(D * 4 // 32))
    keys = np.frombuffer(raw, dtype="<u4")
    out: np.ndarray = np.argsort(keys, kind="stable")
    return out


ROLE_ENTITY = atom("entity", "role")
ROLE_ORDER = [atom(f"order/{j}", "role") for j in range(ORDER_ROLES)]
_TIE = atom("tie-break", "role")
#: The order permutation P: bind(a, P(b)) is not bind(b, P(a)). (A cyclic shift
#: would not do: convolution commutes with shifts.)
PERM = _permutation()


def bind(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Circular convolution of integer vectors, exact (int64)."""
    out: np.ndarray = np.rint(np.fft.irfft(np.fft.rfft(a) * np.fft.rfft(b), n=D)).astype(np.int64)
    return out


def unbind(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Circular correlation: the approximate inverse of ``bind(a, ·)`` (float64)."""
    out: np.ndarray = np.fft.irfft(np.fft.rfft(c) * np.conj(np.fft.rfft(a)), n=D)
    return out


def bundle(vectors: Iterable[np.ndarray]) -> np.ndarray:
    total = np.zeros(D, dtype=np.int64)
    for v in vectors:
        total = total + v
    return total


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity (0 when either vector is zero)."""
    fa = np.asarray(a, dtype=np.float64)
    fb = np.asarray(b, dtype=np.float64)
    na, nb = float(np.linalg.norm(fa)), float(np.linalg.norm(fb))
    return float(fa @ fb / (na * nb)) if na and nb else 0.0


def permute(v: np.ndarray) -> np.ndarray:
    """The order permutation P applied to ``v``."""
    out: np.ndarray = v[..., PERM]
    return out


class AtomCache:
    """Word atoms as packed bits, computed once per distinct word."""

    def __init__(self) -> None:
        self._packed: dict[str, np.ndarray] = {}

    def matrix(self, words: Sequence[str]) -> np.ndarray:
        rows = []
        for w in words:
            p = self._packed.get(w)
            if p is None:
                p = self._packed["".join(w)] = np.packbits(atom(w) > 0)
            rows.append(p)
        out: np.ndarray = np.unpackbits(np.stack(rows), axis=1).astype(np.int64) * 2 - 1
        return out


def encode_texts(docs: Sequence[Sequence[str]], cache: AtomCache | None = None) -> np.ndarray:
    """Content bundles of several word sequences at once (exact int64, one row each).

    Row i is 32·Σ atom(w) + Σ bind(atom(w_j), P(atom(w_{j+1}))) over document i.
    ``cache``: atoms to reuse and add to (None: this call's own). Never one the whole
    process shares: it would keep every word of every text, a purged one's too
    (docs/guarantees.md §6).
    """
    out = np.zeros((len(docs), D), dtype=np.int64)
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(w, len(vocab)) for w in words] for words in docs]
    if not vocab:
        return out
    atoms = (cache if cache is not None else AtomCache()).matrix(list(vocab))
    spec = np.fft.rfft(atoms.astype(np.float32), axis=1)
    pspec = np.fft.rfft(permute(atoms).astype(np.float32), axis=1)
    weighted = spec * np.float32(UNIGRAM_WEIGHT)
    for lo in range(0, len(docs), 64):
        part = ids[lo : lo + 64]
        lengths = np.fromiter((len(x) for x in part), dtype=np.int64, count=len(part))
        nonempty = np.flatnonzero(lengths)
        if not len(nonempty):
            continue
        flat = np.fromiter((i for x in part for i in x), dtype=np.int64, count=int(lengths.sum()))
        ends = np.cumsum(lengths)[nonempty]
        # Per token: its unigram, plus its pair with the next token of the same
        # document; summed per document in the frequency domain, then one inverse FFT.
        terms = weighted[flat]
        follows = np.ones(len(flat), dtype=bool)
        follows[ends - 1] = False
        j = np.flatnonzero(follows)
        terms[j] += spec[flat[j]] * pspec[flat[j + 1]]
        sums = np.add.reduceat(terms, ends - lengths[nonempty], axis=0)
        out[lo + nonempty] = np.rint(np.fft.irfft(sums, n=D, axis=1)).astype(np.int64)
    return out


def encode_text(words: Sequence[str]) -> np.ndarray:
    """The content bundle of a word sequence (exact int64)."""
    row: np.ndarray = encode_texts([words])[0]
    return row


def encode_entities(entities: Sequence[str]) -> np.ndarray:
    """The structure bundle of an entity list (exact int64)."""
    parts = []
    for j, e in enumerate(entities):
        ea = atom(e, "entity")
        parts.append(bind(ROLE_ENTITY, ea))
        if j < ORDER_ROLES:
            parts.append(bind(ROLE_ORDER[j], ea))
    return bundle(parts)


def pack(v: np.ndarray) -> np.ndarray:
    """Sign pattern of ``v`` packed to D/8 bytes (zeros take the tie-break atom's sign)."""
    positive = (v > 0) | ((v == 0) & (_TIE > 0))
    out: np.ndarray = np.packbits(positive)
    return out


def unpack(packed: np.ndarray) -> np.ndarray:
    """±1 float32 rows from packed rows."""
    bits = np.unpackbits(packed, axis=-1)
    out: np.ndarray = bits.astype(np.float32) * 2 - 1
    return out


#: Standard deviation of the similarity of two unrelated sign patterns.
NOISE_SD = 1.0 / np.sqrt(D)


def expected_member_similarity(items: int) -> float:
    """Expected sign-pattern similarity of a bundle of ``items`` bound items with one of them.

    A bundle of m roughly orthogonal items of equal size correlates with each at
    1/sqrt(m); comparing sign patterns turns a correlation rho into
    (2/pi) * arcsin(rho).
    """
    if items <= 0:
        return 0.0
    return float(2.0 / np.pi * np.arcsin(1.0 / np.sqrt(items)))


def snr(items: int) -> float:
    """Signal-to-noise ratio of finding one item in a bundle of ``items``."""
    return expected_member_similarity(items) / float(NOISE_SD)


def bit_similarity(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Similarity of packed sign patterns: 1 - 2 * hamming / D (a cosine estimate).

    ``rows`` is (n, D/8) uint8, ``query`` (D/8,) uint8. Uses popcount on 64-bit words.
    """
    x = np.bitwise_xor(rows.view(np.uint64), query.view(np.uint64))
    ham = np.bitwise_count(x).sum(axis=1, dtype=np.int64)
    out: np.ndarray = 1.0 - 2.0 * ham / D
    return out


def _probe_key(entity: str, role: int) -> bytes:
    r = ROLE_ENTITY if role < 0 else ROLE_ORDER[role]
    return bytes(pack(bind(r, atom(entity, "entity"))))


def probe_key(entity: str, role: int = -1) -> np.ndarray:
    """The packed sign pattern of bind(role, atom(entity)): the entity role (-1) or an
    order role (0, 1, ...). Not cached (:meth:`HRRIndex.probe_key` is)."""
    return np.frombuffer(_probe_key(entity, role), dtype=np.uint8)


#: (words, entities) of each requested slot, read back by the API layer.
Source = Callable[[Sequence[int]], list[tuple[str, tuple[str, ...]]]]


class HRRIndex:
    """Packed content and structure vectors for every slot, encoded lazily.

    It takes no events: every slot the catalog handed out since the last
    :meth:`ensure` is encoded by the next one.
    """

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.content = GrowArray(np.uint8, capacity=16, width=PACKED)
        self.structure = GrowArray(np.uint8, capacity=16, width=PACKED)
        self.items = GrowArray(np.int32, capacity=16)  # items bound in each structure
        #: the atoms of the words encoded and the probe keys asked (each costs hashing
        #: or an FFT), kept with the index and so dropped with its generation: caches
        #: the whole process shared would keep a purged fact's words and entities
        #: (docs/guarantees.md §6)
        self._atoms = AtomCache()
        self._probe_keys = functools.lru_cache(maxsize=PROBE_KEYS)(_probe_key)

    @property
    def stale(self) -> int:
        """Slots written since the last :meth:`ensure` (vacated ones included)."""
        return self.catalog.slots - self.content.n

    def ensure(self, source: Source) -> int:
        """Encode every live slot written since the last call; return how many."""
        start, stop = self.content.n, self.catalog.slots
        if start == stop:
            return 0
        alive = self.catalog.alive.view()
        rows_c = np.zeros((stop - start, PACKED), dtype=np.uint8)
        rows_s = np.zeros((stop - start, PACKED), dtype=np.uint8)
        items = np.zeros(stop - start, dtype=np.int32)
        todo = [s for s in range(start, stop) if alive[s]]
        for i in range(0, len(todo), _CHUNK):
            chunk = todo[i : i + _CHUNK]
            batch = source(chunk)
            content = encode_texts([tokenize(text) for text, _ in batch], self._atoms)
            for j, slot in enumerate(chunk):
                rows_c[slot - start] = pack(content[j])
                ents = batch[j][1]
                rows_s[slot - start] = pack(encode_entities(ents))
                items[slot - start] = len(ents) + min(len(ents), ORDER_ROLES)
        self.content.extend(rows_c)
        self.structure.extend(rows_s)
        self.items.extend(items)
        return len(todo)

    def _scores(self, bank: GrowArray, query: np.ndarray,
                allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        mask = self.catalog.alive.view()
        if allowed is not None:
            mask = mask & allowed
        slots = np.flatnonzero(mask)
        q = np.asarray(query, dtype=np.float32)
        norm = float(np.linalg.norm(q.astype(np.float64)))
        if not len(slots) or norm == 0.0:
            return slots, np.zeros(len(slots))
        out = np.empty(len(slots), dtype=np.float64)
        rows = bank.view()
        for i in range(0, len(slots), 8192):
            part = slots[i : i + 8192]
            out[i : i + 8192] = unpack(rows[part]) @ q
        return slots, out / (np.sqrt(D) * norm)

    def similar(self, words: Sequence[str], allowed: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
        """Cosine of every live document's content vector with the text's (slots, scores)."""
        return self._scores(self.content, encode_texts([words], self._atoms)[0], allowed)

    def probe(self, entity: str, role: int = -1,
              allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """How strongly each live document binds ``entity`` under ``role`` (-1: the entity
        role; j: order role j): (slots, similarity).

        Algebra, not lookup: the query is ``bind(role, atom(entity))`` and each
        document's score is the similarity of its structure pattern with the
        query's sign pattern (equivalently, of the unbound filler with the atom).
        """
        mask = self.catalog.alive.view()
        if allowed is not None:
            mask = mask & allowed
        slots = np.flatnonzero(mask)
        return slots, bit_similarity(self.structure.view()[slots], self.probe_key(entity, role))

    def probe_key(self, entity: str, role: int = -1) -> np.ndarray:
        """:func:`probe_key`, cached by this index (at most :data:`PROBE_KEYS` of them)."""
        return np.frombuffer(self._probe_keys(entity, role), dtype=np.uint8)

    def snapshot(self) -> Snapshot:
        """Rows are only ever appended (by :meth:`ensure`): shared."""
        return {"content": self.content.lend(), "structure": self.structure.lend(),
                "items": self.items.view()}

    def restore(self, snap: Snapshot) -> None:
        self.content = GrowArray.of(snap["content"], np.uint8)
        self.structure = GrowArray.of(snap["structure"], np.uint8)
        self.items = GrowArray.of(snap["items"], np.int32)
        n = len(self.content)
        if len(self.structure) != n or len(self.items) != n or n > self.catalog.slots or (
                n and self.content.view().shape[1] != PACKED):
            raise ValueError("hrr: vector banks disagree")

    def memory_bytes(self) -> int:
        return self.content.nbytes + self.structure.nbytes
