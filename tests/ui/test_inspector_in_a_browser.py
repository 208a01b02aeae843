"""The inspector in a real browser (Chromium, driven by Playwright) against a real
``holomem ui`` process: what a person can see and do on each page, and that no page
reaches another host, runs a script or logs a console error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from holomem import Memory, Store
from tests.ui.conftest import HOSTILE, Ui, Watched, build_store, start_ui, stop_ui


def only_here(watched: Watched, *expected: int) -> None:
    """Every request the page made went to the inspector, and nothing logged an error
    (but the browser's own notice of an answer whose status the test ``expected``)."""
    watched.errors[:] = [e for e in watched.errors
                         if not any(f"status of {s} " in e for s in expected)]
    assert watched.requests
    assert watched.hosts() == {"127.0.0.1"}, watched.requests
    assert watched.errors == []


def test_the_facts_page_lists_a_page_sorts_it_and_pages_on(ui: Ui,
                                                           browser_page: Watched) -> None:
    page = browser_page.page
    page.goto(f"{ui.url}/?limit=5")
    rows = page.locator("table.facts tbody tr")
    assert rows.count() == 5
    page.click("text=next page »")
    assert page.locator("table.facts tbody tr").count() == 5
    assert "cursor=" in page.url
    page.click("text=« first page")
    page.click("th >> text=Subject")
    subjects = page.locator("table.facts tbody tr td:nth-child(3)").all_inner_texts()
    assert subjects == sorted(subjects)
    # The filters: a namespace, and a status
    page.goto(f"{ui.url}/")
    page.fill("#namespace", "users/ann")
    page.select_option("#status", "current")
    page.click("form.filters button")
    texts = page.locator("table.facts tbody tr td:nth-child(2)").all_inner_texts()
    assert sorted(texts) == ["Ann lives in Rome", "Ann works at the observatory"]
    page.goto(f"{ui.url}/")
    page.fill("#metadata", '{"n": {"$gte": 10}}')
    page.click("form.filters button")
    assert page.locator("table.facts tbody tr").count() == 2
    only_here(browser_page)


def test_the_search_box_runs_recall_and_shows_scores(ui: Ui, browser_page: Watched) -> None:
    page = browser_page.page
    page.goto(f"{ui.url}/")
    page.fill("#q", "Rome")
    page.click("form.filters button")
    first = page.locator("table.facts tbody tr").first
    assert "Ann lives in Rome" in first.inner_text()
    assert float(first.locator("td").first.inner_text()) > 0
    # The fact's page explains the last query
    first.locator("a.fact").click()
    assert page.locator("#explain-q").input_value() == "Rome"
    assert "retrieved" in page.locator("dl.fields").last.inner_text()
    only_here(browser_page)


def test_a_fact_page_shows_its_history_with_the_earlier_version(
        ui: Ui, browser_page: Watched) -> None:
    page = browser_page.page
    page.goto(f"{ui.url}/fact?id=ann-rome")
    assert page.locator("blockquote.text").inner_text() == "Ann lives in Rome"
    chain = page.locator("table.chain tbody tr")
    assert chain.count() == 2
    assert "Ann lives in Paris" in chain.nth(0).inner_text()
    assert "superseded" in chain.nth(0).inner_text()
    assert page.locator("svg.timeline rect.bar").count() == 4  # 2 versions x 2 axes
    assert "same-person" in page.locator("table.links").inner_text()
    assert page.locator("svg.graph circle").count() >= 2
    chain.nth(0).locator("a").click()  # the earlier version's own page
    assert page.locator("blockquote.text").inner_text() == "Ann lives in Paris"
    assert page.locator("p.lead .status").inner_text() == "superseded"
    only_here(browser_page)


def test_moving_as_of_back_makes_the_old_value_current(ui: Ui, browser_page: Watched) -> None:
    page = browser_page.page
    page.goto(f"{ui.url}/fact?id=ann-paris")
    assert page.locator("p.lead .status").inner_text() == "superseded"
    page.fill("#asOf", "2022-06-01")
    page.click("form.moment button")
    assert page.locator("p.lead .status").inner_text() == "current"
    assert "asOf=2022-06-01" in page.url
    # The list answers as of that moment too, and links keep the moment
    page.click("header nav >> text=Facts")
    assert "asOf=2022-06-01" in page.url
    page.fill("#subject", "ann/city")
    page.click("form.filters button")
    rows = {r.split("\t")[1]: r.split("\t")[0] for r in
            page.locator("table.facts tbody tr").all_inner_texts()}
    assert rows == {"Ann lives in Paris": "current", "Ann lives in Rome": "not-yet-valid"}
    # "known at" before the facts were written: nothing was known
    page.fill("#knownAt", "2000-01-01")
    page.click("form.moment button")
    assert page.locator("table.facts").count() == 0
    assert "No facts here" in page.locator("main").inner_text()
    only_here(browser_page)


def test_forget_shows_a_dry_run_then_asks_then_reports(ui: Ui, browser_page: Watched) -> None:
    page = browser_page.page
    page.goto(f"{ui.url}/fact?id=ann-paris")
    page.click("text=Forget this fact…")
    assert "Dry run: nothing has changed yet" in page.locator("main").inner_text()
    assert page.locator("table.removed tbody tr").count() == 1
    page.click("text=include the whole supersession chain")
    removed = page.locator("table.removed tbody tr").all_inner_texts()
    assert len(removed) == 2 and any("Ann lives in Rome" in r for r in removed)
    # Still there: a dry run changes nothing
    page.goto(f"{ui.url}/fact?id=ann-paris")
    assert page.locator("blockquote.text").count() == 1
    page.go_back()
    assert not page.locator("#purge").is_checked()  # purging is a separate choice
    page.click("#confirm")
    assert "Forgot 2 fact(s)" in page.locator("p.done").inner_text()
    page.goto(f"{ui.url}/fact?id=ann-paris")
    assert "no fact" in page.locator("p.error").inner_text()
    only_here(browser_page, 404)


def test_a_cross_site_form_post_is_forbidden(ui: Ui, browser_page: Watched) -> None:
    page = browser_page.page
    # A page of another site (answered by the browser itself: nothing leaves the
    # machine) whose form posts a forget to the inspector, with no token and with one.
    attack = (f'<form id="f" method="post" action="{ui.url}/forget">'
              '<input name="ids" value="ann-work"><input name="token" value="guess">'
              '<input name="expect" value="x"><button id="go">go</button></form>')
    page.route("http://attacker.test/**",
                lambda route: route.fulfill(status=200, content_type="text/html",
                                            body=attack))
    page.goto("http://attacker.test/page")
    with page.expect_response(f"{ui.url}/forget") as answered:
        page.click("#go")
    assert answered.value.status == 403
    page.goto(f"{ui.url}/fact?id=ann-work")
    assert page.locator("blockquote.text").inner_text() == "Ann works at the observatory"


def test_every_page_stays_on_this_server_escapes_text_and_logs_no_error(
        ui: Ui, browser_page: Watched) -> None:
    page = browser_page.page
    dialogs: list[Any] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    for path in ("/", "/?q=Eve", "/fact?id=hostile", "/fact?id=ann-rome&q=Rome",
                 "/store", "/conversations", "/conversations?session=chat-1",
                 "/context?session=planner", "/forget?ids=hostile",
                 "/forget?subject=ann/city", "/?asOf=not-a-time"):
        page.goto(f"{ui.url}{path}")
        assert page.locator("header .brand").inner_text() == "holomem"
    page.goto(f"{ui.url}/fact?id=hostile")
    assert page.locator("blockquote.text").inner_text() == HOSTILE
    assert dialogs == []
    # The 400 page of a bad time names it (the browser notes the status)
    only_here(browser_page, 400)


def test_the_store_page_shows_the_store_and_runs_a_check(ui: Ui, browser_page: Watched) -> None:
    page = browser_page.page
    page.goto(f"{ui.url}/store")
    text = page.locator("main").inner_text()
    for shown in ("facts", "generation", "bytes on disk", "checkpoint", "embedder",
                  "Configuration", "users/ann"):
        assert shown in text
    assert "No check run" in text
    page.click("#run-check")
    assert page.locator(".verdict").inner_text() == "clean"
    only_here(browser_page)


def test_the_conversations_page_shows_turns_and_working_contexts(
        ui: Ui, browser_page: Watched) -> None:
    page = browser_page.page
    page.goto(f"{ui.url}/conversations")
    turns = page.locator("table.turns tbody tr").all_inner_texts()
    assert len(turns) == 2 and "I moved to Rome" in turns[0]
    page.click("text=planner")
    assert '"step": 3' in page.locator("pre.state").inner_text()
    only_here(browser_page)


def test_a_store_another_process_writes_is_followed_and_shows_its_new_writes(
        tmp_path: Path, browser_page: Watched) -> None:
    store = tmp_path / "store"
    build_store(store)
    with Store.open(str(store)) as held:  # this process is the writer meanwhile
        writer = Memory(held)
        ui = start_ui(store)
        try:
            assert "following" in (tmp_path / "ui-store.log").read_text()
            page = browser_page.page
            page.goto(f"{ui.url}/")
            assert page.locator("header .role").inner_text() == "follower"
            writer.call("remember", {"text": "Written while followed", "id": "later"})
            page.goto(f"{ui.url}/fact?id=later")
            assert page.locator("blockquote.text").inner_text() == "Written while followed"
            page.goto(f"{ui.url}/forget?ids=later")
            assert "only reads the store" in page.locator("main").inner_text()
            assert page.locator("#confirm").count() == 0
        finally:
            stop_ui(ui)
    only_here(browser_page)


def test_a_long_chain_is_walked_a_window_at_a_time(tmp_path: Path,
                                                   browser_page: Watched) -> None:
    from holomem.api.doors.ui.pages import MAX_VERSIONS

    store = tmp_path / "chain"
    n = 3 * MAX_VERSIONS
    with Store.open(str(store)) as opened:
        Memory(opened).remember_many([
            {"id": f"v{i:04d}", "text": f"version {i}", "eventTime": 86_400_000 + i,
             **({"supersedes": [f"v{i - 1:04d}"]} if i else {})} for i in range(n)])
    ui = start_ui(store)
    try:
        page = browser_page.page
        page.goto(f"{ui.url}/fact?id=v0000")
        chain = page.locator("table.chain tbody tr")
        assert chain.count() == MAX_VERSIONS
        assert page.locator("svg.timeline rect.bar").count() == 2 * MAX_VERSIONS
        assert "the chain goes on" in page.locator("p.chain-window").inner_text()
        # The last version shown says the chain goes on there; its page shows the next.
        last = chain.nth(MAX_VERSIONS - 1)
        assert "1 more not shown" in last.inner_text()
        last.locator("a.version").click()
        assert page.locator("blockquote.text").inner_text() == f"version {MAX_VERSIONS - 1}"
        texts = page.locator("table.chain tbody tr a.version").all_inner_texts()
        assert len(texts) == MAX_VERSIONS and f"version {MAX_VERSIONS}" in texts
        assert "version 0" not in texts
    finally:
        stop_ui(ui)
    only_here(browser_page)
