"""Every command exits as docs/cli.md says: 1 not found (``get`` included) or refused
(a conflict), 2 bad usage, input or configuration, 3 the store cannot be opened — with
``error: ...`` on stderr, nothing on stdout, and no traceback. A store that is missing
stays missing, and a read works while another process holds the writer lock.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import chromadb

from holomem import Memory, Store
from tests.cli.run import holomem_all, make_store


def check(cases: Sequence[Sequence[str]], status: int) -> None:
    for args, done in zip(cases, holomem_all(cases), strict=True):
        assert done.returncode == status, (args, done.returncode, done.stderr)
        assert done.stdout == "", (args, done.stdout)
        assert "error: " in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)


def test_not_found_and_refused_exit_1(tmp_path: Path) -> None:
    s = str(tmp_path / "s")
    make_store(tmp_path / "s", [{"id": "a", "text": "Ann lives in Oslo"}])
    clash = tmp_path / "clash.jsonl"
    with Store.open(s, read_only=True) as store:
        record = next(Memory(store).export())
    clash.write_text(json.dumps({**record, "text": "Ann lives in Rome", "digest": None}) + "\n")
    check([["get", s, "nope"], ["get", s, "nope", "--json"], ["history", s, "nope"],
           ["explain", s, "Oslo", "nope"], ["remember", s, "--id", "a", "--text", "other"],
           ["import", s, str(clash)]], 1)


def test_bad_usage_input_or_configuration_exit_2(tmp_path: Path) -> None:
    s = str(tmp_path / "s")
    make_store(tmp_path / "s", [{"id": "a", "text": "Ann lives in Oslo"}])
    bad = tmp_path / "bad.json"
    bad.write_text('{"recency": {"exponential": {"halfLifeMs": -5}}}')
    other = tmp_path / "other.json"
    other.write_text('{"supersession": "latest-by-subject"}')
    malformed = tmp_path / "malformed.jsonl"
    malformed.write_text('{"id": "q"}\n')
    missing = str(tmp_path / "missing")
    check([
        ["recall", s, "Oslo", "--as-of", "yesterday"],
        ["recall", s, "Oslo", "--k", "0"],
        ["recall", s, "Oslo", "--namespace", '["unclosed'],
        ["recall", s, "Oslo", "--config", str(other)],  # not the store's configuration
        ["remember", s, "--text", "x", "--metadata", "{"],
        ["remember", s, "--text", "   "],
        ["remember", s, "--text", "x", "--config", str(bad)],
        ["remember", s, "--text", "x", "--valid-from", "2025-13-01"],
        ["get", s, ""],
        ["list", s, "--cursor", "not-a-cursor"],
        ["list", s, "--limit", "0"],
        ["list-namespaces", s, "--max-depth", "-1"],
        ["info", s, "--key-file", missing],
        ["forget", s, "--subject", "x"],  # stdin is no terminal and no --yes
        ["forget", s],  # no scope
        ["forget", s, "--subject", "x", "--entity", "y", "--dry-run"],  # two scopes
        ["import", s, missing],
        ["import", s, str(malformed)],
        ["export", s, "-o", os.path.join(missing, "out.jsonl")],
        ["config", s, "--set", str(bad)],
        ["no-such-command"],
    ], 2)


def test_a_store_that_cannot_be_opened_exits_3(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    cases: list[list[str]] = [
        ["recall", missing, "q"], ["explain", missing, "q", "id"], ["get", missing, "id"],
        ["history", missing, "id"], ["list", missing], ["list-namespaces", missing],
        ["info", missing], ["config", missing], ["export", missing],
        ["forget", missing, "--id", "x", "--dry-run"], ["forget", missing, "--id", "x", "-y"]]
    key, wrong = tmp_path / "key", tmp_path / "wrong"
    key.write_bytes(os.urandom(32))
    wrong.write_bytes(os.urandom(32))
    secret = str(tmp_path / "secret")
    with Store.open(secret, key=key.read_bytes()):
        pass
    cases += [["info", secret], ["list", secret, "--key-file", str(wrong)]]
    held = str(tmp_path / "held")
    records = tmp_path / "records.jsonl"
    records.write_text("")
    config = tmp_path / "config.json"
    config.write_text("{}")
    with Store.open(held) as writer:  # another process's writer, as far as the CLI knows
        Memory(writer).remember("Ann lives in Oslo", id="a")
        cases += [["remember", held, "--text", "x"], ["forget", held, "--id", "a", "-y"],
                  ["import", held, str(records)], ["config", held, "--set", str(config)],
                  ["info", held, "--key-file", str(key)]]
        check(cases, 3)
        reads = holomem_all([["list", held, "--jsonl"], ["forget", held, "--id", "a",
                                                          "--dry-run", "--json"]])
    assert [r.returncode for r in reads] == [0, 0], [r.stderr for r in reads]
    assert json.loads(reads[1].stdout)["removed"] == ["a"]
    assert not os.path.exists(missing)


def test_json_nested_past_the_limit_on_the_command_line_or_in_a_file_is_bad_input_exit_2(
        tmp_path: Path) -> None:
    # Deep enough to exhaust a JSON decoder's recursion, short enough for one argument.
    s = str(tmp_path / "s")
    make_store(tmp_path / "s", [{"id": "a", "text": "Ann lives in Oslo"}])
    deep_array, deep_object = "[" * 50_000, '{"a":' * 20_000
    lines = tmp_path / "deep.jsonl"
    lines.write_text('{"speaker": "ann", "text": "hi"}\n' + deep_array + "\n")
    config = tmp_path / "mem0.json"
    config.write_text('{"a":' * 100_000)
    check([
        ["recall", s, "Oslo", "--namespace", deep_array],
        ["list", s, "--namespace", deep_array],
        ["remember", s, "--text", "x", "--metadata", deep_object],
        ["list", s, "--filter", deep_object],
        ["remember-conversation", s, str(lines), "--session", "c"],
        ["migrate", "mem0", s, "--mem0-config", str(config), "--user-id", "u"],
    ], 2)
    with Store.open(s, read_only=True) as store:
        assert [f.id for f in Memory(store).list().facts] == ["a"]  # nothing written


def test_an_export_or_import_path_that_is_no_file_is_usage_and_touches_nothing(
        tmp_path: Path) -> None:
    """An --output that is a directory, or whose temp file (``PATH.tmp``, written first)
    is a file of the caller's, and an import FILE that is a directory, exit 2: nothing
    is written, no export copy is left beside the output, the caller's file is kept,
    and no store is created."""
    s = str(tmp_path / "s")
    make_store(tmp_path / "s", [{"id": "a", "text": "a secret fact"}])
    folder = tmp_path / "folder"
    folder.mkdir()
    mine = tmp_path / "out.jsonl.tmp"
    mine.write_text("my own notes")
    new_store = str(tmp_path / "new")
    check([["export", s, "-o", str(folder)],
           ["export", s, "-o", str(tmp_path / "out.jsonl")],
           ["import", new_store, str(folder)]], 2)
    assert not (tmp_path / "folder.tmp").exists()
    assert mine.read_text() == "my own notes" and not (tmp_path / "out.jsonl").exists()
    assert not os.path.exists(new_store)


def test_an_import_or_migration_refused_for_its_options_creates_no_store(
        tmp_path: Path) -> None:
    """A batch size or namespace the library refuses exits 2 before the store is
    opened: no empty store is left behind (import and migrate create one otherwise)."""
    lines = tmp_path / "one.jsonl"
    lines.write_text('{"id": "a", "text": "hi", "ingestTime": 5}\n')
    peer = tmp_path / "chroma"
    chromadb.PersistentClient(path=str(peer)).create_collection("notes").add(
        ids=["n1"], documents=["Ann likes tea"], embeddings=[[1.0, 0.0]])
    new = [str(tmp_path / f"new{i}") for i in range(3)]
    check([["import", new[0], str(lines), "--batch-size", "0"],
           ["migrate", "chroma", str(peer), new[1], "--collection", "notes", "--batch-size", "0"],
           ["migrate", "chroma", str(peer), new[2], "--collection", "notes",
            "--namespace", "a/b/c/d/e/f/g/h/i"]], 2)
    assert not any(os.path.exists(s) for s in new)
