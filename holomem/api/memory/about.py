"""What a build of holomem can do, asked before calling: ``Memory.capabilities``.

Owns: the ``capabilities`` call and what it reports — the contract ops of the op table
(:mod:`.ops`), the built-in embedders and whether each one's model is installed, the
optional extras installed (looked up, never imported), and the format versions this
build writes and reads (FORMAT.md). Imports the op table, the log's format versions
and the embedders' registry.
"""

from __future__ import annotations

import importlib.util
from importlib.metadata import PackageNotFoundError, version

from holomem.api.memory.ops import OPS, WRITES
from holomem.api.memory.session import Session
from holomem.api.memory.types import Capabilities
from holomem.embedders import minilm, registry
from holomem.log import format as fmt

#: Each optional extra (``pip install 'holomem-db[NAME]'``) by the modules it brings.
EXTRAS: dict[str, tuple[str, ...]] = {
    "serve": ("starlette", "uvicorn", "httpx", "mcp", "prometheus_client"),
    "langgraph": ("langgraph",),
    "nats": ("nats",),
    "ann": ("usearch",),
    "tokens": ("tiktoken",),
    "otel": ("opentelemetry",),
}
#: The package that holds each built-in embedder's model.
_MODELS = {"minilm": minilm.PACKAGE}


def holomem_version() -> str:
    """The installed distribution's version: the one reader of it (``holomem --version``,
    ``capabilities``, the OpenAPI document, the MCP server, the Hermes plugin's
    manifest). In a checkout never installed, ``0+unknown``: still a valid version
    (PEP 440), the lowest of its release, that says it is not known."""
    try:
        return version("holomem-db")  # the distribution's name; the package is holomem
    except PackageNotFoundError:
        return "0+unknown"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def capabilities(s: Session, /) -> Capabilities:
    """What this build serves: its version, the contract ops (and those that write),
    the built-in embedders (True: the model is installed), the optional extras
    installed, and the format versions it writes and reads: the same for every store
    this build opens."""
    return Capabilities(
        version=holomem_version(), ops=sorted(OPS), writes=sorted(WRITES),
        embedders={name: _installed(_MODELS[name]) for name in registry.NAMES},
        extras={name: all(_installed(m) for m in modules) for name, modules in EXTRAS.items()},
        formats={"frameWrite": fmt.WRITE_VERSION, "frameRead": fmt.READ_VERSION,
                 "textSegment": fmt.RECORD_FILE_VERSION,
                 "textSegmentRead": list(fmt.RECORD_FILE_VERSIONS),
                 "checkpoint": fmt.CHECKPOINT_VERSION})
