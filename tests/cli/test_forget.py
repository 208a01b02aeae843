"""``holomem forget``: every scope of the memory API, ``--within`` and ``--include-chain``
select what the library selects; a dry run removes nothing; a real forget asks first
(after showing what will go) unless ``--yes``, and refuses without asking when stdin is
not a terminal; with ``--purge`` the text is in no file of the store.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from tests.cli.run import ROOT, holomem, holomem_all, make_store
from tests.purge import markers

MARKER = "zq-marker-7d41c9"


def facts() -> list[dict[str, object]]:
    return [
        {"id": "a", "text": "Ann lives in Oslo", "subject": "ann.city", "entities": ["Ann"],
         "namespace": ["users", "ann"], "eventTime": 1000, "metadata": {"src": "chat"}},
        {"id": "a2", "text": "Ann lives in Rome", "subject": "ann.city", "supersedes": ["a"],
         "namespace": ["users", "ann"], "eventTime": 5000, "metadata": {"src": "mail"}},
        {"id": "b", "text": "Bob likes tea", "subject": "bob.drink", "entities": ["Bob"],
         "namespace": ["users", "bob"], "metadata": {"src": "chat"}},
        {"id": "c", "text": "The office is in Lyon", "entities": ["Ann", "Bob"]},
    ]


def removed(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["dryRun"] is True and report["purged"] is False
    return sorted(report["removed"])


def test_every_scope_in_a_dry_run_selects_what_the_memory_api_selects(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    make_store(tmp_path / "s", facts())
    cases = {
        ("--id", "a", "b", "--id", "nobody"): ["a", "b"],
        ("--subject", "ann.city"): ["a", "a2"],
        ("--entity", "Ann"): ["a", "c"],
        ("--entity", "Ann", "--within", "users"): ["a"],
        ("--entity", "Bob", "--within", '["users"]', "--include-chain"): ["b"],
        ("--id", "a", "--include-chain"): ["a", "a2"],
        ("--event-before", "2000"): ["a"],
        ("--event-before", "1970-01-01T00:00:06Z"): ["a", "a2"],
        ("--ingested-before", "1970-01-02"): [],
        ("--ingested-before", "2999-01-01T00:00+01:00"): ["a", "a2", "b", "c"],
        ("--metadata", '{"src": "chat"}'): ["a", "b"],
        ("--namespace", "users/ann"): ["a", "a2"],
        ("--namespace", ""): ["a", "a2", "b", "c"],
        ("--namespace", "", "--within", "users/bob"): ["b"],
    }
    results = holomem_all(["forget", store, *args, "--dry-run", "--json"] for args in cases)
    for (args, want), done in zip(cases.items(), results, strict=True):
        assert removed(done) == want, args
    # Removing the latest version re-links nothing; the middle of a chain would.
    text = holomem("forget", store, "--subject", "ann.city", "--dry-run")
    assert text.stdout.splitlines() == ["would forget 2 facts", "  a", "  a2"]
    listed = holomem("list", store, "--json")
    assert len(json.loads(listed.stdout)["facts"]) == 4  # nothing was removed


def test_forget_refuses_without_yes_when_stdin_is_no_terminal_and_purges_with_yes(
        tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    done = holomem("remember", store, "--text", f"the door code is {MARKER}", "--id", "m",
                   "--subject", "door", "--metadata", json.dumps({"note": MARKER}))
    assert done.returncode == 0, done.stderr
    assert holomem("remember", store, "--text", "the sky is blue", "--id", "k").returncode == 0
    refused, piped, dry = holomem_all([
        ["forget", store, "--subject", "door", "--purge"],
        ["forget", store, "--subject", "door", "--purge", "--json"],
        ["forget", store, "--subject", "door", "--purge", "--dry-run", "--json"],
    ])
    for no in (refused, piped):
        assert no.returncode == 2 and "--yes" in no.stderr and no.stdout == ""
    assert json.loads(dry.stdout) == {"removed": ["m"], "relinked": [], "dryRun": True,
                                      "purged": False, "unlinked": 0}
    assert markers.files_with(store, MARKER.encode()), "the scan must see the marker first"
    assert holomem("get", store, "m").returncode == 0  # still there

    gone = holomem("forget", store, "--subject", "door", "--purge", "--yes", "--json")
    assert json.loads(gone.stdout) == {"removed": ["m"], "relinked": [], "dryRun": False,
                                       "purged": True, "unlinked": 0}, gone.stderr
    assert markers.files_with(store, MARKER.encode()) == {}
    get, kept, again = holomem_all([["get", store, "m"], ["list", store, "--jsonl"],
                                    ["forget", store, "--id", "m", "-y"]])
    assert get.returncode == 1 and "not_found" in get.stderr
    assert [json.loads(line)["id"] for line in kept.stdout.splitlines()] == ["k"]
    assert again.returncode == 0 and again.stdout.startswith("forgot 0 facts")  # idempotent


def forget_on_a_terminal(store: str, answer: bytes, *args: str) -> tuple[int, str, str]:
    """Run forget with a pseudo-terminal as stdin, answering its question with ``answer``."""
    controller, terminal = pty.openpty()
    try:
        child = subprocess.Popen([sys.executable, "-m", "holomem", "forget", store, *args],
                                 cwd=ROOT, stdin=terminal, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        os.close(terminal)
        os.write(controller, answer)  # waits in the terminal's queue until it is read
        out, err = child.communicate(timeout=120)
    finally:
        os.close(controller)
    return child.returncode, out, err


def test_on_a_terminal_forget_shows_what_goes_then_asks(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    make_store(tmp_path / "s", facts())
    status, out, err = forget_on_a_terminal(store, b"n\n", "--subject", "ann.city")
    assert status == 1 and out == "" and "declined: nothing was forgotten" in err
    assert "would forget 2 facts:" in err and "Ann lives in Oslo" in err
    assert "forget 2 facts? [y/N]" in err
    status, out, err = forget_on_a_terminal(store, b"yes\n", "--id", "a2", "--purge")
    assert status == 0, err
    assert "then purge" in err and "forget 1 fact and purge? [y/N]" in err
    assert out.splitlines()[:2] == ["forgot 1 fact; purged: no file of the store keeps "
                                    "their text", "  a2"]
    listed = holomem("list", store, "--jsonl")
    assert [json.loads(line)["id"] for line in listed.stdout.splitlines()] == ["a", "b", "c"]
