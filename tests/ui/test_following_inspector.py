"""An inspector that follows a store another process writes (``holomem ui`` while a
``holomem serve`` or an agent writes it) answers its pages while that writer compacts
and purges: a store call that was reading the generation the writer replaced is made
again once the follower has caught up (:func:`holomem.api.doors.follower.follow`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient

from holomem import Memory, Store
from holomem.api.doors.ui.routes import create_ui
from holomem.api.doors.ui.source import OneStore
from holomem.errors import UnavailableError


@pytest.fixture
def writer(store: Path) -> Iterator[Store]:
    with Store.open(store) as held:  # another process's writer, as far as the pages know
        yield held


def served(source: OneStore) -> TestClient:
    return TestClient(create_ui(source), base_url="http://127.0.0.1")


@pytest.fixture
def follower(store: Path, writer: Store) -> Iterator[OneStore]:
    source = OneStore(str(store))
    try:
        assert source.role(None) == "follower"
        yield source
    finally:
        source.close()


def test_a_following_inspector_reads_again_when_the_generation_was_replaced_under_a_read(
        writer: Store, follower: OneStore, monkeypatch: pytest.MonkeyPatch) -> None:
    real = follower.memory.call
    replaced: list[str] = []

    def call(op: str, request: dict[str, Any]) -> dict[str, Any]:
        # The race a follower loses now and then (another page of it moving to the new
        # generation while this one read the old one's zeroed files, which no timing
        # makes happen on demand), made to happen here: the writer purges, and this
        # read fails as the engine fails it then.
        if not replaced:
            replaced.append(op)
            Memory(writer).forget({"ids": ["hostile"]}, purge=True)
            raise UnavailableError("the generation was replaced while it was being read")
        return real(op, request)

    monkeypatch.setattr(follower.memory, "call", call)
    with served(follower) as c:
        page = c.get("/fact?id=ann-rome")
        assert page.status_code == 200, page.text
        assert "Ann lives in Rome" in page.text
        assert c.get("/fact?id=hostile").status_code == 404  # purged: the new generation
    assert replaced and follower.memory.store.generation == writer.generation


def test_an_unavailable_store_call_with_no_new_generation_is_answered_at_once(
        follower: OneStore, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def call(op: str, request: dict[str, Any]) -> dict[str, Any]:
        calls.append(op)
        raise UnavailableError("the embedder's model cannot be loaded")

    monkeypatch.setattr(follower.memory, "call", call)
    with served(follower) as c:
        page = c.get("/fact?id=ann-rome")
        assert page.status_code == 503 and "cannot be loaded" in page.text
    assert calls == ["get"]  # not made again: nothing had changed
