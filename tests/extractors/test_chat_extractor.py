"""The chat adapter (holomem.extractors.chat; docs/contract.md §4g, "Extractors"),
against a fake OpenAI-compatible endpoint on 127.0.0.1 that these tests start and that
answers what each test hands it: its guarantees, each a test.

The facts it answers are stored with the turns, each linked to the turns it cites;
settings come from arguments, else the environment; any bad answer — not JSON, another
shape, a turn it does not know, too many facts, too long a text, too big a body — is a
clear error and nothing is written; transport failures and 5xx are retried a bounded
number of times with backoff, then ``unavailable``; a slow endpoint times out; other
HTTP statuses are not retried; the key appears in no error.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from holomem import ManualClock, Memory, MemoryConfig, Store
from holomem.errors import HolomemError, InvalidError, LimitError, UnavailableError
from holomem.extractors import ChatExtractor
from holomem.extractors import chat as chat_module

KEY = "sk-test-secret-key"
CHAT = [{"speaker": "alice", "text": "I moved to Berlin last month.", "time": 1_000},
        {"speaker": "bob", "text": "Nice! Still at the bakery?", "time": 2_000},
        {"speaker": "alice", "text": "No, I work at Acme now.", "time": 3_000}]


class Reply(NamedTuple):
    """One canned answer: status, body, seconds to wait first, whether to send a
    Content-Length."""

    status: int = 200
    body: bytes = b""
    delay: float = 0.0
    length: bool = True


def completion(content: Any) -> Reply:
    text = content if isinstance(content, str) else json.dumps(content)
    return Reply(body=json.dumps({"id": "c1", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": text},
         "finish_reason": "stop"}], "usage": {"total_tokens": 1}}).encode())


class Endpoint:
    """The fake endpoint: answers each POST with the next canned reply (the last one
    again when they run out) and keeps what it was sent."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[tuple[str, dict[str, str], Any]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(size))
                endpoint.requests.append((self.path, dict(self.headers), body))
                reply = (endpoint.replies.pop(0) if len(endpoint.replies) > 1
                         else endpoint.replies[0])
                time.sleep(reply.delay)
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    if reply.length:
                        self.send_header("Content-Length", str(len(reply.body)))
                    else:
                        self.send_header("Connection", "close")
                    if 300 <= reply.status < 400:
                        self.send_header("Location", "http://127.0.0.1:9/elsewhere")
                    self.end_headers()
                    self.wfile.write(reply.body)
                except OSError:
                    pass  # the client gave up (a timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    e = Endpoint()
    yield e
    e.close()


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    store = Store.open(tmp_path / "store", sync="none")
    yield Memory(store, MemoryConfig(supersession="latest-by-subject"),
                 clock=ManualClock(1_000_000))
    store.close()


def extractor(endpoint: Endpoint, **kwargs: Any) -> ChatExtractor:
    kwargs.setdefault("sleep", lambda s: None)
    return ChatExtractor(endpoint.url, "test-model", KEY, **kwargs)


def turn_ids(memory: Memory) -> list[str]:
    """The ids the turns of CHAT get in session s (they derive from the position)."""
    probe = memory.remember_conversation(CHAT, session="s")
    return [t.id for t in probe.turns]


def test_the_endpoint_facts_are_stored_with_the_turns_linked_to_those_they_cite(
        endpoint: Endpoint, memory: Memory) -> None:
    ids = turn_ids(memory)
    endpoint.replies = [completion({"facts": [
        {"text": "Alice lives in Berlin", "sources": [ids[0]], "subject": "alice/city",
         "entities": ["Alice", "Berlin"]},
        {"text": "Alice works at Acme", "sources": [ids[1], ids[2]],
         "subject": "alice/employer"}]})]
    done = memory.remember_conversation(CHAT, session="s", extractor=extractor(endpoint))
    city, job = (memory.get(d.id) for d in done.derived)
    assert city is not None and job is not None
    assert (city.text, city.subject, city.entities, city.event_time) == (
        "Alice lives in Berlin", "alice/city", ["Alice", "Berlin"], 1_000)
    assert job.event_time == 3_000  # the latest of its turns
    assert city.metadata == {"extractor": "chat", "model": "test-model"}
    assert {x.to_id for x in memory.links(job.id, relation="derived_from").links} == {
        ids[1], ids[2]}
    (path, headers, body), = endpoint.requests
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == f"Bearer {KEY}"
    assert body["model"] == "test-model" and body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    system, user = body["messages"]
    assert system["role"] == "system" and "JSON" in system["content"]
    assert json.loads(user["content"]) == [
        {"id": i, "speaker": m["speaker"], "text": m["text"]} for i, m in zip(ids, CHAT,
                                                                            strict=True)]


def test_an_empty_answer_stores_the_turns_only(endpoint: Endpoint, memory: Memory) -> None:
    endpoint.replies = [completion({"facts": []})]
    done = memory.remember_conversation(CHAT, session="s", extractor=extractor(endpoint))
    assert len(done.turns) == 3 and done.derived == []


def test_a_fenced_json_answer_is_read(endpoint: Endpoint, memory: Memory) -> None:
    ids = turn_ids(memory)
    endpoint.replies = [completion(
        "```json\n" + json.dumps({"facts": [{"text": "Alice lives in Berlin",
                                             "sources": [ids[0]]}]}) + "\n```")]
    done = memory.remember_conversation(CHAT, session="s", extractor=extractor(endpoint))
    assert [memory.get(d.id).text for d in done.derived] == [  # type: ignore[union-attr]
        "Alice lives in Berlin"]


def test_settings_come_from_the_arguments_else_the_environment() -> None:
    env = {chat_module.ENV_BASE_URL: "http://127.0.0.1:1/v1/",
           chat_module.ENV_MODEL: "m", chat_module.ENV_API_KEY: KEY}
    e = ChatExtractor(environ=env)
    assert (e.url, e.model) == ("http://127.0.0.1:1/v1/chat/completions", "m")
    assert ChatExtractor("https://x/v1/chat/completions", environ=env).url == \
        "https://x/v1/chat/completions"
    assert ChatExtractor(model="other", environ=env).model == "other"
    with pytest.raises(InvalidError, match=chat_module.ENV_BASE_URL):
        ChatExtractor(environ={})
    with pytest.raises(InvalidError, match=chat_module.ENV_MODEL):
        ChatExtractor("http://127.0.0.1:1/v1", environ={})


@pytest.mark.parametrize("kwargs", [
    {"base_url": "file:///etc/passwd"}, {"base_url": "ftp://x"}, {"api_key": "a\nb"},
    {"timeout": 0}, {"timeout": "1"}, {"retries": -1}, {"retries": 11}, {"backoff": -1},
    {"max_response_bytes": 0}, {"max_facts": 0}, {"max_fact_chars": True}])
def test_bad_settings_are_refused_at_construction(kwargs: dict[str, Any]) -> None:
    args = {"base_url": "http://127.0.0.1:1/v1", "model": "m", **kwargs}
    with pytest.raises(InvalidError):
        ChatExtractor(environ={}, **args)


def _facts(*facts: dict[str, Any]) -> Reply:
    return completion({"facts": list(facts)})


BAD_ANSWERS = {
    "not json at all": (Reply(body=b"<html>oops</html>"), InvalidError, "not a chat completion"),
    "no choices": (Reply(body=b'{"choices": []}'), InvalidError, "no choices"),
    "null content": (Reply(body=b'{"choices": [{"message": {"content": null}}]}'),
                     InvalidError, "no message content"),
    "content not json": (completion("Alice lives in Berlin."), InvalidError, "not JSON"),
    "a list, not an object": (completion([]), InvalidError, "as asked"),
    "facts not a list": (completion({"facts": "Alice lives in Berlin"}), InvalidError,
                         "as asked"),
    "an unknown key": (_facts({"text": "x", "sources": ["@0"], "confidence": 0.9}),
                       InvalidError, "confidence"),
    "a text that is a number": (_facts({"text": 3, "sources": ["@0"]}), InvalidError,
                                "as asked"),
    "no sources": (_facts({"text": "x", "sources": []}), InvalidError, "source turns"),
    "an unknown turn": (_facts({"text": "x", "sources": ["t-nope"]}), InvalidError,
                        "not a turn of this call"),
    "an empty text": (_facts({"text": "  ", "sources": ["@0"]}), InvalidError, "empty text"),
    "too many facts": (_facts(*[{"text": f"f{i}", "sources": ["@0"]} for i in range(5)]),
                       LimitError, "max_facts"),
    "an oversize text": (_facts({"text": "x" * 101, "sources": ["@0"]}), LimitError,
                         "max_fact_chars"),
    "a bad subject": (_facts({"text": "x", "sources": ["@0"], "subject": ""}),
                      InvalidError, "subject"),
    "an oversize body": (Reply(body=b" " * 5_000 + b"{}"), LimitError, "max_response_bytes"),
    "an oversize body without a length": (Reply(body=b" " * 5_000 + b"{}", length=False),
                                          LimitError, "max_response_bytes"),
}


@pytest.mark.parametrize("case", sorted(BAD_ANSWERS))
def test_a_bad_answer_is_a_clear_error_and_nothing_is_written(
        endpoint: Endpoint, memory: Memory, case: str) -> None:
    ids = turn_ids(memory)
    reply, error, words = BAD_ANSWERS[case]
    endpoint.replies = [reply._replace(body=reply.body.replace(b"@0", ids[0].encode()))]
    revision = memory.store.revision
    with pytest.raises(error, match=words):
        memory.remember_conversation(CHAT, session="s", extractor=extractor(
            endpoint, max_facts=4, max_fact_chars=100, max_response_bytes=4_096))
    assert memory.store.revision == revision
    assert len(endpoint.requests) == 1  # a bad answer is not asked again


def test_a_500_then_success_is_retried_after_a_backoff(endpoint: Endpoint,
                                                      memory: Memory) -> None:
    ids = turn_ids(memory)
    waits: list[float] = []
    endpoint.replies = [Reply(500, b'{"error": "overloaded"}'), Reply(503),
                        _facts({"text": "Alice lives in Berlin", "sources": [ids[0]]})]
    done = memory.remember_conversation(CHAT, session="s", extractor=extractor(
        endpoint, backoff=0.25, sleep=waits.append))
    assert len(done.derived) == 1 and len(endpoint.requests) == 3
    assert waits == [0.25, 0.5]


def test_retries_are_bounded_then_the_endpoint_is_unavailable(endpoint: Endpoint,
                                                               memory: Memory) -> None:
    waits: list[float] = []
    endpoint.replies = [Reply(502, b"bad gateway")]
    revision = memory.store.revision
    with pytest.raises(UnavailableError, match=r"failed 3 time.*HTTP 502: bad gateway"):
        memory.remember_conversation(CHAT, session="s", extractor=extractor(
            endpoint, retries=2, sleep=waits.append))
    assert len(endpoint.requests) == 3 and waits == [0.5, 1.0]
    assert memory.store.revision == revision


def test_a_slow_endpoint_times_out(endpoint: Endpoint, memory: Memory) -> None:
    endpoint.replies = [Reply(body=completion({"facts": []}).body, delay=3.0)]
    with pytest.raises(UnavailableError, match="timed out"):
        memory.remember_conversation(CHAT, session="s", extractor=extractor(
            endpoint, timeout=0.2, retries=0))
    assert memory.list().facts == []


def test_a_refused_connection_is_retried_then_unavailable(memory: Memory) -> None:
    with socket.socket() as s:  # a port nothing listens on once it is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    waits: list[float] = []
    e = ChatExtractor(f"http://127.0.0.1:{port}/v1", "m", retries=1, sleep=waits.append)
    with pytest.raises(UnavailableError, match="failed 2 time"):
        memory.remember_conversation(CHAT, session="s", extractor=e)
    assert waits == [0.5]


@pytest.mark.parametrize("status", [400, 401, 404, 302])
def test_other_statuses_are_not_retried_and_never_show_the_key(
        endpoint: Endpoint, memory: Memory, status: int) -> None:
    endpoint.replies = [Reply(status, b'{"error": {"message": "no such model"}}')]
    with pytest.raises(InvalidError, match=f"HTTP {status}") as info:
        memory.remember_conversation(CHAT, session="s", extractor=extractor(endpoint))
    assert len(endpoint.requests) == 1
    assert KEY not in str(info.value) and KEY not in repr(extractor(endpoint))


def test_too_much_to_send_is_a_limit_error_before_any_request(
        endpoint: Endpoint, memory: Memory) -> None:
    endpoint.replies = [_facts()]
    with pytest.raises(LimitError, match="max_request_chars"):
        memory.remember_conversation(CHAT, session="s", extractor=extractor(
            endpoint, max_request_chars=100))
    assert endpoint.requests == []


def test_without_a_key_or_json_mode_neither_is_sent(endpoint: Endpoint,
                                                    memory: Memory) -> None:
    endpoint.replies = [_facts()]
    memory.remember_conversation(CHAT, session="s", extractor=ChatExtractor(
        endpoint.url, "m", json_mode=False, environ={}))
    (_, headers, body), = endpoint.requests
    assert "response_format" not in body and "Authorization" not in headers


def test_every_failure_is_a_holomem_error_with_a_stable_code(endpoint: Endpoint,
                                                             memory: Memory) -> None:
    for reply in (Reply(body=b"\xff\xfe"), completion("{"), Reply(418, b"teapot")):
        endpoint.replies = [reply]
        with pytest.raises(HolomemError) as info:
            memory.remember_conversation(CHAT, session="s", extractor=extractor(endpoint))
        assert info.value.code in ("invalid_request", "limit", "unavailable")
