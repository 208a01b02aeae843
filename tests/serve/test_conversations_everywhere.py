"""remember_conversation through every door: the Python client against a real HTTP
server, the MCP tool and the CLI's JSON Lines — the same turns, links and retries as
the library (tests/memory/test_conversations.py)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from holomem import InvalidError, Memory, Store
from holomem.client import Client

from ..cli.run import holomem
from .conftest import API_KEY, start
from .test_mcp import ok, serving

CHAT = [
    {"role": "user", "content": "How often do you work out together?", "time": 1_000},
    {"role": "assistant", "content": [{"type": "text", "text": "Three times a week."}]},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
]


def _replies(memory: Memory, ids: list[str]) -> list[str | None]:
    out: list[str | None] = []
    for fid in ids:
        links = memory.links(fid, relation="replies_to", direction="out").links
        out.append(links[0].to_id if links else None)
    return out


def test_the_client_over_http_stores_a_conversation_as_the_library_does(
        tmp_path: Path) -> None:
    srv = start(tmp_path / "data")
    client = Client(srv.url, api_key=API_KEY, tenant="t1")
    try:
        remote = client.memory
        done = remote.remember_conversation(CHAT, session="s1", namespace="users/u1",
                                            time=500)
        assert done.skipped == [2] and [t.created for t in done.turns] == [True, True]
        again = remote.remember_conversation(CHAT, session="s1", namespace="users/u1",
                                             time=500)
        assert [t.created for t in again.turns] == [False, False] and again.linked == 0
        question, answer = (remote.get(t.id) for t in done.turns)
        assert question is not None and answer is not None
        assert (answer.speaker, answer.session, answer.position, answer.event_time) == (
            "assistant", "s1", 1, 500)
        assert question.event_time == 1_000 and question.namespace == ["users", "u1"]
        assert [x.to_id for x in remote.links(answer.id).links] == [question.id]
        hits = remote.recall("week", {"filter": {"speaker": "assistant"}})
        assert [h.id for h in hits] == [answer.id]
        with pytest.raises(InvalidError, match="Python code"):
            remote.remember_conversation(CHAT, session="s1", extractor=lambda turns: [])
        with pytest.raises(InvalidError):
            remote.remember_conversation([{"role": "user"} | {"content": 3}], session="s1")
    finally:
        client.close()
        srv.stop()


def test_the_mcp_tool_stores_a_conversation(tmp_path: Path) -> None:
    with serving(tmp_path / "store") as s:
        args = {"messages": CHAT, "session": "s1"}
        (body,) = ok(s.call("remember_conversation", args))
        done = json.loads(body)
        assert done["skipped"] == [2] and done["linked"] == 1
        assert [t["created"] for t in done["turns"]] == [True, True]
        (body,) = ok(s.call("remember_conversation", args))
        assert [t["created"] for t in json.loads(body)["turns"]] == [False, False]
    with Store.open(tmp_path / "store") as store:
        memory = Memory(store)
        ids = [t["id"] for t in done["turns"]]
        assert _replies(memory, ids) == [None, ids[0]]


def test_the_cli_reads_json_lines_messages_from_a_file_or_stdin(tmp_path: Path) -> None:
    store, lines = tmp_path / "store", tmp_path / "chat.jsonl"
    lines.write_text("\n".join(json.dumps(m) for m in CHAT) + "\n\n")
    first = holomem("remember-conversation", str(store), str(lines), "--session", "s1",
                    "--json")
    assert first.returncode == 0, first.stderr
    done = json.loads(first.stdout)
    assert [t["created"] for t in done["turns"]] == [True, True] and done["skipped"] == [2]
    again = holomem("remember-conversation", str(store), "-", "--session", "s1",
                    stdin=lines.read_text())
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[:2] == [f"already stored {t['id']}"
                                             for t in done["turns"]]
    bad = holomem("remember-conversation", str(store), "--session", "s1",
                  stdin='{"role": "user", "content": "x"}\nnot json\n')
    assert bad.returncode == 2 and "line 2 is not JSON" in bad.stderr
    with Store.open(store) as opened:
        memory = Memory(opened)
        ids = [t["id"] for t in done["turns"]]
        assert _replies(memory, ids) == [None, ids[0]]
        assert memory.get(ids[1]).speaker == "assistant"  # type: ignore[union-attr]


def test_the_client_refuses_a_time_the_library_refuses_before_sending_it(
        tmp_path: Path) -> None:
    # A naive datetime is the process's local time to the library (refused), and a date
    # no time at all: sent as ISO strings they would have been read as UTC midnight.
    srv = start(tmp_path / "data")
    client = Client(srv.url, api_key=API_KEY, tenant="t1")
    try:
        remote, said = client.memory, [{"role": "user", "content": "hi"}]
        for bad in ({"time": dt.datetime(2024, 1, 1)}, {"time": dt.date(2024, 1, 1)}):
            with pytest.raises(InvalidError, match="time"):
                remote.remember_conversation(said, session="s1", **bad)
            with pytest.raises(InvalidError, match="time"):
                remote.remember_conversation([{**said[0], **bad}], session="s1")
        assert remote.list().facts == []  # nothing was written
        aware = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
        done = remote.remember_conversation([{**said[0], "time": aware}], session="s1")
        fact = remote.get(done.turns[0].id)
        assert fact is not None and fact.event_time == 1_704_067_200_000
    finally:
        client.close()
        srv.stop()
