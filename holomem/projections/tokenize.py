"""The tokenizer shared by BM25, HRR encoding and the word limit.

Owns: how text becomes words, how words become terms, and which query words are
ignored. Imports the standard library and PyStemmer (the Snowball project's own
binding of its stemmers).

Words, in order:

1. Unicode NFKC normalisation (skipped for pure ASCII, where it changes nothing),
   so that compatibility forms (full-width letters, ligatures) match their plain
   forms.
2. ``str.casefold()``: full Unicode case folding ("Straße" and "STRASSE" match).
3. Words are maximal runs of letters and digits (an underscore separates); a
   possessive "'s" is dropped and other apostrophes vanish, so "Alice's" is
   "alice" and "don't" is "dont".
4. Scripts written without spaces (Han, Hiragana, Katakana) are cut into single
   characters, so a query for one word finds it inside a longer run.
5. No word is longer than 64 characters (a longer run is split into 64-character
   pieces); this bounds what an adversarial text can put in the vocabulary.

Terms: each word is reduced by the Snowball English stemmer (Porter2), once per
distinct word ("painting", "painted", "paints" -> "paint").

Query words: English function words (:data:`STOPWORDS`) are left out of a query
unless the query holds nothing else. Documents keep them (they count in document
length), so a query made only of them still finds something.

Measured on the LoCoMo development set (benchmarks/tokenizer_locomo.py; results in
benchmarks/results/tokenizer_locomo.json): stemming and query stopwords together
raise recall_any@10 over categories 1-4 from 0.59 (plain words) to 0.68.
"""

from __future__ import annotations

import itertools
import re
import threading
import unicodedata
from typing import NamedTuple

import numpy as np
import Stemmer

MAX_TERM = 64

_WORD = re.compile(rf"[^\W_]{{1,{MAX_TERM}}}")
_ASCII_WORD = re.compile(rf"[a-z0-9]{{1,{MAX_TERM}}}")
_POSSESSIVE = re.compile(r"'s\b")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


#: Query words that carry no content: left out of queries (documents keep them).
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself no nor not now of off on once only or other our ours ourselves out
over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves
""".split())

_local = threading.local()


def stem(word: str) -> str:
    """The Snowball English stem of ``word`` (one stemmer per thread: they are not shared).

    The stemmer keeps no cache of its own (size 0): one per thread would outlive every
    store and keep a purged fact's words (docs/guarantees.md §6), and the callers keep
    each word's term already, so nearly every word asked is new to it (which its cache
    made four times slower: 1.0 against 0.27 us a word, measured on distinct words).
    """
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english", 0)
    out: str = stemmer.stemWord(word)
    return out


def query_words(query: str) -> list[str]:
    """The words of a query that count: its words minus :data:`STOPWORDS` (unless
    nothing would be left)."""
    words = tokenize(query)
    content = [w for w in words if w not in STOPWORDS]
    return content or words


def _split_cjk(run: str) -> list[str]:
    out: list[str] = []
    buf: list[str] = []
    for ch in run:
        if _CJK.match(ch):
            if buf:
                out.append("".join(buf))
                buf = []
            out.append(ch)
        else:
            buf.append(ch)
    if buf:
        out.append("".join(buf))
    return out


#: ASCII bytes: letters and digits kept, NUL kept (it separates texts in
#: :func:`tokenize_many`), every other byte a space.
_SPACE_OUT = bytes(b if chr(b).isalnum() or b == 0 else 32 for b in range(128)) + bytes(128)


def tokenize_many(texts: list[str]) -> list[list[str]]:
    """``[tokenize(t) for t in texts]``, with the work in C for a batch of plain
    ASCII texts (no apostrophe, no word longer than ``MAX_TERM``): joined at a
    separator none of them holds, lowered, every byte but a letter or digit made a
    space, and split (the words ``_ASCII_WORD`` finds, in the same order)."""
    if len(texts) > 1:
        joined = "\x00".join(texts)
        if (joined.isascii() and "'" not in joined
                and joined.count("\x00") == len(texts) - 1):
            folded = joined.lower()
            spaced = folded.encode("ascii").translate(_SPACE_OUT)
            out = [part.decode("ascii").split() for part in spaced.split(b"\x00")]
            if max(map(len, itertools.chain.from_iterable(out)), default=0) <= MAX_TERM:
                return out
            return list(map(_ASCII_WORD.findall, folded.split("\x00")))
    return list(map(tokenize, texts))


class Spans(NamedTuple):
    """The words of a batch of texts as places in one byte string."""

    raw: bytes  # the texts folded, every byte that is not a letter or digit a space or NUL
    starts: np.ndarray  # where each word starts in raw (int64), in order
    lengths: np.ndarray  # each word's length in bytes (int64)
    counts: np.ndarray  # how many words each text has (int64)

    def words(self) -> list[str]:
        """The words themselves (what :func:`tokenize` gives each text, back to back)."""
        raw = self.raw
        return [raw[s : s + n].decode("ascii")
                for s, n in zip(self.starts.tolist(), self.lengths.tolist(), strict=True)]


def ascii_spans(texts: list[str]) -> Spans | None:
    """Where the words of a batch of texts are (:class:`Spans`) — or None unless the
    batch is plain ASCII, holds no NUL and no word longer than ``MAX_TERM``. The texts
    are folded in one pass, joined at NULs (a NUL ends a word as the end of a text
    does; a possessive is dropped as in each text alone), and the words are found and
    counted per text with numpy: no string is made for a word."""
    if len(texts) < 2:
        return None
    joined = "\x00".join(texts)
    if not joined.isascii() or joined.count("\x00") != len(texts) - 1:
        return None
    folded = joined.lower()
    if "'" in folded:
        folded = _POSSESSIVE.sub("", folded).replace("'", "")
    raw = folded.encode("ascii").translate(_SPACE_OUT)
    # Letters and digits are above 32 (a NUL is 0, a space 32): a word starts where
    # one follows something else and ends where something else follows it.
    buf = np.frombuffer(raw, dtype=np.uint8)
    word = np.zeros(len(buf) + 2, dtype=bool)
    np.greater(buf, 32, out=word[1:-1])
    edges = np.flatnonzero(word[1:] != word[:-1])
    starts, ends = edges[0::2], edges[1::2]
    lengths = ends - starts
    if len(lengths) and int(lengths.max()) > MAX_TERM:
        return None
    before = np.searchsorted(starts, np.flatnonzero(buf == 0))
    counts = np.diff(before, prepend=0, append=len(starts))
    return Spans(raw, starts, lengths, counts)


def tokenize(text: str) -> list[str]:
    """The words of ``text`` in order, duplicates kept, before stemming."""
    if text.isascii():
        folded = text.lower()  # casefold() equals lower() on ASCII
        if "'" in folded:
            folded = _POSSESSIVE.sub("", folded).replace("'", "")
        words = _ASCII_WORD.findall(folded)
    else:
        folded = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
        if "'" in folded:
            folded = _POSSESSIVE.sub("", folded).replace("'", "")
        words = []
        for word in _WORD.findall(folded):
            if _CJK.search(word):
                words.extend(_split_cjk(word))
            else:
                words.append(word)
    return words
