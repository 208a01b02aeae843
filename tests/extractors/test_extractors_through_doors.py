"""A built-in extractor named through the doors (docs/contract.md §4g, "Extractors"):
``"rules"`` is a name a request may carry — the Python client over HTTP and the CLI's
``--extractor rules`` store the same facts as the library — while code never crosses:
a callable is refused by the client, an unknown name by every door, and nothing is
written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from holomem import InvalidError, Memory, Store
from holomem.client import Client

from ..cli.run import holomem
from ..serve.conftest import API_KEY, start

CHAT = [{"role": "user", "content": "I moved to Lisbon and I love surfing.", "time": 1_000},
        {"role": "assistant", "content": "Great choice!"}]


def test_the_client_over_http_names_the_rules_and_never_sends_code(tmp_path: Path) -> None:
    srv = start(tmp_path / "data")
    client = Client(srv.url, api_key=API_KEY, tenant="t1")
    try:
        remote = client.memory
        done = remote.remember_conversation(CHAT, session="s1", extractor="rules")
        facts = [remote.get(d.id) for d in done.derived]
        assert [(f.text, f.subject) for f in facts if f] == [
            ("user lives in Lisbon", "user/city"),
            ("user loves surfing", "user/preference/surfing")]
        links = remote.links(done.derived[0].id, relation="derived_from").links
        assert [x.to_id for x in links] == [done.turns[0].id]
        with pytest.raises(InvalidError, match="Python code"):
            remote.remember_conversation(CHAT, session="s2", extractor=lambda turns: [])
        with pytest.raises(InvalidError, match="unknown extractor"):
            remote.remember_conversation(CHAT, session="s2", extractor="chat")
        assert remote.list(None, 100, {"session": "s2"}).facts == []
    finally:
        client.close()
        srv.stop()


def test_the_cli_takes_extractor_rules(tmp_path: Path) -> None:
    store, lines = tmp_path / "store", tmp_path / "chat.jsonl"
    lines.write_text("\n".join(json.dumps(m) for m in CHAT) + "\n")
    done = holomem("remember-conversation", str(store), str(lines), "--session", "s1",
                   "--extractor", "rules")
    assert done.returncode == 0, done.stderr
    assert sum(line.startswith("extracted ") for line in done.stdout.splitlines()) == 2
    bad = holomem("remember-conversation", str(store), str(lines), "--session", "s2",
                  "--extractor", "os.system")
    assert bad.returncode != 0 and "unknown extractor" in bad.stderr
    with Store.open(store) as opened:
        memory = Memory(opened)
        assert sorted(f.subject or "" for f in memory.list(None, 100).facts) == [
            "", "", "user/city", "user/preference/surfing"]
