"""The repository stands alone: its documentation links only to itself, and every link holds.

The README, ``docs/`` and ``benchmarks/README.md`` never link outside the repository
(the contract used to live at ``../shared/SPEC.md``, a path only one machine has; the
README and ``docs/`` do not even name it), and
every relative link in the README and ``docs/*.md`` names a file that exists — and, when
it carries a ``#fragment``, a heading of that file (GitHub's anchors).
"""

from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")

#: [text](target) — the target up to the first space or closing parenthesis.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def pages() -> list[str]:
    return [os.path.join(ROOT, "README.md"),
            *sorted(os.path.join(DOCS, f) for f in os.listdir(DOCS) if f.endswith(".md"))]


def _links(path: str) -> list[str]:
    return LINK.findall(FENCE.sub("", read(path)))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: markup dropped, lower case, punctuation
    (``§``, ``:``, ``.``, backticks, ...) removed, each space a hyphen."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", read(path)).splitlines():
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_the_slug_is_githubs() -> None:
    assert slug("§4c The stored configuration") == "4c-the-stored-configuration"
    assert slug("§7 The recovery tool: `python -m holomem.fsck`") == \
        "7-the-recovery-tool-python--m-holomemfsck"
    assert slug("### `holomem serve --data DIR [options]`".lstrip("# ")) == \
        "holomem-serve---data-dir-options"


def test_the_docs_link_nothing_outside_the_repository() -> None:
    every = [*pages(), os.path.join(ROOT, "benchmarks", "README.md")]
    bad = []
    for path in every:
        if not os.path.exists(path):
            continue
        text = read(path)
        rel = os.path.relpath(path, ROOT)
        # The benchmarks' README may name the default LoCoMo data directory (an argument's
        # default, beside the checkout); it may not link there.
        if rel != os.path.join("benchmarks", "README.md") and (
                "../shared" in text or "SPEC.md" in text):
            bad.append(f"{rel} names ../shared or SPEC.md")
        for target in LINK.findall(text):
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
                continue
            where = os.path.normpath(os.path.join(os.path.dirname(path), target.split("#")[0]))
            if os.path.relpath(where, ROOT).startswith(".."):
                bad.append(f"{rel} links {target}, outside the repository")
    assert bad == []


def test_every_relative_link_names_a_file_and_heading_that_exist() -> None:
    bad = []
    checked = 0
    for path in pages():
        rel = os.path.relpath(path, ROOT)
        for target in _links(path):
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):
                continue  # https:, mailto: — not ours to check offline
            file, _, fragment = target.partition("#")
            where = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            checked += 1
            if not os.path.exists(where):
                bad.append(f"{rel}: {target} (no such file)")
            elif fragment and where.endswith(".md") and fragment not in anchors(where):
                bad.append(f"{rel}: {target} (no such heading)")
    assert bad == []
    assert checked >= 20  # the pages do link each other


def test_the_contract_keeps_the_section_numbers_code_cites() -> None:
    # Docstrings cite "§2" ... "§5", "§4a" ... "§4e" of the contract and "§6", "§7" of
    # the guarantees; each must stay a heading of its page.
    contract = read(os.path.join(DOCS, "contract.md"))
    guarantees = read(os.path.join(DOCS, "guarantees.md"))
    for n in ("1", "2", "3", "4", "4a", "4b", "4c", "4d", "4e", "5", "5a", "5b", "5c", "5d"):
        assert re.search(rf"^##+ §{n} ", contract, re.M), n
    for n in ("6", "6a", "7"):
        assert re.search(rf"^##+ §{n} ", guarantees, re.M), n
