"""A real ``holomem ui`` process over a small store, and Chromium driven by Playwright.

The store holds a fact that was superseded (Ann moved from Paris to Rome, each with its
valid time), a fact whose text is hostile HTML, a conversation and a working context.
Chromium is Debian's (``.ci/run`` installs it); Playwright's own browser download is
never used. Every page a test opens records the requests it makes and its console
errors (:class:`Watched`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from holomem import Memory, Store

HOSTILE = 'Eve wrote <script>alert("owned")</script><img src=x onerror=alert(1)>'
#: Chromium's flags: no sandbox (CI runs as root), and nothing that reaches the network.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-default-apps", "--disable-extensions"]


def build_store(path: Path) -> None:
    with Store.open(str(path)) as store:
        memory = Memory(store)
        memory.call("remember", {"text": "Ann lives in Paris", "id": "ann-paris",
                                 "subject": "ann/city", "namespace": ["users", "ann"],
                                 "validFrom": "2020-01-01", "metadata": {"source": "chat"}})
        memory.call("remember", {"text": "Ann lives in Rome", "id": "ann-rome",
                                 "subject": "ann/city", "namespace": ["users", "ann"],
                                 "validFrom": "2024-01-01", "supersedes": ["ann-paris"],
                                 "metadata": {"source": "chat"}})
        memory.call("remember", {"text": "Ann works at the observatory", "id": "ann-work",
                                 "subject": "ann/employer", "namespace": ["users", "ann"]})
        memory.call("relate", {"fromId": "ann-rome", "toId": "ann-work",
                               "relation": "same-person", "namespace": ["users", "ann"]})
        memory.call("remember", {"text": HOSTILE, "id": "hostile", "subject": "eve/note"})
        for n in range(12):
            memory.call("remember", {"text": f"Filler fact number {n} about tea",
                                     "id": f"filler-{n:02d}", "subject": f"tea/{n}",
                                     "namespace": ["misc"], "metadata": {"n": n}})
        memory.call("rememberConversation", {
            "session": "chat-1", "time": 1_700_000_000_000,
            "messages": [{"speaker": "ann", "text": "I moved to Rome last year"},
                         {"speaker": "bot", "text": "How do you like Rome?"}]})
        memory.call("saveWorkingContext", {"session": "planner", "state": {"step": 3}})


@dataclass
class Ui:
    url: str
    store: Path
    proc: subprocess.Popen[bytes]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store :func:`build_store` filled, for the pages' tests."""
    path = tmp_path / "store"
    build_store(path)
    return path


def start_ui(store: Path, *extra: str, timeout: float = 30.0) -> Ui:
    """``holomem ui STORE --port 0``; the URL is the one its stderr line names."""
    log = store.parent / f"ui-{store.name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "holomem", "ui", str(store), "--port", "0", *extra],
            stdout=subprocess.DEVNULL, stderr=out,
            env={**os.environ, "PYTHONWARNINGS": "ignore"})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)/", log.read_text())
        if found:
            return Ui(found.group(1), store, proc)
        if proc.poll() is not None:
            raise AssertionError(f"holomem ui exited {proc.returncode}: {log.read_text()}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"holomem ui did not start: {log.read_text()}")


def stop_ui(ui: Ui) -> None:
    ui.proc.terminate()
    try:
        ui.proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        ui.proc.kill()
        ui.proc.wait()


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[Ui]:
    store = tmp_path / "store"
    build_store(store)
    served = start_ui(store)
    try:
        yield served
    finally:
        stop_ui(served)


@dataclass
class Watched:
    """A browser page, and what it did: every request's URL, every console error."""

    page: Any
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def hosts(self) -> set[str]:
        from urllib.parse import urlsplit

        return {urlsplit(u).hostname or "" for u in self.requests}


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One Chromium for a module's tests. Not for the session: Playwright's sync API
    keeps an event loop running in this thread while it is started, and the tests that
    come after (``asyncio.run``) need none."""
    sync_api = pytest.importorskip("playwright.sync_api")
    executable = shutil.which("chromium")
    if executable is None:
        # .ci/run installs chromium and sets HOLOMEM_REQUIRE_BROWSER: there a missing
        # browser is a failure, not a skip.
        if os.environ.get("HOLOMEM_REQUIRE_BROWSER"):
            pytest.fail("HOLOMEM_REQUIRE_BROWSER is set but no chromium is on PATH")
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def browser_page(chromium: Any) -> Iterator[Watched]:
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    watched = Watched(page)
    page.on("request", lambda r: watched.requests.append(r.url))
    page.on("console", lambda m: watched.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: watched.errors.append(str(e)))
    try:
        yield watched
    finally:
        context.close()
