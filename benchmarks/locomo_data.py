"""Loading the LoCoMo development set (``--data DIR``, default ``../shared/data/locomo/``
beside the checkout) as facts and questions.

One store per conversation, one fact per dialog turn: id = dia_id, text =
"speaker: text", event_time = the session's date. A question's relevant facts are
its evidence ids, normalised as the data's README describes (split on ';', ',' and
whitespace; "D:11:26" -> "D11:26"; "D30:05" -> "D30:5"; unknown ids dropped;
questions left without evidence skipped). The data is CC BY-NC 4.0 and stays where
it is; nothing of it is copied into this repository. A benchmark that needs it takes
``--data DIR`` (:func:`add_data_argument`) and stops with a message saying where it
looked when the file is not there (:func:`data_file`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sys
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
#: The directory holding the development set: ../shared/data/locomo/ beside the
#: repository (resolved from the repository, so any working directory will do).
DEFAULT_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "data", "locomo"))
FILE = "locomo_dev.json"
DEFAULT = os.path.join(DEFAULT_DIR, FILE)


def add_data_argument(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--data", metavar="DIR", default=DEFAULT_DIR,
                    help=f"the LoCoMo development set's directory, holding {FILE} "
                    "(default: ../shared/data/locomo/ beside the repository)")


def data_file(directory: str) -> str:
    """The development set's file in ``directory`` (or ``directory`` itself when it
    names the file); exits with status 2 and says so when it is not there."""
    path = directory if directory.endswith(".json") else os.path.join(directory, FILE)
    if not os.path.isfile(path):
        print(f"error: the LoCoMo development set is not at {path}; pass --data DIR, the "
              f"directory that holds {FILE} (the data is not part of this repository: "
              "CC BY-NC 4.0)", file=sys.stderr)
        raise SystemExit(2)
    return path
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop",
              5: "adversarial"}


@dataclass
class Turn:
    id: str
    text: str
    speaker: str
    session: int
    event_time_ms: int
    #: the turn's words alone (``text`` without the "speaker: " prefix)
    words: str = ""


@dataclass
class Question:
    text: str
    category: int
    evidence: list[str]


@dataclass
class Conversation:
    id: str
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def _parse_date(s: str) -> int:
    when = dt.datetime.strptime(s.strip(), "%I:%M %p on %d %B, %Y")
    return int(when.replace(tzinfo=dt.UTC).timestamp() * 1000)


def _norm_evidence(raw: list[str], known: set[str]) -> list[str]:
    out: list[str] = []
    for entry in raw:
        for piece in re.split(r"[;,\s]+", entry):
            piece = piece.strip()
            if not piece:
                continue
            piece = re.sub(r"^D:(\d+)", r"D\1", piece)
            m = re.match(r"^D(\d+):(\d+)$", piece)
            if m:
                piece = f"D{int(m.group(1))}:{int(m.group(2))}"
            if piece in known and piece not in out:
                out.append(piece)
    return out


def load(path: str = DEFAULT, *, captions: bool = False) -> list[Conversation]:
    with open(path, encoding="utf-8") as f:
        records = json.load(f)
    out = []
    for rec in records:
        conv = Conversation(rec["sample_id"])
        c = rec["conversation"]
        n = 1
        while f"session_{n}" in c or f"session_{n}_date_time" in c:
            if f"session_{n}" in c:
                when = _parse_date(c[f"session_{n}_date_time"])
                for turn in c[f"session_{n}"]:
                    words = turn["text"]
                    if captions and turn.get("blip_caption"):
                        words += f" [shares an image: {turn['blip_caption']}]"
                    conv.turns.append(Turn(turn["dia_id"], f"{turn['speaker']}: {words}",
                                           turn["speaker"], n, when, words))
            n += 1
        known = {t.id for t in conv.turns}
        for qa in rec["qa"]:
            ev = _norm_evidence(qa.get("evidence", []), known)
            if ev:
                conv.questions.append(Question(qa["question"], int(qa["category"]), ev))
        out.append(conv)
    return out


def metrics(ranked: list[str], relevant: list[str]) -> dict[str, float]:
    """recall_any@5, recall_all@5, recall_any@10, reciprocal rank of the first hit."""
    rel = set(relevant)
    rr = 0.0
    for i, doc in enumerate(ranked):
        if doc in rel:
            rr = 1.0 / (i + 1)
            break
    return {
        "recall_any@5": float(bool(rel & set(ranked[:5]))),
        "recall_all@5": float(rel <= set(ranked[:5])),
        "recall_any@10": float(bool(rel & set(ranked[:10]))),
        "mrr": rr,
    }


def summarise(rows: list[tuple[int, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Mean of each metric per category name, plus 'cat1-4' (the headline) and counts."""
    out: dict[str, dict[str, float]] = {}
    groups: dict[str, list[dict[str, float]]] = {}
    for cat, m in rows:
        groups.setdefault(CATEGORIES[cat], []).append(m)
        if cat != 5:
            groups.setdefault("cat1-4", []).append(m)
    for name, ms in sorted(groups.items()):
        out[name] = {k: round(sum(m[k] for m in ms) / len(ms), 4) for k in ms[0]}
        out[name]["n"] = len(ms)
    return out
