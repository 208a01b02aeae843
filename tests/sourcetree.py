"""The source tree, read and parsed once per test process (not a test itself).

Owns: the cached text and ``ast`` of every ``.py`` file of holomem (and ``tools/``) that
the structural tests walk (tests/test_layers.py, tests/test_fs_seam.py,
tests/format/test_layout_in_format_py.py), so that the tree is parsed once for all of
them, not once per test. Imports: the standard library only.
"""

from __future__ import annotations

import ast
import functools
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@functools.cache
def files(top: str) -> tuple[str, ...]:
    """Every ``.py`` file under ``ROOT/top``, as an absolute path, sorted."""
    out = []
    for root, dirs, names in os.walk(os.path.join(ROOT, top)):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        out += [os.path.join(root, n) for n in names if n.endswith(".py")]
    return tuple(sorted(out))


@functools.cache
def source(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def parse(text: str, filename: str = "<snippet>") -> ast.Module:
    """``ast.parse``, once for each text, whatever name it is given (callers only read
    the tree; ``filename`` names the text in a syntax error)."""
    try:
        return _parsed(text)
    except SyntaxError as exc:
        raise SyntaxError(f"{filename}: {exc}") from exc


@functools.cache
def _parsed(text: str) -> ast.Module:
    return ast.parse(text)


def tree(path: str) -> ast.Module:
    return parse(source(path), path)
