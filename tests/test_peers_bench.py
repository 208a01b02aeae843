"""benchmarks/peers.py (issue 32) at a tiny size: it runs end to end, and its scan for
deleted text reads raw bytes and zstd frames.

Owns: the guarantees of the benchmark's machinery (not its figures: no timing is
asserted). Imports: benchmarks.peers, zstandard.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import zstandard

from benchmarks import peers


def test_scan_finds_a_marker_raw_or_inside_a_zstd_frame_and_says_when_it_cannot_see(
        tmp_path: Path) -> None:
    deleted, kept = peers.marker(0).encode(), peers.marker(1).encode()
    (tmp_path / "raw.bin").write_bytes(b"xx" + deleted + b"yy")
    (tmp_path / "framed.bin").write_bytes(
        b"head" + zstandard.ZstdCompressor().compress(kept * 3) + b"tail")
    got = peers.scan(str(tmp_path))
    assert got["deleted_found_raw"] == 1 and got["kept_markers_found"] == 1
    assert got["zstd_frames"] == 1 and got["verdict"] == "found"
    os.remove(tmp_path / "raw.bin")
    assert peers.scan(str(tmp_path))["verdict"] == "not found"
    os.remove(tmp_path / "framed.bin")
    assert peers.scan(str(tmp_path))["verdict"].startswith("inconclusive")


def test_benchmark_runs_end_to_end_and_reports_every_system_asked(
        capsys: pytest.CaptureFixture[str]) -> None:
    out = peers.main(["--facts", "100", "--queries", "10", "--query-budget", "2",
                      "--only", "holomem,fts5", "--no-locomo"])
    capsys.readouterr()
    table = out["table"]
    assert set(table) == {"holomem", "fts5"}
    ours = table["holomem"]
    assert ours["update_keeps_history"] is True
    assert ours["deleted_text_in_files_after_purge"] == "not found"
    assert all(ours[f"{m}_p50_ms"] is not None for m in peers.MODES)
    assert table["fts5"]["update_keeps_history"] is False
    assert table["fts5"]["vector_p50_ms"] is None  # FTS5 offers lexical search only
    assert "holomem_advantage" in table["fts5"]
    assert out["runs"]["holomem"]["scan"]["kept_markers_found"] == peers.MARKERS // 2
    assert out["locomo_recall_any@10_cat1-4"] == {}
