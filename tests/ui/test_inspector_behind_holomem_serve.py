"""``holomem serve`` serves the inspector at ``/ui/`` for its tenants, behind its API
key: a browser signs in once (a cookie holding a digest, never the key), each tenant's
pages show that tenant's store, and a form from another site is refused while the
server's own pages may post."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient

from holomem.api.doors.http.server import create_app
from holomem.api.doors.ui.routes import COOKIE, MAX_FORM

KEY = "ui-test-key-0123456789"
BASE = "http://127.0.0.1:8080"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(str(tmp_path / "data"), api_key=KEY, port=8080)
    with TestClient(app, base_url=BASE) as c:
        for tenant, text in (("t1", "Ann lives in Rome"), ("t2", "Bob likes tea")):
            answer = c.post("/api/v1/memory/remember", json={"text": text, "id": "f"},
                            headers={"x-api-key": KEY, "x-tenant-id": tenant})
            assert answer.status_code == 200, answer.text
        yield c


def test_the_pages_need_the_key_and_a_browser_signs_in_once(client: TestClient) -> None:
    assert client.get("/ui/").status_code == 401
    assert "needs the API key" in client.get("/ui/").text
    assert client.post("/ui/login", data={"key": "wrong"}).status_code == 401
    assert client.post("/ui/login", data={"key": "k" * (MAX_FORM + 1)}).status_code == 413
    signed = client.post("/ui/login", data={"key": KEY}, follow_redirects=False)
    assert signed.status_code == 303
    cookie = signed.cookies[COOKIE]
    assert KEY not in cookie
    assert "httponly" in signed.headers["set-cookie"].lower()
    assert "samesite=strict" in signed.headers["set-cookie"].lower()
    assert client.get("/ui/?tenant=t1").status_code == 200
    client.cookies.clear()
    client.cookies.set(COOKIE, "forged")
    assert client.get("/ui/").status_code == 401


def test_each_tenants_pages_show_its_own_store(client: TestClient) -> None:
    headers = {"x-api-key": KEY}
    one = client.get("/ui/?tenant=t1", headers=headers).text
    two = client.get("/ui/?tenant=t2", headers=headers).text
    assert "Ann lives in Rome" in one and "Bob likes tea" not in one
    assert "Bob likes tea" in two and "Ann lives in Rome" not in two
    # links keep the tenant
    assert 'href="/ui/fact?tenant=t1&amp;id=f"' in one
    assert "no store yet" in client.get("/ui/store?tenant=nobody", headers=headers).text
    assert client.get("/ui/?tenant=../etc", headers=headers).status_code == 400


def test_a_form_from_another_site_is_refused_and_the_servers_own_pages_may_post(
        client: TestClient) -> None:
    headers = {"x-api-key": KEY}
    dry = client.get("/ui/forget?tenant=t1&ids=f", headers=headers).text
    token = re.search(r'name="token" value="([^"]+)"', dry)
    expect = re.search(r'name="expect" value="([^"]+)"', dry)
    assert token and expect
    form = {"tenant": "t1", "ids": "f", "token": token.group(1), "expect": expect.group(1)}
    refused = client.post("/ui/forget", data=form,
                          headers={**headers, "origin": "http://attacker.test"})
    assert refused.status_code == 403
    # the JSON API still refuses its own origin: only the pages may use it
    api = client.post("/api/v1/memory/get", json={"id": "f"},
                      headers={**headers, "origin": BASE, "x-tenant-id": "t1"})
    assert api.status_code == 403
    done = client.post("/ui/forget", data=form, headers={**headers, "origin": BASE})
    assert done.status_code == 200 and "Forgot <b>1</b>" in done.text
    assert "Ann lives in Rome" not in client.get("/ui/?tenant=t1", headers=headers).text
