"""Which lexical settings and score fusions help retrieval on the LoCoMo development set.

    python benchmarks/tokenizer_locomo.py [--data DIR] [--save]

The evidence behind two defaults of the document engine:

- the lexical settings of BM25: Snowball stemming, query stopwords, and b;
- fusing HRR content similarity into the score, at several weights.

Each setting ranks every turn of a conversation for each question; reported are
recall_any@5, recall_all@5, recall_any@10 and MRR per category, beside SQLite
FTS5 (bm25 ranking, the question's words OR-joined).

The data is read from ``--data DIR`` (default ``../shared/data/locomo/`` beside the
repository); without it the script stops and says where it looked. Targets (issue 3:
a normalisation is a default only where it measurably helps), as met or missed: over
categories 1-4, recall_any@10 of the default is at least that of the default without
stemming, and at least that with b = 0.75; query stopwords do not lower it. Prints the
JSON; writes benchmarks/results/tokenizer_locomo.json only with ``--save``.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

from benchmarks._common import add_save, check, emit, machine
from benchmarks.locomo_data import add_data_argument, data_file, load, metrics, summarise
from holomem.events import DocumentAdded
from holomem.projections.bm25 import BM25
from holomem.projections.catalog import Catalog
from holomem.projections.fusion import top_k
from holomem.projections.hrr import D, encode_text, encode_texts, pack, unpack
from holomem.projections.tokenize import tokenize

HRR_WEIGHTS = (0.1, 0.2, 0.3)


def fts_rank(con: sqlite3.Connection, question: str, k: int) -> list[str]:
    words = tokenize(question)
    if not words:
        return []
    q = " OR ".join(f'"{w}"' for w in dict.fromkeys(words))
    rows = con.execute("SELECT id FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?", (q, k))
    return [r[0] for r in rows]


LEXICAL = {
    # name: (stemming, query stopwords, k1, b)
    "plain_b0.75": (False, False, 1.2, 0.75),
    "stem_b0.75": (True, False, 1.2, 0.75),
    "stem_stopwords_b0.75": (True, True, 1.2, 0.75),
    "stem_stopwords_b0.4 (default)": (True, True, 1.2, 0.4),
    "nostem_stopwords_b0.4": (False, True, 1.2, 0.4),
}
DEFAULT = "stem_stopwords_b0.4 (default)"


def targets(settings: dict[str, Any]) -> dict[str, Any]:
    """Each part of the default setting helps (or at least does not hurt) recall_any@10
    over categories 1-4: the ratio of the default to the setting without that part."""
    def head(name: str) -> float:
        return float(settings[name]["cat1-4"]["recall_any@10"])

    def ratio(a: str, b: str) -> dict[str, Any]:
        return {**check(round(head(a) / head(b), 4), ">=", 1.0), "setting": a, "versus": b}

    return {"stemming": ratio(DEFAULT, "nostem_stopwords_b0.4"),
            "b_0.4": ratio(DEFAULT, "stem_stopwords_b0.75"),
            "query_stopwords": ratio("stem_stopwords_b0.75", "stem_b0.75")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_argument(ap)
    add_save(ap, "tokenizer_locomo")
    args = ap.parse_args()
    convs = load(data_file(args.data))
    settings = [*LEXICAL, *[f"default+hrr{w}" for w in HRR_WEIGHTS], "sqlite_fts5"]
    rows: dict[str, list[tuple[int, dict[str, float]]]] = {s: [] for s in settings}
    for conv in convs:
        built = {}
        for name, (stemming, stop, k1, b) in LEXICAL.items():
            cat = Catalog()
            bm = BM25(cat, stemming=stemming, stopwords=stop, k1=k1, b=b)
            bm.deferred = True
            for i, t in enumerate(conv.turns, start=1):
                e = DocumentAdded(id=t.id, text=t.text)
                bm.apply(i, e, cat.apply(i, e))
            bm.merge()
            built[name] = (cat, bm)
        content = np.stack([pack(v) for v in encode_texts([tokenize(t.text) for t in conv.turns])])
        signs = unpack(content)
        con = sqlite3.connect(":memory:")
        con.execute("CREATE VIRTUAL TABLE t USING fts5(id UNINDEXED, body)")
        con.executemany("INSERT INTO t VALUES (?, ?)", [(t.id, t.text) for t in conv.turns])
        for q in conv.questions:
            for name in LEXICAL:
                cat, bm = built[name]
                slots, scores = bm.score(q.text)
                order = top_k(slots, scores, 10)
                rows[name].append((q.category, metrics([cat.ids[int(slots[i])] or ""
                                                        for i in order], q.evidence)))
            cat, bm = built[DEFAULT]
            slots, scores = bm.score(q.text)
            lex = np.zeros(cat.slots)
            lex[slots] = scores
            if lex.max() > 0:
                lex = lex / lex.max()
            qv = encode_text(tokenize(q.text)).astype(np.float32)
            norm = float(np.linalg.norm(qv))
            sim = (signs @ qv) / (np.sqrt(D) * norm) if norm else np.zeros(cat.slots)
            all_slots = np.arange(cat.slots)
            for w in HRR_WEIGHTS:
                fused = (1 - w) * lex + w * np.maximum(sim, 0)
                order = top_k(all_slots, fused, 10)
                rows[f"default+hrr{w}"].append((q.category, metrics(
                    [cat.ids[int(i)] or "" for i in order], q.evidence)))
            rows["sqlite_fts5"].append((q.category, metrics(fts_rank(con, q.text, 10),
                                                              q.evidence)))
        con.close()
    result = {
        "benchmark": "tokenizer_locomo",
        "machine": machine("."),
        "conditions": {"data": "LoCoMo dev (6 conversations)", "facts": "one per turn, "
                       "'speaker: text', no image captions", "k": 10},
        "settings": {s: summarise(r) for s, r in rows.items()},
    }
    result["targets"] = targets(result["settings"])
    emit("tokenizer_locomo", result, args.save)


if __name__ == "__main__":
    main()
