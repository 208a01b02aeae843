"""The layering of STYLE.md §1 holds: every import edge in holomem is an allowed one."""

from __future__ import annotations

import ast
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "holomem")

#: package prefix -> (holomem modules it may import, third-party top-level packages).
RULES: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("holomem.log", ("holomem.errors", "holomem.log"), ("xxhash", "zstandard", "cryptography")),
    ("holomem.events", ("holomem.errors",), ("msgspec",)),
    ("holomem.projections", ("holomem.errors", "holomem.events", "holomem.projections"),
     ("numpy", "msgspec", "Stemmer")),
    ("holomem.errors", (), ()),
    # fsck checks with the log, the events and the projections that lay out derived
    # files; its --repair rebuilds them by opening the store (holomem.api.documents).
    ("holomem.fsck", ("holomem.errors", "holomem.log", "holomem.events", "holomem.projections",
                      "holomem.api.documents"), ()),
]


def _modules() -> list[tuple[str, str]]:
    out = []
    for root, _, files in os.walk(PKG):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                out.append((rel.removesuffix(".__init__"), path))
    return sorted(out)


def _imports(path: str) -> set[str]:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _allowed(module: str, target: str) -> bool:
    for prefix, internal, external in RULES:
        if module == prefix or module.startswith(prefix + "."):
            top = target.split(".")[0]
            if top == "holomem":
                return any(target == ok or target.startswith(ok + ".") for ok in internal)
            return top in sys.stdlib_module_names or top in external
    return True  # api/ and the tools may import anything


def test_every_import_edge_is_allowed_by_the_layering() -> None:
    bad = [
        f"{module} imports {target}"
        for module, path in _modules()
        for target in sorted(_imports(path))
        if not _allowed(module, target)
    ]
    assert bad == []


def test_the_layering_check_rejects_a_forbidden_edge() -> None:
    assert not _allowed("holomem.log.journal", "holomem.events")
    assert not _allowed("holomem.projections.bm25", "holomem.log.fs")
    assert not _allowed("holomem.log.fs", "numpy")
    assert _allowed("holomem.api.memory", "holomem.log")
