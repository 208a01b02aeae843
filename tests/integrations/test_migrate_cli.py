"""``holomem migrate`` end to end (issue 32, item 2; docs/cli.md, docs/migrate.md): the
real command line in a child process for a LangGraph SQLite store and Chroma, and in
this process for Mem0 (whose offline embedder is this test's); progress on stderr,
the report as JSON on stdout, a second run that creates nothing, and bad input that
fails with a clear message and leaves no store behind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from holomem.api.doors.cli.commands import main
from tests.cli.run import holomem
from tests.integrations.migrate_peers import mem0_config, mem0_module, new_mem0, tiny_vectors

sqlite = pytest.importorskip("langgraph.store.sqlite",
                             reason="langgraph-checkpoint-sqlite (the peers extra) is not "
                             "installed")
chromadb = pytest.importorskip("chromadb", reason="chromadb (the peers extra) is not "
                               "installed")


def test_langgraph_sqlite_moves_every_item_once_with_progress_on_stderr(
        tmp_path: Path) -> None:
    db = tmp_path / "graph.sqlite"
    with sqlite.SqliteStore.from_conn_string(str(db)) as peer:
        peer.setup()
        peer.put(("users", "ann"), "home", {"text": "Ann lives on a canal barge"})
        peer.put(("users", "bo"), "home", {"text": "Bo lives above a bakery"})
    store = tmp_path / "store"
    first = holomem("migrate", "langgraph-sqlite", str(db), str(store),
                    "--progress-every", "0")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert (report["source"], report["created"], report["unchanged"]) == ("langgraph", 2, 0)
    assert "migrate langgraph-sqlite: 2 facts" in first.stderr  # a progress line
    assert "2 created, 0 already there" in first.stderr
    second = holomem("migrate", "langgraph-sqlite", str(db), str(store), "--json")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["created"] == 0
    found = holomem("recall", str(store), "canal barge", "--namespace", "users/ann", "--json")
    assert [r["fact"]["subject"] for r in json.loads(found.stdout)["results"]] == ["home"]
    missing = holomem("migrate", "langgraph-sqlite", str(tmp_path / "nope.sqlite"),
                      str(tmp_path / "other"))
    assert missing.returncode == 2 and "nope.sqlite: no such file" in missing.stderr
    assert not (tmp_path / "other").exists() and not (tmp_path / "nope.sqlite").exists()


def test_chroma_moves_collections_and_refuses_a_missing_one_writing_nothing(
        tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    col = chromadb.PersistentClient(path=str(path)).get_or_create_collection(
        "notes", embedding_function=None)
    docs = ["The boiler is serviced every October", "The spare key is under the fern"]
    col.add(ids=["n1", "n2"], documents=docs,
            embeddings=[list(map(float, v)) for v in tiny_vectors(docs)])
    store = tmp_path / "store"
    missing = holomem("migrate", "chroma", str(path), str(store), "--collection", "notes",
                      "--collection", "diary")
    assert missing.returncode == 1
    assert "no collection 'diary' (it has: notes)" in missing.stderr
    assert not store.exists()
    nowhere = holomem("migrate", "chroma", str(tmp_path / "nowhere"), str(store),
                      "--collection", "notes")
    assert nowhere.returncode == 2 and "no such directory" in nowhere.stderr
    assert not store.exists() and not (tmp_path / "nowhere").exists()
    done = holomem("migrate", "chroma", str(path), str(store), "--collection", "notes",
                   "--namespace", "house", "--vectors", "drop")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["created"], report["vectors"]) == (2, "dropped")
    assert report["namespaces"] == [{"namespace": ["house", "notes"], "facts": 2}]
    found = holomem("recall", str(store), "spare key", "--namespace", "house", "--json")
    assert json.loads(found.stdout)["results"][0]["text"] == docs[1]


def test_mem0_moves_a_users_memories_with_their_history(
        offline_mem0: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    peer = new_mem0(offline_mem0, tmp_path / "mem0")
    mid = peer.add("Ann waters the orchids on Fridays", user_id="ann",
                   infer=False)["results"][0]["id"]
    peer.update(mid, "Ann waters the orchids on Mondays")
    config = tmp_path / "mem0.json"
    config.write_text(json.dumps(mem0_config(tmp_path / "mem0")))
    store = tmp_path / "store"
    args = ["migrate", "mem0", str(store), "--mem0-config", str(config), "--user-id", "ann"]
    assert main(args) == 0
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert (report["created"], report["superseded"], report["vectors"]) == (2, 1, "dropped")
    assert "the memory has no embedder" in report["vectorsNote"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["created"] == 0
    assert main(["history", str(store), _current(store), "--json"]) == 0
    history = json.loads(capsys.readouterr().out)["history"]
    assert [(h["text"], h["status"]) for h in history] == [
        ("Ann waters the orchids on Fridays", "superseded"),
        ("Ann waters the orchids on Mondays", "current")]


def _current(store: Path) -> str:
    from holomem import Memory, Store

    with Store.open(store, read_only=True) as s:
        return Memory(s).recall("orchids", namespace=["users", "ann"], k=1)[0].id


def test_mem0_bad_input_is_a_clear_error_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mem0_module()
    store = tmp_path / "store"
    config = tmp_path / "mem0.json"
    config.write_text(json.dumps(mem0_config(tmp_path / "absent")))
    assert main(["migrate", "mem0", str(store), "--mem0-config", str(config),
                 "--user-id", "ann"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["migrate", "mem0", str(store), "--mem0-config", str(config)]) == 2
    assert "--user-id, --agent-id or --run-id" in capsys.readouterr().err
    config.write_text("{not json")
    assert main(["migrate", "mem0", str(store), "--mem0-config", str(config),
                 "--user-id", "ann"]) == 2
    assert "not JSON" in capsys.readouterr().err
    assert not store.exists() and not (tmp_path / "absent").exists()


def test_mem0_a_config_mem0_cannot_build_is_a_usage_error_not_a_traceback(
        offline_mem0: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    new_mem0(offline_mem0, tmp_path / "mem0").add("Ann waters the orchids", user_id="ann",
                                                  infer=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    wanting = mem0_config(tmp_path / "mem0")
    wanting["embedder"] = {"provider": "openai", "config": {"model": "text-embedding-3-small"}}
    config = tmp_path / "mem0.json"
    config.write_text(json.dumps(wanting))
    store = tmp_path / "store"
    assert main(["migrate", "mem0", str(store), "--mem0-config", str(config),
                 "--user-id", "ann"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: invalid_request: Mem0 cannot build a memory") \
        and "Traceback" not in err
    assert not store.exists()
