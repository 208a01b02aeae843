"""The README's examples, as the tests run them (so the README cannot drift)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def section(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def blocks(title: str, lang: str) -> list[str]:
    """The fenced ``lang`` code blocks of one README section, dedented (a word after
    ``lang`` on the opening line says what the block is: tests/test_doc_examples.py)."""
    found = re.findall(rf"^( *)```{lang}(?: [^\n]*)?\n(.*?)^\1```", section(title),
                       re.M | re.S)
    return [textwrap.dedent(body) for _, body in found]
