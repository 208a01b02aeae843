"""The directories the HTTP door creates are durable before it answers: issue 11, item 9.

The tenant pool creates ``DATA/tenants`` (and ``DATA`` itself) on the first request.
A directory's entry lives in its parent, so each parent must be synced up to one that
already existed, or a power cut after the acknowledgement can lose the whole tenant.
The file layer's trace (``HOLOMEM_FAULT_LOG``) of a real server shows each ``mkdir``
followed by a sync of its parent, all before the response was read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import web

from .conftest import headers, start


def test_the_tenants_directory_and_its_new_parents_are_synced_before_the_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = tmp_path / "fs.log"
    monkeypatch.setenv("HOLOMEM_FAULT_LOG", str(trace))
    data = tmp_path / "new" / "data"
    srv = start(data)  # makes DATA's parent (for its log), not DATA
    assert not data.exists()
    try:
        r = web.post(srv.url + "/api/v1/memory/remember", json={"text": "x"},
                     headers=headers("t1"), timeout=30)
        assert r.status_code == 200, r.text
        ops = [tuple(line.split("\t")[:2]) for line in trace.read_text().splitlines()]
    finally:
        srv.stop()
    for new in (data, data / "tenants"):
        made = ops.index(("mkdir", str(new)))
        assert ("dirsync", str(new.parent)) in ops[made + 1:], (new, ops[:12])
