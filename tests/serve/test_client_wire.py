"""The Python client as a drop-in for Memory (issue 15, item 6): its surface, its
errors when the server is not there, the serve extra, and imports cut into requests.

- ``Client`` has every public method of ``Memory``, with Memory's parameters, and
  ``AsyncClient`` every one of ``AsyncMemory``, coroutines where AsyncMemory's are;
  what only the process holding the store can do is refused with the reason.
- A server that is down, one that never answers, and one that answers something else
  than holomem's JSON raise ``UnavailableError`` naming the URL: never an httpx error.
- Without httpx (the serve extra), importing the client names the extra to install.
- An import bigger than one request (1,000 records, about 1 MB) is sent as several the
  server takes, and every supersession link is written whatever the cut (Hypothesis,
  against ``Memory.import_`` of the same records).
"""

from __future__ import annotations

import asyncio
import http.server
import inspect
import json
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from holomem import AsyncMemory, InvalidError, LimitError, Memory, Store, UnavailableError
from holomem.api.doors.http.tenants import valid_tenant
from holomem.client import REQUEST_BYTES, AsyncClient, Client

from .conftest import API_KEY, Server, free_port, start


def public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


def test_the_client_has_every_public_method_of_memory_with_its_parameters() -> None:
    assert public(Memory) <= public(Client)
    for name in sorted(public(Memory)):
        theirs, ours = getattr(Memory, name), getattr(Client, name)
        if not callable(theirs):
            continue
        want = [(p.name, p.kind) for p in inspect.signature(theirs).parameters.values()]
        got = [(p.name, p.kind) for p in inspect.signature(ours).parameters.values()
               if p.kind is not p.KEYWORD_ONLY or (p.name, p.kind) in want]
        assert got == want, name


def test_the_async_client_has_every_public_method_of_async_memory() -> None:
    assert public(AsyncMemory) <= public(AsyncClient)
    for name in sorted(public(AsyncMemory)):
        theirs = inspect.getattr_static(AsyncMemory, name)
        ours = inspect.getattr_static(AsyncClient, name)
        if isinstance(theirs, property):
            assert isinstance(ours, property), name
            continue
        for check in (inspect.iscoroutinefunction, inspect.isasyncgenfunction):
            assert check(getattr(AsyncMemory, name)) == check(getattr(AsyncClient, name)), name


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start(tmp_path_factory.mktemp("wire") / "data")
    yield srv
    srv.stop()


def test_what_only_the_process_holding_the_store_can_do_is_refused_with_a_reason(
        server: Server) -> None:
    with Client(server.url, api_key=API_KEY, tenant="refusals") as client:
        refusals = [
            ("with_supersession", lambda: client.with_supersession("none"), "configuration"),
            ("with_recency", lambda: client.with_recency(None), "configuration"),
            ("with_entity_extractor", lambda: client.with_entity_extractor("regex"),
             "configuration"),
            ("with_forgetting", lambda: client.with_forgetting(None), "configuration"),
            ("with_consolidation", lambda: client.with_consolidation(None),
             "configuration"),
            ("with_observer", lambda: client.with_observer(print), "commits in its own"),
            ("with_clock", lambda: client.with_clock(object()), "clock"),
            ("reembed", lambda: client.reembed(), "process that holds the store"),
            ("notify", lambda: client.notify("remember", [], 1), "observers"),
        ]
        for name, call, why in refusals:
            with pytest.raises(InvalidError, match=why) as info:
                call()
            assert info.value.code == "invalid_request", name
        for name in ("store", "config", "embedder"):
            assert not hasattr(client, name)  # an AttributeError, for hasattr and getattr
            with pytest.raises(InvalidError, match=r"info\(\)"):
                getattr(client, name)
        # What a client can do here: render_context needs no store, info tells the rest.
        client.remember("Alice lives in Paris", id="p")
        block = client.render_context(client.recall("Alice"))
        assert block == Memory.render_context(client.recall("Alice"))
        assert "Alice lives in Paris" in block
        assert client.info().config.supersession == "none"
        assert client.memory is client  # client.memory.recall(...) keeps working

    async def main() -> None:
        async with AsyncClient(server.url, api_key=API_KEY, tenant="refusals") as aclient:
            with pytest.raises(InvalidError, match="process that holds the store"):
                await aclient.reembed()
            with pytest.raises(InvalidError, match="configuration"):
                aclient.with_supersession("latest-by-subject")
            assert not hasattr(aclient, "store")
            assert "Paris" in aclient.render_context(await aclient.recall("Alice"))

    asyncio.run(main())


def every_call(m: Any) -> list[tuple[str, Any]]:
    """One call of each kind a client sends (run lazily: export is a generator)."""
    return [("remember", lambda: m.remember("x")), ("recall", lambda: m.recall("x")),
            ("get", lambda: m.get("x")), ("info", lambda: m.info()),
            ("list", lambda: m.list()), ("call", lambda: m.call("get", {"id": "x"})),
            ("export", lambda: list(m.export())),
            ("import_", lambda: m.import_([{"id": "x", "text": "x", "ingestTime": 1}])),
            ("forget", lambda: m.forget({"ids": ["x"]})), ("healthz", lambda: m.healthz())]


def test_a_server_that_is_down_raises_unavailable_naming_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nobody listens there
    with Client(url, timeout=5) as client:
        for name, call in every_call(client):
            with pytest.raises(UnavailableError) as info:
                call()
            assert info.value.code == "unavailable" and url in str(info.value), name
            assert not isinstance(info.value, httpx.HTTPError)

    async def main() -> None:
        async with AsyncClient(url, timeout=5) as aclient:
            for name, call in every_call(aclient):
                if name == "export":
                    continue  # an async generator: iterated below
                with pytest.raises(UnavailableError) as info:
                    got = call()
                    if inspect.isawaitable(got):
                        await got
                assert url in str(info.value), name
            with pytest.raises(UnavailableError):
                async for _ in aclient.export():
                    pass

    asyncio.run(main())


def test_a_server_that_never_answers_raises_unavailable_after_the_timeout() -> None:
    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with Client(url, timeout=0.2) as client:
            with pytest.raises(UnavailableError, match=r"did not answer recall within 0\.2 s"
                               ) as info:
                client.recall("x")
            assert url in str(info.value) and info.value.status == 503

        async def main() -> None:
            async with AsyncClient(url, timeout=0.2) as aclient:
                with pytest.raises(UnavailableError, match="did not answer remember"):
                    await aclient.remember("x")

        asyncio.run(main())


def test_an_answer_that_is_not_holomem_json_is_unavailable_whatever_its_status() -> None:
    def foreign(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/recall"):
            return httpx.Response(200, text="<html>a captive portal</html>")
        if request.url.path.endswith("/get"):
            return httpx.Response(502, text="bad gateway")
        return httpx.Response(418, text="teapot")

    with Client("http://holomem.test", transport=httpx.MockTransport(foreign)) as client:
        with pytest.raises(UnavailableError, match="not holomem's JSON"):
            client.recall("x")
        with pytest.raises(UnavailableError, match="HTTP 502"):
            client.get("x")
        with pytest.raises(UnavailableError) as info:
            client.info()
        assert info.value.status == 503 and "HTTP 418" in str(info.value)
        assert "http://holomem.test" in str(info.value)
    with pytest.raises(InvalidError, match="http:// or https://"):
        Client("127.0.0.1:8080")


def answered(request: httpx.Request) -> httpx.Response:
    """A server that answers every request with the headers it was sent."""
    return httpx.Response(200, json={"headers": dict(request.headers)})


@settings(max_examples=200, deadline=None)
@given(tenant=st.none() | st.text(max_size=70) | st.from_regex(r"[A-Za-z0-9._-]{1,70}",
                                                                  fullmatch=True),
       key=st.none() | st.text(max_size=20))
@example(tenant="é", key=None)
@example(tenant="a\nb", key=None)
@example(tenant="abc\n", key=None)
@example(tenant=None, key="ключ")
@example(tenant=None, key="a\r\nX-Evil: 1")
def test_a_tenant_or_key_the_wire_cannot_carry_is_refused_by_the_constructor(
        tenant: str | None, key: str | None) -> None:
    """Either the constructor raises InvalidError, or the tenant and key go out as they
    were given: never a UnicodeEncodeError or an httpx error, and never a tenant the
    server would refuse."""
    for cls, transport in ((Client, httpx.MockTransport(answered)),
                           (AsyncClient, httpx.MockTransport(answered))):
        try:
            client = cls("http://holomem.test", api_key=key, tenant=tenant,
                         transport=transport)
        except InvalidError:
            assert tenant or key
            continue
        if isinstance(client, Client):
            sent = client.healthz()["headers"]
        else:
            sent = asyncio.run(client.healthz())["headers"]
        assert sent.get("x-tenant-id") == (tenant or None)
        assert tenant is None or tenant == "" or valid_tenant(tenant)
        assert sent.get("authorization") == (f"Bearer {key}" if key else None)


@pytest.mark.parametrize("url", ["http://[::1", "http://[zz]/", "http://\x00x", "http://a\u3000b"])
def test_a_url_that_is_not_one_is_invalid_not_an_httpx_error(url: str) -> None:
    for cls in (Client, AsyncClient):
        with pytest.raises(InvalidError, match="not a URL"):
            cls(url)


@pytest.mark.parametrize("call", ["recall", "healthz"])
def test_a_server_that_is_no_holomem_server_is_unavailable_naming_the_url(call: str) -> None:
    """A plain HTTP server answers these with HTML errors (501, 404): UnavailableError,
    code unavailable, status 503, naming the URL, for both clients."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with Client(url) as client, pytest.raises(UnavailableError) as info:
            client.recall("x") if call == "recall" else client.healthz()
        assert info.value.code == "unavailable" and info.value.status == 503
        assert url in str(info.value)

        async def main() -> None:
            async with AsyncClient(url) as aclient:
                with pytest.raises(UnavailableError, match=re.escape(url)):
                    await (aclient.recall("x") if call == "recall" else aclient.healthz())

        asyncio.run(main())
    finally:
        server.shutdown()
        server.server_close()


def test_importing_the_client_without_the_serve_extra_names_the_extra() -> None:
    code = ("import sys; sys.modules['httpx'] = None\n"
            "import holomem\n"  # the library itself needs no httpx
            "try:\n"
            "    import holomem.client\n"
            "except ImportError as exc:\n"
            "    print(type(exc).__name__, exc.name, exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.startswith("ModuleNotFoundError httpx ")
    assert "pip install 'holomem-db[serve]'" in out.stdout


def test_an_import_larger_than_a_request_is_sent_as_requests_the_server_takes(
        server: Server) -> None:
    text = " ".join(f"word{i:010d}" for i in range(4000))  # 60 KB, 4,000 words a record
    assert len(text) >= 59_999
    big = [{"id": f"big-{i}", "text": text + f" {i}", "ingestTime": 1000 + i}
           for i in range(40)]
    small = [{"id": f"small-{i}", "text": f"small fact {i}", "ingestTime": 1000 + i}
             for i in range(2500)]
    with Client(server.url, api_key=API_KEY, tenant="large-imports") as client:
        steps: list[int] = []
        report = client.import_(big, progress=steps.append)
        # Each request within REQUEST_BYTES (the server refuses bodies over 1 MiB).
        assert report.imported == 40 and len(steps) >= 3 and steps[-1] == 40
        assert max(b - a for a, b in zip([0, *steps], steps, strict=False)) * len(text) \
            <= REQUEST_BYTES
        steps.clear()
        report = client.import_(small, batch_size=10_000, progress=steps.append)
        assert steps == [1000, 2000, 2500]  # at most 1,000 records a request
        assert (report.imported, report.batches) == (2500, 3)
        assert [r["id"] for r in client.export(page_size=1000)] == \
            [r["id"] for r in big + small]
        huge = {"id": "huge", "text": "x", "ingestTime": 1,
                "feedback": [{"helpful": True, "time": 1, "note": "n" * 20}] * 30_000}
        with pytest.raises(LimitError, match="line 2: the record is"):
            client.import_([small[0], huge])
        assert client.get("huge") is None  # nothing of that import was sent


LINKED = st.integers(2, 10).flatmap(lambda n: st.tuples(
    st.just(n),
    # Fact i may supersede any earlier fact j < i (no cycles), or a fact never given.
    st.lists(st.tuples(st.integers(1, n - 1), st.integers(0, n)), max_size=n).map(
        lambda pairs: sorted({(i, j) for i, j in pairs if j < i or j == n})),
    st.permutations(range(n)), st.integers(1, 4)))


def links_of(record: dict[str, Any]) -> list[tuple[str, int]]:
    return sorted((link["supersedes"], link["knownAt"]) for link in record["links"])


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=LINKED)
# A held record naming another held one, whose own link never resolves: sent after it.
@example(case=(6, [(4, 6), (5, 4)], [0, 1, 2, 3, 5, 4], 1))
def test_every_link_is_written_however_the_import_is_cut_into_requests(
        server: Server, tmp_path_factory: pytest.TempPathFactory,
        case: tuple[int, list[tuple[int, int]], list[int], int]) -> None:
    n, links, order, batch = case
    records = [{"id": f"x{i}", "text": f"fact {i}", "ingestTime": 100 + i,
                "links": [{"supersedes": f"x{j}", "knownAt": 200 + i}
                          for a, j in links if a == i]} for i in range(n)]
    given_order = [records[i] for i in order]
    path = tmp_path_factory.mktemp("links") / "s"
    with Store.open(path, sync="none") as store:
        memory = Memory(store)
        want = memory.import_(given_order, batch_size=batch)
        # The links each fact holds (their order is the order they were resolved in,
        # which depends on where the batches fell: compared as sets).
        expected = {r["id"]: links_of(r) for r in memory.export()}
    tenant = f"links-{path.parent.name}"
    with Client(server.url, api_key=API_KEY, tenant=tenant) as client:
        got = client.import_(given_order, batch_size=batch)
        assert (got.imported, got.unresolved_links) == (want.imported, want.unresolved_links)
        assert {r["id"]: links_of(r) for r in client.export()} == expected
    json.dumps(expected)  # plain data throughout


def test_an_import_error_names_the_line_of_the_callers_input(server: Server) -> None:
    records = [{"id": f"l{i}", "text": f"line {i}", "ingestTime": 10 + i} for i in range(7)]
    with Client(server.url, api_key=API_KEY, tenant="lines") as client:
        client.import_(records)
        changed = [*records[:6], {**records[6], "text": "another payload"}]
        with pytest.raises(Exception) as info:
            client.import_(changed, batch_size=3)  # the third request, its first record
        assert str(info.value).startswith("line 7: ") and info.value.code == "conflict"  # type: ignore[attr-defined]
        blank = ["", *[json.dumps(r) for r in records[:2]], '{"id": "l9"}']
        with pytest.raises(InvalidError, match=r"^line 4: "):
            client.import_(blank)


def test_the_clients_progress_is_called_when_the_server_has_written_and_checked_first(
        server: Server) -> None:
    facts = [{"text": f"progress fact {i}"} for i in range(3)]
    with Client(server.url, api_key=API_KEY, tenant="progress") as client:
        steps: list[int] = []
        client.remember_many(facts, progress=steps.append)
        assert steps == [3]
        for bad in (client.remember_many, client.import_):
            with pytest.raises(InvalidError, match="progress"):
                bad([{"id": "n", "text": "never sent", "ingestTime": 1}],
                    progress=5)  # type: ignore[operator]
        assert client.get("n") is None

    async def main() -> list[int]:
        async with AsyncClient(server.url, api_key=API_KEY, tenant="progress") as aclient:
            seen: list[int] = []
            await aclient.remember_many(facts, progress=seen.append)
            with pytest.raises(InvalidError, match="progress"):
                await aclient.import_([{"id": "n", "text": "x", "ingestTime": 1}],
                                      progress=5)  # type: ignore[arg-type]
            return seen

    assert asyncio.run(main()) == [3]
