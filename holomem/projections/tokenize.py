"""The tokenizer shared by BM25, HRR encoding and the word limit.

Owns: how text becomes terms. Imports only the standard library.

Rules, in order:

1. Unicode NFKC normalisation (skipped for pure ASCII, where it changes nothing),
   so that compatibility forms (full-width letters, ligatures) match their plain
   forms.
2. ``str.casefold()``: full Unicode case folding ("Straße" and "STRASSE" match).
3. Terms are maximal runs of letters, digits and combining marks (Unicode classes
   L*, N*, M*); everything else separates terms. An apostrophe inside a word is
   dropped, so "don't" is one term "dont" and "Alice's" is "alices" (see STEMMING
   below for the possessive).
4. Scripts written without spaces (Han, Hiragana, Katakana) are cut into single
   characters, so a query for one word finds it inside a longer run.
5. :func:`fold`, a light English suffix folding (plural "-s", "-es", "-ies"), is
   applied by the vocabulary, once per distinct word, when the store's measured
   setting turns it on (see benchmarks/tokenizer_locomo.py and its results).

Terms are never longer than 64 characters (a longer run is split into 64-character
pieces); this bounds what an adversarial text can put in the vocabulary.
"""

from __future__ import annotations

import re
import unicodedata

MAX_TERM = 64

_WORD = re.compile(rf"[^\W_]{{1,{MAX_TERM}}}")
_ASCII_WORD = re.compile(rf"[a-z0-9]{{1,{MAX_TERM}}}")
_POSSESSIVE = re.compile(r"'s\b")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def fold(term: str) -> str:
    """Light English suffix folding: possessives and plurals."""
    if len(term) <= 3 or not term.isascii():
        return term
    if term.endswith("ies") and len(term) > 4:
        return term[:-3] + "y"
    if term.endswith(("sses", "shes", "ches", "xes", "zes")):
        return term[:-2]
    if term.endswith("s") and not term.endswith(("ss", "us", "is")):
        return term[:-1]
    return term


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


def tokenize(text: str) -> list[str]:
    """The words of ``text`` in order, duplicates kept, before :func:`fold`."""
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
