"""The inspector's pages, in process (Starlette's TestClient, no browser): a bad
parameter is a 400 page naming it, never a 500; every list is paged under a hard bound;
a fact's text is escaped everywhere; every answer carries the strict headers; a form
post needs this inspector's token; a read-only inspector never forgets; and a host
other than loopback needs a key."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("starlette")

from starlette.testclient import TestClient

from holomem import Memory, Store
from holomem.api.doors.ui import query
from holomem.api.doors.ui.routes import CSP, create_ui
from holomem.api.doors.ui.source import OneStore
from tests.ui.conftest import HOSTILE

#: A list cursor a client altered: a slot far past the store's end.
FORGED = base64.urlsafe_b64encode(b'{"g": 1, "s": 100000, "id": "x"}').decode()


@pytest.fixture
def client(store: Path) -> Iterator[TestClient]:
    source = OneStore(str(store))
    try:
        with TestClient(create_ui(source), base_url="http://127.0.0.1") as c:
            yield c
    finally:
        source.close()


@pytest.mark.parametrize("path, named", [
    ("/?asOf=yesterday", "as of"), ("/?knownAt=2025-13-45", "known at"),
    ("/?limit=100000", "limit"), ("/?limit=0", "limit"), ("/?status=gone", "status"),
    ("/?sort=text", "sort"), ("/?order=up", "order"), ("/?filter={", "filter"),
    ("/?filter=[1]", "filter"), ("/?metadata=3", "metadata"),
    ("/?filter={\"$bogus\": 1}", "bogus"), ("/?namespace=[1]", "namespace"),
    ("/?cursor=nonsense", "cursor"), ("/?cursor=" + FORGED, "cursor"),
    ("/conversations?cursor=" + FORGED, "cursor"), ("/fact", "which fact"),
    ("/forget", "choose a subject"), ("/forget?status=current&subject=x", "status"),
    ("/context", "session"), ("/?q=" + "x" * (query.MAX_FIELD + 1), "q"),
    # Not ASCII digits, though str.isdigit takes them; more digits than int() reads;
    # JSON nested past the decoder's recursion limit:
    ("/?asOf=%C2%B2", "as of"), ("/?knownAt=-%C2%B2", "known at"),
    ("/?limit=%C2%B2", "limit"), ("/?asOf=--5", "as of"), ("/?knownAt=" + "9" * 5000, "known at"),
    ("/?limit=" + "1" * 5000, "limit"), ("/?filter=" + "[" * 2000 + "]" * 2000, "filter"),
    ("/?namespace=" + "[" * 2000 + "]" * 2000, "namespace"),
    ("/?metadata=" + "{\"a\":" * 1200 + "1" + "}" * 1200, "metadata"),
])
def test_a_bad_parameter_is_a_400_page_that_names_it(client: TestClient, path: str,
                                                     named: str) -> None:
    answer = client.get(path)
    assert answer.status_code == 400, answer.text
    assert named in answer.text
    assert answer.headers["content-type"].startswith("text/html")


#: A parameter a person types, and digits that are not ASCII (str.isdigit takes them).
TYPED = st.text(max_size=30) | st.from_regex(r"-?[0-9\u00b2\u0660-\u0669]{1,6}",
                                             fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(value=TYPED)
def test_a_time_or_page_size_parameter_is_taken_or_refused_by_name(value: str) -> None:
    try:
        query.time_ms(value, "as of")
    except query.BadInput as exc:
        assert "as of" in str(exc)
    try:
        query.page_size({"limit": value})
    except query.BadInput as exc:
        assert "limit" in str(exc)


def test_an_unknown_fact_or_page_is_a_404_page(client: TestClient) -> None:
    assert client.get("/fact?id=nobody").status_code == 404
    assert client.get("/nowhere").status_code == 404
    assert client.get("/static/../routes.py").status_code == 404


def test_every_answer_forbids_scripts_frames_and_other_hosts(client: TestClient) -> None:
    for path in ("/", "/fact?id=ann-rome", "/store", "/conversations", "/forget?ids=hostile",
                 "/?asOf=bad", "/static/ui.css"):
        answer = client.get(path)
        assert answer.headers["content-security-policy"] == CSP
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["x-frame-options"] == "DENY"
        assert "script-src" not in CSP and "default-src 'none'" in CSP
        if path.startswith("/static"):
            continue
        # nothing in a page names another host: every link and form stays here
        assert not re.search(r'(?:href|src|action)="(?:https?:)?//', answer.text)
        assert "<script" not in answer.text


def test_a_facts_text_is_escaped_on_every_page(client: TestClient) -> None:
    for path in ("/", "/?q=Eve", "/fact?id=hostile", "/forget?ids=hostile"):
        text = client.get(path).text
        assert HOSTILE not in text
        assert "&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt;" in text


def test_a_page_of_facts_holds_at_most_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "many"
    with Store.open(str(path)) as store:
        Memory(store).call("remember", {"facts": [{"text": f"fact {i}"}
                                                  for i in range(query.MAX_PAGE + 50)]})
    source = OneStore(str(path))
    try:
        with TestClient(create_ui(source), base_url="http://127.0.0.1") as c:
            page = c.get(f"/?limit={query.MAX_PAGE}").text
            assert page.count('class="fact"') == query.MAX_PAGE
            assert "next page" in page
            assert c.get("/").text.count('class="fact"') == query.DEFAULT_PAGE
            assert c.get(f"/?limit={query.MAX_PAGE + 1}").status_code == 400
    finally:
        source.close()


def test_a_form_post_needs_this_inspectors_form_and_token(client: TestClient) -> None:
    form = {"ids": "ann-work", "expect": "x"}
    assert client.post("/forget", data={**form, "token": "guess"}).status_code == 403
    assert client.post("/forget", json={**form}).status_code == 415
    assert client.post("/store/check", data={"tenant": "x"}).status_code == 403
    assert client.get("/fact?id=ann-work").status_code == 200  # nothing was forgotten


def test_the_confirmation_refuses_when_the_store_changed_since_the_dry_run(
        client: TestClient) -> None:
    dry = client.get("/forget?subject=ann/city").text
    token = re.search(r'name="token" value="([^"]+)"', dry)
    expect = re.search(r'name="expect" value="([^"]+)"', dry)
    assert token and expect
    answer = client.post("/forget", data={"subject": "ann/city", "expect": "0" * 24,
                                          "token": token.group(1)})
    assert answer.status_code == 409 and "nothing was forgotten" in answer.text
    done = client.post("/forget", data={"subject": "ann/city", "expect": expect.group(1),
                                        "token": token.group(1)})
    assert done.status_code == 200 and "Forgot <b>2</b>" in done.text


def test_a_read_only_inspector_offers_no_forget_and_refuses_one(store: Path) -> None:
    source = OneStore(str(store), read_only=True)
    try:
        with TestClient(create_ui(source), base_url="http://127.0.0.1") as c:
            dry = c.get("/forget?ids=ann-work").text
            assert "only reads the store" in dry and 'id="confirm"' not in dry
            token = re.search(r'name="token" value="([^"]+)"',
                              c.get("/store").text)
            assert token
            from holomem.api.doors.ui.forms import digest

            report = source.call(None, "forget", {"scope": {"ids": ["ann-work"]},
                                                  "dryRun": True})
            answer = c.post("/forget", data={"ids": "ann-work", "token": token.group(1),
                                             "expect": digest(report)})
            assert answer.status_code >= 400 and "read_only" in answer.text
            assert c.get("/fact?id=ann-work").status_code == 200
    finally:
        source.close()


def test_a_second_inspector_follows_the_store_another_process_writes(store: Path) -> None:
    writer = OneStore(str(store))
    try:
        follower = OneStore(str(store))
        try:
            assert follower.role(None) == "follower" and writer.role(None) == "writer"
            writer.call(None, "remember", {"text": "written later", "id": "later"},
                        writes=True)
            with TestClient(create_ui(follower), base_url="http://127.0.0.1") as c:
                assert "written later" in c.get("/fact?id=later").text
        finally:
            follower.close()
    finally:
        writer.close()


def test_holomem_ui_on_a_host_other_than_loopback_needs_a_key(store: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "holomem", "ui", str(store), "--host",
                           "0.0.0.0", "--port", "0"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2
    assert "--api-key-file" in done.stderr


def test_holomem_ui_on_a_path_with_no_store_exits_3_and_creates_nothing(
        tmp_path: Path) -> None:
    missing, empty = tmp_path / "missing", tmp_path / "empty"
    empty.mkdir()
    for path in (missing, empty):
        for extra in ([], ["--read-only"]):
            done = subprocess.run([sys.executable, "-m", "holomem", "ui", str(path),
                                   "--port", "0", *extra], capture_output=True, text=True,
                                  timeout=60, check=False)
            assert done.returncode == 3, (path, extra, done.stderr)
            assert "error: " in done.stderr and "Traceback" not in done.stderr
    assert not missing.exists() and list(empty.iterdir()) == []


def test_a_dry_run_shows_the_facts_derived_from_a_turn_and_can_take_them_too(
        tmp_path: Path) -> None:
    path = tmp_path / "conversation"
    with Store.open(str(path)) as store:
        said = Memory(store).call("rememberConversation", {
            "session": "c1", "extractor": "rules",
            "messages": [{"speaker": "ann", "text": "I live in Rome."}]})
    turn, derived = said["turns"][0]["id"], said["derived"][0]["id"]
    source = OneStore(str(path))
    try:
        with TestClient(create_ui(source), base_url="http://127.0.0.1") as c:
            alone = c.get(f"/forget?ids={turn}").text
            assert "Forget 1 fact(s)" in alone
            assert "stays; derived from this fact" in alone and derived in alone
            both = c.get(f"/forget?ids={turn}&derived=1").text
            assert "Forget 2 fact(s)" in both and "derived from one that goes" in both
            token = re.search(r'name="token" value="([^"]+)"', both)
            expect = re.search(r'name="expect" value="([^"]+)"', both)
            assert token and expect
            done = c.post("/forget", data={"ids": turn, "derived": "1",
                                           "token": token.group(1),
                                           "expect": expect.group(1)})
            assert "Forgot <b>2</b>" in done.text
            assert c.get(f"/fact?id={derived}").status_code == 404
    finally:
        source.close()


def test_a_form_is_bounded_and_a_method_not_served_is_a_405(client: TestClient) -> None:
    from holomem.api.doors.ui.routes import MAX_FORM

    big = {"ids": "x" * (MAX_FORM + 1)}
    assert client.post("/forget", data=big).status_code == 413
    assert client.delete("/fact?id=ann-rome").status_code == 405
