"""The documentation shows what the code does: every JSON example of the README and
``docs/*.md`` runs, and answers exactly what the page shows; every list of ops or tools
in them names exactly the code's.

A fenced JSON block says what it is by a word after ``json`` on its opening line (GitHub
shows the block as JSON and does not show the word):

- ``json OP`` (an op of the contract, e.g. ``json recall``): a request. The page's
  requests run in page order through ``Memory.call`` on one new store whose clock reads
  :data:`CLOCK`, so ids, times and scores are the same on every run;
- ``json response``: what the request just before it answers, compared field by field —
  the same keys at every level, the same types, and the same values, floats to a
  relative 1e-9. A refused request answers the error body every door sends,
  ``{"error": {"code", "message"}}``. ``volatile=a,b`` names keys whose values depend
  on the machine (the token counts of ``compileContext``: tiktoken's when it is
  installed, holomem's estimate otherwise); their keys and types are still compared;
- ``json config``: the default ``MemoryConfig``, every field;
- ``json mcp-client``: an MCP client's entry for holomem (a ``holomem`` command line, or
  the ``/mcp`` URL of ``holomem serve``).

A bare ``json`` block is refused, so no example escapes the tests. The requests inside a
``curl`` command of a ``sh`` block run too (in page order), and must succeed.

The lists checked against the code (:func:`lists`) are found by the words around them;
a list that is rewritten must keep them, or the test says which one it lost.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from holomem import ManualClock, Memory, Store
from holomem.api.doors.cli.parser import build_parser
from holomem.api.doors.http.memoryroute import READ_OPS, WRITE_OPS
from holomem.api.doors.mcp import server
from holomem.api.doors.mcp.tools import TOOLS
from holomem.api.memory import contract
from holomem.api.memory.config import MemoryConfig
from holomem.errors import HolomemError
from tests.test_docs import ROOT, pages, read

#: The clock of every page's store: 2025-06-01T00:00:00Z.
CLOCK = 1_748_736_000_000

#: A fenced JSON block: its indent, the words after ``json`` and its text.
JSON_BLOCK = re.compile(r"^( *)```json([^\n]*)\n(.*?)^\1```", re.S | re.M)
SH_BLOCK = re.compile(r"^( *)```sh\n(.*?)^\1```", re.S | re.M)
#: A memory route in a curl command and the body it sends (up to the next command).
CURL = re.compile(r"/api/v1/memory/(\w+)(?:(?!\ncurl).)*?-d '([^']*)'", re.S)


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    offset: int
    kind: str  # an op, "response", "config", "mcp-client", or "" (untagged)
    volatile: frozenset[str]
    text: str

    @property
    def where(self) -> str:
        line = read(os.path.join(ROOT, self.page))[:self.offset].count("\n") + 1
        return f"{self.page}:{line}"

    def value(self) -> Any:
        return json.loads(self.text)


@dataclass(frozen=True)
class Step:
    """A request of a page, and the response block shown for it (None: not shown)."""

    request: Block
    response: Block | None


def json_blocks(path: str) -> list[Block]:
    page = os.path.relpath(path, ROOT)
    found = []
    for m in JSON_BLOCK.finditer(read(path)):
        kind, *options = m.group(2).split() or [""]
        keys = frozenset(k for o in options if o.startswith("volatile=")
                         for k in o.removeprefix("volatile=").split(",") if k)
        found.append(Block(page, m.start(), kind, keys, m.group(3)))
    return found


def curl_requests(path: str) -> list[Block]:
    """The memory requests of the page's curl commands, as request blocks."""
    page = os.path.relpath(path, ROOT)
    return [Block(page, sh.start() + m.start(), m.group(1), frozenset(), m.group(2))
            for sh in SH_BLOCK.finditer(read(path)) for m in CURL.finditer(sh.group(2))]


def steps(path: str) -> list[Step]:
    """The page's requests in page order, each with the response block after it."""
    blocks = json_blocks(path)
    shown = [Step(b, after if after is not None and after.kind == "response" else None)
             for b, after in zip(blocks, [*blocks[1:], None], strict=False)
             if b.kind in contract.OPS]
    shown += [Step(b, None) for b in curl_requests(path)]
    return sorted(shown, key=lambda s: s.request.offset)


def requests(page: str = "README.md") -> list[tuple[str, dict[str, Any]]]:
    """(op, request) of every JSON request example of ``page``, in page order."""
    return [(b.kind, b.value()) for b in json_blocks(os.path.join(ROOT, page))
            if b.kind in contract.OPS]


def answer(memory: Memory, op: str, request: dict[str, Any]) -> dict[str, Any]:
    """What every door answers: the response, or the error body."""
    try:
        return memory.call(op, request)
    except HolomemError as exc:
        return {"error": {"code": exc.code, "message": exc.message}}


def differences(shown: Any, got: Any, volatile: frozenset[str] = frozenset(),
                path: str = "$", exact: bool = True) -> list[str]:
    """Where ``got`` differs from ``shown``: keys at every level and types everywhere;
    values too while ``exact`` (not under a volatile key)."""
    if type(shown) is not type(got):
        return [f"{path}: shows {type(shown).__name__} {shown!r}, "
                f"answers {type(got).__name__} {got!r}"]
    if isinstance(shown, dict):
        out = [f"{path}.{k}: shown, not answered" for k in shown if k not in got]
        out += [f"{path}.{k}: answered ({got[k]!r}), not shown" for k in got if k not in shown]
        for k in shown.keys() & got.keys():
            out += differences(shown[k], got[k], volatile, f"{path}.{k}",
                               exact and k not in volatile)
        return out
    if isinstance(shown, list):
        out = [] if len(shown) == len(got) or not exact else [
            f"{path}: shows {len(shown)} items, answers {len(got)}: {got!r}"]
        for i, (a, b) in enumerate(zip(shown, got, strict=False)):
            out += differences(a, b, volatile, f"{path}[{i}]", exact)
        return out
    if not exact:
        return []
    same = math.isclose(shown, got, rel_tol=1e-9) if isinstance(shown, float) else shown == got
    return [] if same else [f"{path}: shows {shown!r}, answers {got!r}"]


# -- the examples ---------------------------------------------------------------------------
def test_every_json_block_of_the_docs_says_what_it_is() -> None:
    bad = []
    for path in pages():
        blocks = json_blocks(path)
        for i, b in enumerate(blocks):
            before = blocks[i - 1].kind if i else ""
            if b.kind not in {*contract.OPS, "response", "config", "mcp-client"}:
                bad.append(f"{b.where}: ```json {b.kind!r} is no kind of example")
            elif b.kind == "response" and before not in contract.OPS:
                bad.append(f"{b.where}: a response after no request")
            elif b.kind in contract.OPS and (i + 1 == len(blocks)
                                             or blocks[i + 1].kind != "response"):
                bad.append(f"{b.where}: a {b.kind} request without its response")
            if b.volatile and b.kind != "response":
                bad.append(f"{b.where}: only a response has volatile keys")
            try:
                b.value()
            except ValueError as exc:
                bad.append(f"{b.where}: not JSON: {exc}")
    assert bad == []


def test_every_request_in_the_docs_answers_what_its_page_shows(tmp_path: Path) -> None:
    bad, ran = [], 0
    for path in pages():
        page = steps(path)
        if not page:
            continue
        with Store.open(tmp_path / os.path.basename(path)) as store:
            memory = Memory(store, clock=ManualClock(CLOCK))
            for step in page:
                got = answer(memory, step.request.kind, step.request.value())
                ran += 1
                if step.response is None:  # a curl command's: it must succeed
                    if "error" in got:
                        bad.append(f"{step.request.where}: {got}")
                    continue
                diff = differences(step.response.value(), got, step.response.volatile)
                bad += [f"{step.response.where} ({step.request.kind}): {d}" for d in diff]
    assert bad == []
    assert ran >= len(contract.OPS)


def test_the_readme_shows_every_op_by_example() -> None:
    assert {op for op, _ in requests()} == set(contract.OPS)


def test_the_configuration_shown_is_the_default_one_with_every_field() -> None:
    shown = [b for path in pages() for b in json_blocks(path) if b.kind == "config"]
    assert shown
    default = contract.encode(MemoryConfig())
    for b in shown:
        assert differences(b.value(), default) == [], b.where


def test_the_mcp_client_entries_start_a_real_command_or_reach_mcp() -> None:
    shown = [b for path in pages() for b in json_blocks(path) if b.kind == "mcp-client"]
    assert len(shown) >= 2
    for b in shown:
        (entry,) = b.value()["mcpServers"].values()
        if "command" in entry:
            assert entry["command"] == "holomem", b.where
            assert build_parser().parse_args(entry["args"]).command == "mcp", b.where
        else:
            assert entry["type"] == "http" and entry["url"].endswith("/mcp"), b.where
            assert set(entry["headers"]) <= {"Authorization", "X-API-Key", "X-Tenant-ID",
                                             "X-Holomem-Namespace"}, b.where


def test_a_drifted_example_is_found() -> None:
    """The comparison itself: the README's compileContext answer as it once was
    (``usedTokens``; a decision's ``kind``) differs from what the op answers."""
    got = {"text": "...", "tokens": 112, "budgetTokens": 200, "counter": "estimate",
           "decisions": [{"id": "tea-1", "source": "fact", "tokens": 28}]}
    old = {"text": "...", "usedTokens": 112, "budgetTokens": 200,
           "decisions": [{"id": "tea-1", "kind": "fact", "tokens": 28}]}
    assert sorted(differences(old, got)) == [
        "$.counter: answered ('estimate'), not shown",
        "$.decisions[0].kind: shown, not answered",
        "$.decisions[0].source: answered ('fact'), not shown",
        "$.tokens: answered (112), not shown",
        "$.usedTokens: shown, not answered"]
    assert differences({"n": 1}, {"n": 1.0}) == ["$.n: shows int 1, answers float 1.0"]
    assert differences({"n": 1, "a": [1]}, {"n": 2, "a": [1, 2]}, frozenset({"n", "a"})) == []
    assert differences({"s": 0.5}, {"s": 0.5 + 1e-12}) == []


# -- the lists of ops and tools ------------------------------------------------------------
def _json_tools() -> set[str]:
    """The MCP tools whose answer is the contract's JSON response as it is."""
    out = set()
    for name in TOOLS:
        try:
            if server.render(name, {"x": 1}) == ['{"x": 1}']:
                out.add(name)
        except (KeyError, msgspec.ValidationError):  # it reads its own response's fields
            pass
    return out


#: A list that begins a bullet (and may go on over its indented lines).
BULLET = r"\n- (?P<names>(?:[^\n]|\n  )*?)"


def lists() -> list[tuple[str, str, set[str]]]:
    """(page, the words around a list, with the list as group ``names``, the names the
    code has). The names are the backquoted identifiers in the group; a table's are
    those of its first column."""
    return [
        ("README.md", r"Ops: (?P<names>.*?)\.\s", set(contract.OPS)),
        ("docs/contract.md", r"### §5a Ops\n\n(?P<names>(?:\|[^\n]*\n)+)", set(contract.OPS)),
        ("docs/http.md", r"`\{op\}` is any op of \[[^]]*\]\([^)]*\): (?P<names>.*?);",
         set(contract.OPS)),
        ("docs/http.md", r"The writes are (?P<names>.*?)\.\s", set(WRITE_OPS)),
        ("docs/http.md", r"A read of a tenant that has no store — (?P<names>.*?) —", set(READ_OPS)),
        ("README.md", r"\*\*The tools\*\*: (?P<names>.*?)\.\s", set(TOOLS)),
        ("README.md", rf"{BULLET} carry stored text", set(TOOLS) - _json_tools()),
        ("README.md", rf"{BULLET} return the contract's JSON response", _json_tools()),
        ("docs/http.md", r"The tools are\s+those of `holomem mcp`: (?P<names>.*?)\.\s", set(TOOLS)),
        ("holomem/api/doors/mcp/server.py", r"\nTools: (?P<names>.*?)\. ", set(TOOLS)),
    ]


def listed(text: str) -> set[str]:
    if text.startswith("|"):  # a table: its first column
        text = "\n".join(row.split("|")[1] for row in text.splitlines()[2:])
    return set(re.findall(r"`+([A-Za-z_]\w*)`+", text))


def mismatch(page: str, around: str, names: set[str]) -> str | None:
    """What is wrong with the one list of ``page`` that ``around`` finds (None: nothing)."""
    found = list(re.finditer(around, read(os.path.join(ROOT, page)), re.S))
    if len(found) != 1:
        return f"{page}: {len(found)} places match {around!r}"
    have = listed(found[0].group("names"))
    if have == names:
        return None
    return (f"{page}, {around!r}: misses {sorted(names - have)}, "
            f"has extra {sorted(have - names)}")


def test_every_list_of_ops_and_tools_in_the_docs_is_the_codes() -> None:
    assert [m for m in (mismatch(*spec) for spec in lists()) if m] == []
    assert listed("`a`, ``b`` and `c d`") == {"a", "b"}
    assert listed("| op |\n|---|\n| `a`, `b` | `c` |\n") == {"a", "b"}


def test_the_hermes_tools_the_readme_lists_are_the_providers() -> None:
    pytest.importorskip("hermes_cli", reason="hermes-agent is not installed")
    from holomem.integrations.hermes import HERMES_TOOLS

    assert mismatch("README.md", r"\*\*Tools\*\* for the model: (?P<names>.*?) \(",
                    set(HERMES_TOOLS)) is None


def test_the_mcp_sdk_functions_the_docs_name_exist() -> None:
    """(docs/http.md once named ``streamablehttp_client``, which mcp 2.3 does not have.)"""
    named = [m for path in pages()
             for m in re.finditer(r"`(\w+)`\s+\(from\s+`(mcp[\w.]*)`\)", read(path))]
    assert named
    for m in named:
        assert hasattr(importlib.import_module(m.group(2)), m.group(1)), m.group(0)
