"""The inspector's pages, in process (Starlette's TestClient): they show what the store
holds, whatever else it holds. A search with a status finds the facts of that status
however many others match; a fact page shows a bounded window of a chain of any length,
with the way on; the metadata field and the filter box both hold, and no pair of them is
a 500; a time of 0 (1970-01-01) is a time."""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("starlette")

from starlette.testclient import TestClient

from holomem import Memory, Store
from holomem.api.doors.ui import pages
from holomem.api.doors.ui.routes import create_ui
from holomem.api.doors.ui.source import OneStore

DAY = 86_400_000


class Counted(OneStore):
    """The inspector's own source, and the contract ops each page asked of it."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.ops: list[str] = []

    def call(self, tenant: str | None, op: str, request: dict[str, Any], *,
             writes: bool = False) -> dict[str, Any]:
        self.ops.append(op)
        return super().call(tenant, op, request, writes=writes)


def served(source: OneStore) -> TestClient:
    return TestClient(create_ui(source), base_url="http://127.0.0.1")


def ids_shown(page: str) -> list[str]:
    """The fact ids a page of facts links to, in its order."""
    return re.findall(r'href="/fact\?id=([^"&]+)[^"]*" class="fact"', page)


@pytest.fixture
def client(store: Path) -> Iterator[TestClient]:
    source = OneStore(str(store))
    try:
        with served(source) as c:
            yield c
    finally:
        source.close()


# -- a search with a status ------------------------------------------------------------------
def test_a_search_with_a_status_finds_the_facts_of_that_status_however_many_others_match(
        tmp_path: Path) -> None:
    path = tmp_path / "coffee"
    with Store.open(path) as store:
        memory = Memory(store)
        memory.remember_many([{"id": f"cur{i}", "text": f"coffee order {i} coffee coffee"}
                              for i in range(30)])
        memory.remember({"id": "old", "text": "coffee once"})
        memory.remember({"id": "new", "text": "tea now", "supersedes": ["old"]})
    source = OneStore(str(path))
    try:
        with served(source) as c:
            # Thirty current facts outrank it for "coffee"; a page of five still finds it.
            page = c.get("/?q=coffee&status=superseded&limit=5").text
            assert ids_shown(page) == ["old"]
            current = c.get("/?q=coffee&status=current&limit=5").text
            assert len(ids_shown(current)) == 5 and "old" not in ids_shown(current)
            assert c.get("/?q=coffee&status=expired&limit=5").status_code == 200
    finally:
        source.close()


# -- a long supersession chain ----------------------------------------------------------------
def _chain(path: Path, n: int) -> None:
    with Store.open(path) as store:
        Memory(store).remember_many([
            {"id": f"v{i:04d}", "text": f"version {i} of the value", "eventTime": DAY + i,
             **({"supersedes": [f"v{i - 1:04d}"]} if i else {})} for i in range(n)])


def _versions(page: str) -> list[str]:
    """The versions a fact page's chain table lists, in its order."""
    table = page[page.index('class="chain"'):]
    return re.findall(r'href="/fact\?id=(v\d+)[^"]*" class="version"', table)


def test_a_fact_page_reads_and_shows_a_bounded_window_of_a_chain_of_any_length(
        tmp_path: Path) -> None:
    path = tmp_path / "chain"
    n = 3 * pages.MAX_VERSIONS
    _chain(path, n)
    source = Counted(str(path))
    try:
        with served(source) as c:
            middle = c.get("/fact?id=v0150")
            assert middle.status_code == 200
            shown = _versions(middle.text)
            # The versions nearest it, in effect order, the fact in their middle...
            low = int(shown[0][1:])
            assert shown == [f"v{i:04d}" for i in range(low, low + pages.MAX_VERSIONS)]
            assert abs(shown.index("v0150") - pages.MAX_VERSIONS // 2) <= 1
            # ... each version linked to ones beyond says so, and its page goes on.
            assert middle.text.count("linked to 1 more not shown") == 2
            assert f"{shown[-1]}: holds" in middle.text
            assert middle.text.count("to a later version not shown</title>") == 1
            assert "the chain goes on past the ones marked" in middle.text
            # Never the whole chain: no history, at most one get per version shown.
            assert "history" not in source.ops
            assert source.ops.count("get") <= pages.MAX_VERSIONS
            edge = c.get(f"/fact?id={shown[-1]}").text
            assert _versions(edge)[-1] > shown[-1]  # the next window, further on
            first = _versions(c.get("/fact?id=v0000").text)
            assert first == [f"v{i:04d}" for i in range(pages.MAX_VERSIONS)]
            last = _versions(c.get(f"/fact?id=v{n - 1:04d}").text)
            assert last == [f"v{i:04d}" for i in range(n - pages.MAX_VERSIONS, n)]
    finally:
        source.close()


def test_a_short_chain_is_shown_whole_in_effect_order(client: TestClient) -> None:
    for fid in ("ann-paris", "ann-rome"):
        page = client.get(f"/fact?id={fid}").text
        assert "Every version of its supersession chain (2)" in page
        table = page[page.index('class="chain"'):]
        assert re.findall(r'href="/fact\?id=([^"&]+)" class="version"', table) == [
            "ann-paris", "ann-rome"]


# -- the metadata field and the filter box ------------------------------------------------------
def _facts(c: TestClient, **params: str) -> tuple[int, list[str]]:
    answer = c.get("/?" + urllib.parse.urlencode({**params, "limit": "200"}))
    return answer.status_code, ids_shown(answer.text)


def test_the_metadata_field_and_the_filter_box_both_hold(client: TestClient) -> None:
    # filler-n has metadata {"n": n}: the box asks n >= 5, the field n = 3 (none) or 7.
    box = json.dumps({"metadata": {"n": {"$gte": 5}}})
    assert _facts(client, filter=box, metadata='{"n": 3}') == (200, [])
    assert _facts(client, filter=box, metadata='{"n": 7}') == (200, ["filler-07"])
    both = json.dumps({"metadata": {"n": {"$lt": 9}}, "$and": [{"metadata": {"n": {"$gt": 1}}}]})
    assert _facts(client, filter=both, metadata='{"n": 1}') == (200, [])
    assert _facts(client, filter=both, metadata='{"n": 2}') == (200, ["filler-02"])
    assert _facts(client, filter='{"metadata": {"source": "chat"}}',
                  metadata='{"source": "chat"}')[1] == ["ann-paris", "ann-rome"]
    # Named twice, in its field and in the box: the page says so.
    answer = client.get("/?subject=ann/city&filter=" + urllib.parse.quote(
        '{"subject": "eve/note"}'))
    assert answer.status_code == 400 and "subject" in answer.text


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 20) | st.sampled_from(["chat", "n", "$gt"]),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["n", "source", "$gt", "$in", "$exists", "$and",
                                       "metadata"]), inner, max_size=3),
    max_leaves=10)
_box = st.dictionaries(st.sampled_from(["metadata", "$and", "$or", "$not", "subject",
                                        "status", "speaker"]), _json, max_size=3)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(metadata=st.dictionaries(st.sampled_from(["n", "source", "$gt"]), _json, max_size=3),
       box=_box, status=st.sampled_from(["", "current", "superseded"]),
       q=st.sampled_from(["", "Ann"]))
def test_no_metadata_field_and_filter_box_together_fail_the_page(
        client: TestClient, metadata: dict[str, Any], box: dict[str, Any], status: str,
        q: str) -> None:
    answer = client.get("/?" + urllib.parse.urlencode(
        {"metadata": json.dumps(metadata), "filter": json.dumps(box), "status": status,
         "q": q}))
    assert answer.status_code in (200, 400), answer.text


# -- times of 0 --------------------------------------------------------------------------------
def test_a_time_of_zero_is_shown_as_1970_not_as_another_time(tmp_path: Path) -> None:
    path = tmp_path / "epoch"
    with Store.open(path) as store:
        memory = Memory(store)
        memory.remember({"id": "e0", "text": "valid since the epoch", "validFrom": 0,
                         "validTo": DAY})
        memory.remember({"id": "e1", "text": "the next version", "validFrom": DAY,
                         "supersedes": ["e0"]})
        memory.call("rememberConversation", {"session": "c0", "time": 0, "messages": [
            {"speaker": "ann", "text": "said at the epoch"}]})
    source = OneStore(str(path))
    try:
        with served(source) as c:
            page = c.get("/fact?id=e0").text
            rows = re.findall(r"<tr>(.*?)</tr>", page[page.index('class="chain"'):])
            assert "1970-01-01 00:00:00Z" in rows[1] and "e0" in rows[1]
            assert "v1 e0: holds 1970-01-01 00:00:00Z to 1970-01-02 00:00:00Z" in page
            turns = c.get("/conversations?session=c0").text
            assert "1970-01-01 00:00:00Z" in turns[turns.index('class="turns"'):]
    finally:
        source.close()
