"""The layering holds (STYLE.md §1, §10): every import edge in holomem is an allowed one.

Checked with ``ast`` over every module, every import — at the top, inside
functions, and under ``TYPE_CHECKING`` alike (a hidden import is still an edge):

- each package imports only what its tier may: log -> errors; events -> errors;
  projections -> events; the engine -> log, events and projections; the memory tier ->
  the engine, one rule per package: the shared shapes and checks, and each concept
  package (remember, conversation, recall, facts, forget, graph, holographic, entities,
  window, transfer, embedding) the concepts it builds on, named in :data:`RULES`; doors ->
  the memory tier and the engine's public face, never the log (but its file seam, ``log.fs``).
  Nothing imports upward;
- the memory tier's modules never import ``holomem.api.memory.memory``: ``Memory``
  composes them, not the other way round (``holomem.api.memory.aio``, AsyncMemory, wraps
  Memory: it sits above it, below the doors);
- the import graph of holomem has no cycle;
- no ``_private`` name is imported from, or reached through, another module.

The tree is read and parsed once per test process (tests/sourcetree.py), for this
module and the other structural tests alike.
"""

from __future__ import annotations

import ast
import functools
import os
import sys
from collections.abc import Iterator

from tests import sourcetree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "holomem")

LOG = ("holomem.errors", "holomem.log")
EVENTS = ("holomem.errors", "holomem.events")
PROJECTIONS = (*EVENTS, "holomem.projections")
ENGINE = (*LOG, *PROJECTIONS, "holomem.api.engine")
MEMORY = "holomem.api.memory"
#: The memory tier's shared parts: shapes, checks, policies, the session, the op table.
SHAPES = (f"{MEMORY}.shapes", f"{MEMORY}.types", f"{MEMORY}.graph.types", f"{MEMORY}.config")
SHARED = (*SHAPES, f"{MEMORY}.checks", f"{MEMORY}.filters", f"{MEMORY}.policies",
          f"{MEMORY}.session", f"{MEMORY}.progress")
MEMORY_API = (*ENGINE, MEMORY, "holomem.embedders")  # the whole memory tier
#: Doors reach the engine only through its public face (``holomem.api.engine``'s
#: package: Store and its types) and the file seam every tier shares.
DOORS = (*EVENTS, "holomem.log.fs", "holomem.api.engine", MEMORY, "holomem.embedders",
         "holomem.api.doors", "holomem.integrations", "holomem.client")


def _concept(name: str, *others: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """A concept package of the memory tier: the engine, the shared parts, itself, and
    the other concepts it builds on (each named once here: that is the design)."""
    own = f"{MEMORY}.{name}"
    return own, (*ENGINE, *SHARED, "holomem.embedders", own,
                 *(f"{MEMORY}.{o}" for o in others)), ("msgspec", "numpy")


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
     ("msgspec", "numpy", "tokenizers", "safetensors", "onnxruntime", "onnx")),
    # Extractors (issue 30) stand apart too: conversation turns in, fact inputs out; the
    # chat adapter's transport is the standard library's.
    ("holomem.extractors", ("holomem.errors", "holomem.extractors"), ("msgspec",)),
    # The approximate vector index (the ann extra) is the only user of usearch; it
    # imports onnxruntime first, only so that the two load in the order that works.
    ("holomem.projections.vectorindex", PROJECTIONS, ("numpy", "usearch", "onnxruntime")),
    ("holomem.projections", PROJECTIONS, ("numpy", "msgspec", "Stemmer")),
    ("holomem.api.engine", ENGINE, ("msgspec", "numpy")),
    ("holomem.api.doors", DOORS, ("msgspec", "numpy", "starlette", "uvicorn", "mcp", "anyio",
                                  "httptools", "h11", "prometheus_client")),
    # -- the memory tier, a package at a time ---------------------------------------------
    (f"{MEMORY}.shapes", (), ("msgspec",)),
    (f"{MEMORY}.graph.types", (f"{MEMORY}.shapes",), ("msgspec",)),
    (f"{MEMORY}.config", ("holomem.errors",), ("msgspec",)),
    # Reading dates in text: the standard library only.
    (f"{MEMORY}.dates", (), ()),
    # A namespace's one-string form is the engine's (its checks read it).
    ("holomem.api.engine.nspath", ("holomem.errors",), ()),
    (f"{MEMORY}.types", ("holomem.errors", f"{MEMORY}.shapes", f"{MEMORY}.graph.types",
                         f"{MEMORY}.config", "holomem.api.engine.nspath"), ("msgspec",)),
    (f"{MEMORY}.checks", (*ENGINE, *SHAPES), ("msgspec",)),
    (f"{MEMORY}.policies", (*ENGINE, *SHAPES), ("msgspec", "numpy")),
    (f"{MEMORY}.filters", (*ENGINE, *SHAPES), ("msgspec", "numpy")),
    (f"{MEMORY}.progress", (*ENGINE,), ()),
    (f"{MEMORY}.session", (*ENGINE, *SHARED, "holomem.embedders", f"{MEMORY}.embedding"),
     ("msgspec",)),
    _concept("embedding", "remember"),
    _concept("remember", "embedding"),
    # A conversation's shapes are the contract's too (the op table, the requests).
    (f"{MEMORY}.conversation.types", (f"{MEMORY}.shapes", f"{MEMORY}.types"), ("msgspec",)),
    # The call resolves a built-in extractor's name (a request carries names, not code).
    (f"{MEMORY}.conversation.calls",
     (*_concept("conversation", "graph", "remember")[1], "holomem.extractors"),
     ("msgspec", "numpy")),
    _concept("conversation", "graph", "remember"),
    # Recall reads the reply links a conversation writes (their relation's name) and
    # the dates in a question (issue 30).
    _concept("recall", "embedding", "facts", "graph", "conversation.links", "dates"),
    _concept("facts", "forget"),
    _concept("forget", "graph", "remember"),
    _concept("graph", "embedding", "recall"),
    _concept("holographic"),
    # An entity profile's shapes are the contract's too (the op table).
    (f"{MEMORY}.entities.types", (f"{MEMORY}.shapes", f"{MEMORY}.types",
                                  f"{MEMORY}.graph.types"), ("msgspec",)),
    _concept("entities", "facts", "forget", "graph"),
    # An import cut into the requests a client sends, within the contract's bounds.
    (f"{MEMORY}.transfer.parts", (*ENGINE, *SHARED, f"{MEMORY}.transfer",
                                  f"{MEMORY}.requests"), ("msgspec",)),
    _concept("transfer", "embedding", "forget", "graph", "remember"),
    # The token counter of compile_context uses tiktoken when it is installed (issue 19).
    (f"{MEMORY}.window.tokens", (*ENGINE, *SHARED), ("tiktoken",)),
    # The prompt block reads a stored time as a date through dates.moment.
    _concept("window", "forget", "graph", "recall", "remember", "dates"),
    # The contract: request shapes, the op table, decoding; and what a build can do.
    (f"{MEMORY}.requests", (*ENGINE, *SHARED, f"{MEMORY}.conversation.types",
                            f"{MEMORY}.entities.profile",
                            f"{MEMORY}.transfer.exchange",
                            f"{MEMORY}.transfer.pages",
                            f"{MEMORY}.window.budget"), ("msgspec",)),
    (f"{MEMORY}.ops", (*ENGINE, *SHARED, f"{MEMORY}.requests", f"{MEMORY}.conversation.types",
                       f"{MEMORY}.entities.types",
                       f"{MEMORY}.transfer.exchange",
                       f"{MEMORY}.transfer.records", f"{MEMORY}.transfer.pages",
                       f"{MEMORY}.window.budget", f"{MEMORY}.window.working"), ()),
    (f"{MEMORY}.contract", (*ENGINE, f"{MEMORY}.ops"), ("msgspec",)),
    (f"{MEMORY}.about", (*ENGINE, *SHARED, "holomem.embedders", f"{MEMORY}.ops"), ()),
    # Memory composes every concept; AsyncMemory is its asyncio face (above it).
    # (and the errors: arguments that do not fit a call are invalid_request)
    (f"{MEMORY}.binding", (f"{MEMORY}.session", f"{MEMORY}.tracing", "holomem.errors"), ()),
    # Spans around each op when the otel extra is installed (nothing otherwise); a span
    # names a namespace only when the engine's check accepts it (msgspec: the request
    # structs whose namespace field it reads).
    (f"{MEMORY}.tracing", ("holomem.api.engine.nspath", "holomem.api.engine.validate",
                           "holomem.errors"), ("opentelemetry", "msgspec")),
    (f"{MEMORY}.memory", MEMORY_API, ()),
    (f"{MEMORY}.aio", MEMORY_API, ()),
    (f"{MEMORY}.aiowait", MEMORY_API, ()),
    (MEMORY, (), ()),  # the package's own __init__ imports nothing
    # langchain_core: LangGraph's own config type (RunnableConfig), part of its extra.
    ("holomem.integrations", DOORS, ("msgspec", "agent", "hermes_constants", "langgraph",
                                     "langchain_core")),
    ("holomem.client", DOORS, ("msgspec", "httpx")),
    # fsck checks with the log, the events and the projections that lay out derived
    # files; its --repair rebuilds them by opening the store (the engine).
    ("holomem.fsck", (*LOG, *PROJECTIONS, "holomem.fsck", "holomem.api.engine"), ()),
    # The crash harness drives the public API in its children; nothing imports it.
    ("holomem.crashtest", (*LOG, *PROJECTIONS, *DOORS, "holomem.crashtest", "holomem.fsck",
                           "holomem"), ("msgspec", "numpy", "zstandard", "cryptography")),
    # The package itself re-exports the public surface; __main__ runs the CLI.
    ("holomem.__main__", DOORS, ()),
    ("holomem", (*DOORS, "holomem.log", "holomem"), ()),
]


@functools.cache
def _modules() -> list[tuple[str, str]]:
    out = []
    for path in sourcetree.files("holomem"):
        rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
        out.append((rel.removesuffix(".__init__"), path))
    return sorted(out)


def _tree(path: str) -> ast.Module:
    return sourcetree.tree(path)


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


@functools.cache
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
           if "holomem.api.memory.memory" in edges and m.startswith("holomem.api")
           and not m.startswith(("holomem.api.doors", "holomem.api.memory.aio"))]
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
    assert not _allowed("holomem.api.engine.store", "holomem.api.memory.memory")
    assert not _allowed("holomem.api.engine.view", "holomem.api.memory.recall.rank")
    assert not _allowed("holomem.api.memory.recall.rank", "holomem.api.doors.cli.commands")
    assert not _allowed("holomem.api.memory.types", "holomem.api.memory.policies")
    assert _allowed("holomem.api.memory.memory", "holomem.api.engine")
    assert _allowed("holomem.api.doors.http.server", "holomem.api.memory.memory")
    assert not _allowed("holomem.api.doors.cli.commands", "holomem.log.journal")
    assert _allowed("holomem.api.doors.cli.commands", "holomem.log.fs")
    assert not _allowed("holomem.api.memory.holographic.algebra", "holomem.api.memory.recall.rank")
    assert not _allowed("holomem.api.memory.types", "holomem.api.engine")
    assert _allowed("holomem.api.memory.recall.rank", "holomem.api.memory.graph.reach")
