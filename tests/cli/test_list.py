"""``holomem list``: a walk by ``--cursor`` pages, or ``--all``, shows every stored fact
exactly once; ``--namespace``, ``--filter`` (the §4b filter object) and ``--history``
narrow it as the memory API does; a filter that does not parse, or that the grammar
refuses, is exit status 2 with the filter's own message.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.run import holomem, holomem_all, jsonl, make_store

N = 130


def test_paging_by_cursor_and_all_show_every_fact_exactly_once(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    ids = make_store(tmp_path / "s", [
        {"text": f"note {i}", "namespace": ["team", str(i % 3)], "metadata": {"n": i},
         "subject": f"topic{i // 2}"} for i in range(N)])
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        done = holomem("list", store, "--limit", "40", "--json",
                       *(["--cursor", cursor] if cursor else []))
        assert done.returncode == 0, done.stderr
        page = json.loads(done.stdout)
        seen += [f["id"] for f in page["facts"]]
        cursor, pages = page["nextCursor"], pages + 1
        if cursor is None:
            break
    assert seen == ids and pages == 4  # write order, each once

    every, lines, text, one_page = holomem_all([
        ["list", store, "--all", "--limit", "7", "--json"],
        ["list", store, "--all", "--limit", "9", "--jsonl"],
        ["list", store, "--all", "--limit", "11"],
        ["list", store, "--limit", "5", "--jsonl"],
    ])
    assert [f["id"] for f in json.loads(every.stdout)["facts"]] == ids
    assert json.loads(every.stdout)["nextCursor"] is None
    assert [f["id"] for f in jsonl(lines.stdout)] == ids
    assert [line.split(" ", 1)[0] for line in text.stdout.splitlines()] == ids
    assert len(jsonl(one_page.stdout)) == 5
    assert one_page.stderr.startswith("more: pass --cursor ")  # where the walk goes on

    ns, flt, both, nothing = holomem_all([
        ["list", store, "--all", "--namespace", "team/1", "--jsonl"],
        ["list", store, "--all", "--jsonl", "--filter",
         '{"metadata": {"n": {"$gte": 120}}, "$not": {"metadata": {"n": 125}}}'],
        ["list", store, "--all", "--jsonl", "--namespace", '["team", "0"]', "--filter",
         '{"metadata": {"n": {"$lt": 10}}}'],
        ["list", store, "--filter", '{"subject": "no such topic"}'],
    ])
    assert [f["metadata"]["n"] for f in jsonl(ns.stdout)] == list(range(1, N, 3))
    assert [f["metadata"]["n"] for f in jsonl(flt.stdout)] == [
        n for n in range(120, N) if n != 125]
    assert [f["metadata"]["n"] for f in jsonl(both.stdout)] == [0, 3, 6, 9]
    assert nothing.returncode == 0 and nothing.stdout == "(none)\n"


def test_history_selects_by_status(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    make_store(tmp_path / "s", [{"id": "old", "text": "Ann lives in Oslo"},
                                {"id": "new", "text": "Ann lives in Rome",
                                 "supersedes": ["old"]}])
    current, historical, every = holomem_all(
        [["list", store, "--history", h, "--jsonl"] for h in ("current", "historical", "all")])
    assert [f["id"] for f in jsonl(current.stdout)] == ["new"]
    assert [f["id"] for f in jsonl(historical.stdout)] == ["old"]
    assert [f["id"] for f in jsonl(every.stdout)] == ["old", "new"]


def test_a_bad_filter_is_exit_2_with_the_filters_message(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    make_store(tmp_path / "s", [{"text": "one fact", "metadata": {"n": 1}}])
    cases = {
        "{not json": "not JSON",
        "[1, 2]": "not a JSON object",
        '{"metadata": {"n": {"$gt": true}}}': "$gt",
        '{"metadata": {"n": {"$regex": "x"}}}': "$regex",
        '{"colour": "red"}': "colour",
        '{"status": "sometimes"}': "status",
    }
    results = holomem_all(["list", store, "--filter", f] for f in cases)
    results += holomem_all([["recall", store, "fact", "--filter", '{"$or": 3}']])
    for (flt, words), done in zip([*cases.items(), ('{"$or": 3}', "$or")], results,
                                  strict=True):
        assert done.returncode == 2, (flt, done.stderr)
        assert words in done.stderr and "Traceback" not in done.stderr, (flt, done.stderr)
        assert done.stdout == ""
