"""The CLI prints a store whose facts, links and ingest times lie at the far ends of the
accepted range (±(2**62 - 1) ms, years datetime cannot hold): every reading command
exits 0 and states such a time as its number of milliseconds."""

from __future__ import annotations

from pathlib import Path

from holomem import ManualClock, Memory, MemoryConfig, Store
from tests.cli.run import holomem_all

FAR = 2**62 - 1


def test_reading_commands_print_times_beyond_the_calendar(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with Store.open(store) as s:
        memory = Memory(s, MemoryConfig(supersession="latest-by-subject"),
                        clock=ManualClock(FAR))  # ingest and link times at the end too
        memory.remember(id="a", text="Alice lives in Oslo", subject="Alice",
                        entities=["Alice"], valid_from=-FAR, valid_to=FAR, event_time=-FAR)
        memory.remember(id="b", text="Alice moved", entities=["Alice"], event_time=FAR)
        memory.relate("a", "b", "caused_by")
    path = str(store)
    commands = [["recall", path, "Alice"], ["get", path, "a"], ["list", path],
                ["history", path, "a"], ["profile", path, "Alice"], ["links", path, "a"],
                ["why", path, "a"]]
    for command, done in zip(commands, holomem_all(commands), strict=True):
        assert done.returncode == 0, (command, done.stderr)
        assert "Traceback" not in done.stderr, (command, done.stderr)
        if command[0] in ("recall", "get", "list", "history", "profile", "links"):
            assert f"{FAR} ms since the epoch" in done.stdout, (command, done.stdout)
        if command[0] == "profile":
            assert f"Alice lives in Oslo (since {-FAR} ms since the epoch)" in done.stdout
