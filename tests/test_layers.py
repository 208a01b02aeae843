"""The layering holds (STYLE.md §1, §10): every import edge in holomem is an allowed one.

Checked with ``ast`` over every module, every import — at the top, inside
functions, and under ``TYPE_CHECKING`` alike (a hidden import is still an edge):

- each package imports only what its tier may: log -> errors; events -> errors;
  projections -> events; the engine -> log, events, projections and the shared
  API shapes (``api.types``, ``api.graphtypes``, ``api.validate``); the memory API -> the engine;
  doors -> the memory API. Nothing imports upward;
- the memory API's modules never import ``holomem.api.memory``: ``Memory``
  orchestrates them, not the other way round (``holomem.api.aio``, AsyncMemory, wraps
  Memory: it sits above it, below the doors);
- the import graph of holomem has no cycle;
- no ``_private`` name is imported from, or reached through, another module.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "holomem")

LOG = ("holomem.errors", "holomem.log")
EVENTS = ("holomem.errors", "holomem.events")
PROJECTIONS = (*EVENTS, "holomem.projections")
#: The shapes and checks every API tier shares: they import projections at most.
SHARED = ("holomem.api.types", "holomem.api.graphtypes", "holomem.api.nspath",
          "holomem.api.validate")
ENGINE = (*LOG, *PROJECTIONS, *SHARED, "holomem.api.engine")
MEMORY_API = (*ENGINE, "holomem.api", "holomem.embedders")  # every api module but the doors
DOORS = (*MEMORY_API, "holomem.api.doors", "holomem.integrations", "holomem.client")

#: module prefix -> (holomem modules it may import, third-party top-level packages).
#: The first matching prefix decides; the order runs from the most specific.
RULES: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("holomem.errors", (), ()),
    # The stream journal (issue 18) is the one part of the log that talks to NATS.
    ("holomem.log.stream", LOG, ("xxhash", "zstandard", "cryptography", "nats")),
    ("holomem.log", LOG, ("xxhash", "zstandard", "cryptography")),
    ("holomem.events", EVENTS, ("msgspec",)),
    # Embedders (issue 14) stand apart: text in, vectors out, errors from the tree.
    ("holomem.embedders", ("holomem.errors", "holomem.embedders"),
     ("msgspec", "numpy", "tokenizers", "safetensors")),
    # The approximate vector index (the ann extra) is the only user of usearch.
    ("holomem.projections.vectorindex", PROJECTIONS, ("numpy", "usearch")),
    ("holomem.projections", PROJECTIONS, ("numpy", "msgspec", "Stemmer")),
    ("holomem.api.graphtypes", (), ("msgspec",)),
    # A namespace's one-string form: its grammar and nothing else.
    ("holomem.api.nspath", ("holomem.errors",), ()),
    ("holomem.api.types", ("holomem.errors", "holomem.api.graphtypes", "holomem.api.nspath"),
     ("msgspec",)),
    ("holomem.api.validate", (*PROJECTIONS, "holomem.api.types", "holomem.api.nspath"),
     ("msgspec", "numpy")),
    ("holomem.api.engine", ENGINE, ("msgspec", "numpy")),
    ("holomem.api.doors", DOORS, ("msgspec", "numpy", "starlette", "uvicorn", "mcp", "anyio",
                                  "httptools", "h11")),
    # AsyncMemory is Memory's asyncio face: above Memory, below the doors.
    ("holomem.api.aio", MEMORY_API, ()),
    # The token counter of compile_context uses tiktoken when it is installed (issue 19).
    ("holomem.api.tokens", MEMORY_API, ("tiktoken",)),
    ("holomem.api", MEMORY_API, ("msgspec", "numpy")),
    ("holomem.integrations", DOORS, ("msgspec", "agent", "hermes_constants", "langgraph")),
    ("holomem.client", DOORS, ("msgspec", "httpx")),
    # fsck checks with the log, the events and the projections that lay out derived
    # files; its --repair rebuilds them by opening the store (the engine).
    ("holomem.fsck", (*LOG, *PROJECTIONS, "holomem.fsck", "holomem.api.engine"), ()),
    # The crash harness drives the public API in its children; nothing imports it.
    ("holomem.crashtest", (*DOORS, "holomem.crashtest", "holomem.fsck", "holomem"),
     ("msgspec", "numpy", "zstandard", "cryptography")),
    # The package itself re-exports the public surface; __main__ runs the CLI.
    ("holomem.__main__", DOORS, ()),
    ("holomem", (*DOORS, "holomem"), ()),
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


def _tree(path: str) -> ast.Module:
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), path)


def _imports(tree: ast.Module) -> Iterator[tuple[str, list[str]]]:
    """(module, names imported from it) for every import anywhere in the tree."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, []
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, [a.name for a in node.names]


def _targets(module: str, names: list[str], known: set[str]) -> set[str]:
    """The holomem modules an import statement depends on (``from pkg import mod``
    names a module, not just the package)."""
    subs = {f"{module}.{n}" for n in names if f"{module}.{n}" in known}
    if names and len(subs) == len(names):
        return subs  # only submodules: the package itself adds no dependency
    return {module} | subs


def _rule(module: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    for prefix, internal, external in RULES:
        if module == prefix or module.startswith(prefix + "."):
            return internal, external
    raise AssertionError(f"no layering rule covers {module}")


def _is_door(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in
               ("holomem.api.doors", "holomem.integrations", "holomem.client"))


def _allowed(module: str, target: str) -> bool:
    internal, external = _rule(module)
    top = target.split(".")[0]
    if _is_door(target) and not (_is_door(module) or module in ("holomem", "holomem.__main__")
                                 or module.startswith("holomem.crashtest")):
        return False  # nothing below the doors imports one
    if top == "holomem":
        if target == "holomem" and module != "holomem":
            return "holomem" in internal
        return any(target == ok or target.startswith(ok + ".") for ok in internal
                   if ok != "holomem")
    return top in sys.stdlib_module_names or top in external


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    known = {m for m, _ in mods}
    graph: dict[str, set[str]] = {}
    for module, path in mods:
        edges: set[str] = set()
        for target, names in _imports(_tree(path)):
            if target.split(".")[0] == "holomem":
                edges |= {t for t in _targets(target, names, known) if t in known}
        graph[module] = edges - {module}
    return graph


def test_every_import_edge_is_allowed_by_the_tiers() -> None:
    known = {m for m, _ in _modules()}
    bad = []
    for module, path in _modules():
        for target, names in _imports(_tree(path)):
            for t in sorted(_targets(target, names, known)):
                if not _allowed(module, t):
                    bad.append(f"{module} imports {t}")
    assert bad == []


def test_no_memory_api_module_imports_memory() -> None:
    graph = _graph()
    bad = [m for m, edges in graph.items()
           if "holomem.api.memory" in edges and m.startswith("holomem.api")
           and not m.startswith(("holomem.api.doors", "holomem.api.aio"))]
    assert bad == []


def test_the_import_graph_has_no_cycle() -> None:
    graph = _graph()
    # Package __init__ modules re-export their children; an edge from a child to its
    # own package's __init__ is an import of the package, so it is left out here.
    def edges(m: str) -> set[str]:
        return {t for t in graph[m] if not m.startswith(t + ".")}

    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(m: str, path: list[str]) -> bool:
        state[m] = 1
        for t in sorted(edges(m)):
            if state.get(t) == 1:
                cycle.extend([*path[path.index(t):], t] if t in path else [m, t])
                return True
            if t not in state and visit(t, [*path, t]):
                return True
        state[m] = 2
        return False

    for m in sorted(graph):
        if m not in state and visit(m, [m]):
            break
    assert cycle == []


def test_no_private_name_crosses_a_module() -> None:
    bad = []
    for module, path in _modules():
        tree = _tree(path)
        imported_modules: set[str] = set()
        for target, names in _imports(tree):
            if target.split(".")[0] != "holomem":
                continue
            bad += [f"{module} imports {target}.{n}" for n in names
                    if n.startswith("_") and not n.startswith("__")]
            imported_modules.add(target.rsplit(".", 1)[-1])
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported_modules.update(a.asname or a.name for a in node.names)
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name)
                    and node.value.id in imported_modules):
                bad.append(f"{module} reaches {node.value.id}.{node.attr}")
    assert bad == []


def test_the_checks_reject_what_they_must() -> None:
    assert not _allowed("holomem.log.journal", "holomem.events")
    assert not _allowed("holomem.projections.bm25", "holomem.log.fs")
    assert not _allowed("holomem.log.fs", "numpy")
    assert not _allowed("holomem.api.engine.store", "holomem.api.memory")
    assert not _allowed("holomem.api.engine.view", "holomem.api.recall")
    assert not _allowed("holomem.api.recall", "holomem.api.doors.cli")
    assert not _allowed("holomem.api.types", "holomem.api.policies")
    assert _allowed("holomem.api.memory", "holomem.api.engine")
    assert _allowed("holomem.api.doors.http", "holomem.api.memory")
