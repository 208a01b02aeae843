"""Every memory command of the CLI does what the contract does, in namespaces, in text,
``--json`` and ``--jsonl``; the configuration options go by one name (``--config``),
the old ``--memory-config`` still working and saying it is deprecated.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.run import holomem, holomem_all, jsonl


def test_remember_recall_explain_get_history_and_namespaces(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    config = tmp_path / "latest.json"
    config.write_text(json.dumps({"supersession": "latest-by-subject"}))
    first = holomem("remember", store, "--text", "Ann lives in Oslo", "--subject", "ann.city",
                    "--namespace", "users/ann", "--id", "a1", "--config", str(config),
                    "--event-time", "2024-05-01T09:30Z", "--metadata", '{"src": "chat"}')
    assert first.returncode == 0 and first.stdout == "stored a1\n", first.stderr
    bob = holomem("remember", store, "--text", "Bob lives in Rome", "--namespace",
                  '["users", "b/ob"]', "--id", "b1", "--json")
    assert bob.returncode == 0, bob.stderr
    assert json.loads(bob.stdout)["remembered"][0]["id"] == "b1"
    # Supersession by the stored configuration (no --config given now).
    second = holomem("remember", store, "--text", "Ann lives in Rome", "--subject", "ann.city",
                     "--namespace", "users/ann", "--id", "a2")
    assert second.stdout == "stored a2, supersedes a1\n", second.stderr

    (recall_ann, recall_all, recall_lines, explain, explain_outside, get, history,
     history_lines, spaces, spaces_json) = holomem_all([
        ["recall", store, "lives", "--namespace", "users/ann", "--json"],
        ["recall", store, "lives", "--history", "all", "--json"],
        ["recall", store, "Rome", "--jsonl"],
        ["explain", store, "Oslo", "a1", "--history", "all", "--namespace", "users"],
        ["explain", store, "Rome", "b1", "--namespace", "users/ann"],
        ["get", store, "a1", "--json"],
        ["history", store, "a2"],
        ["history", store, "a2", "--jsonl"],
        ["list-namespaces", store],
        ["list-namespaces", store, "--max-depth", "1", "--json"],
    ])
    assert [r["id"] for r in json.loads(recall_ann.stdout)["results"]] == ["a2"]
    assert {r["id"] for r in json.loads(recall_all.stdout)["results"]} == {"a1", "a2", "b1"}
    lines = jsonl(recall_lines.stdout)
    assert {r["id"] for r in lines} == {"a2", "b1"} and all("score" in r for r in lines)
    assert explain.returncode == 0 and "a1:" in explain.stdout and "superseded" in explain.stdout
    # Outside the namespace asked about, a fact is as unknown as a missing one.
    assert explain_outside.returncode == 1 and "not_found" in explain_outside.stderr
    fact = json.loads(get.stdout)["fact"]
    assert (fact["namespace"], fact["metadata"], fact["status"]) == (
        ["users", "ann"], {"src": "chat"}, "superseded")
    assert fact["eventTime"] == 1714555800000  # 2024-05-01T09:30Z
    assert history.stdout.splitlines()[0].startswith("a1 {users/ann} [ann.city] (superseded")
    assert [f["id"] for f in jsonl(history_lines.stdout)] == ["a1", "a2"]
    assert spaces.stdout.splitlines() == ["users/ann  2", "users/b\\/ob  1"]
    assert json.loads(spaces_json.stdout)["namespaces"] == [
        {"namespace": ["users"], "facts": 3}]


def test_info_config_export_import_and_the_deprecated_config_name(tmp_path: Path) -> None:
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    config = tmp_path / "latest.json"
    config.write_text(json.dumps({"supersession": "latest-by-subject"}))
    old = holomem("remember", src, "--text", "Ann lives in Oslo", "--subject", "ann.city",
                  "--memory-config", str(config))
    assert old.returncode == 0, old.stderr
    assert "--memory-config is deprecated; use --config" in old.stderr
    shown, info, exported = holomem_all([["config", src], ["info", src, "--json"],
                                         ["export", src, "-o", str(tmp_path / "out.jsonl")]])
    assert json.loads(shown.stdout)["supersession"] == "latest-by-subject"
    assert json.loads(info.stdout)["facts"] == 1
    assert exported.returncode == 0, exported.stderr
    loaded = holomem("import", dst, str(tmp_path / "out.jsonl"), "--config", str(config))
    assert loaded.returncode == 0 and json.loads(loaded.stdout)["imported"] == 1, loaded.stderr
    listed = holomem("list", dst, "--jsonl")
    assert [f["text"] for f in jsonl(listed.stdout)] == ["Ann lives in Oslo"]
