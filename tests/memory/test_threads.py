"""Thread safety (docs/contract.md §4): writers are serialised, readers run concurrently with
writes, and several Memory handles over one Store stay correct.

For about two seconds, writer threads remember single facts and pairs of facts
(``remember_many``, one transaction each) through two Memory handles over one
``sync="batch"`` Store, while reader threads use the other handle. Checked: every
acknowledged remember is found afterwards (also after a reopen); a reader that sees
one member of a pair sees the other; one handle sees the other's writes at once.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

from holomem import ManualClock, Memory, MemoryConfig, Store

DURATION = 2.0
WRITERS = 3
READERS = 3
SEED = 7


def test_concurrent_writers_and_readers(tmp_path: Path) -> None:
    print(f"seed={SEED}")
    path = tmp_path / "store"
    store = Store.open(path, sync="batch")
    clock = ManualClock(1_000)
    config = MemoryConfig(supersession="latest-by-subject")
    handles = [Memory(store, config, clock=clock), Memory(store, config, clock=clock)]
    acked: list[str] = []
    pairs: list[tuple[str, str]] = []  # attempted: both members are known before the write
    acked_lock = threading.Lock()
    errors: list[BaseException] = []
    stop = threading.Event()
    stats = {"pair_checks": 0, "cross_checks": 0, "recalls": 0}

    def writer(w: int) -> None:
        rng = random.Random(SEED * 100 + w)
        n = 0
        try:
            while not stop.is_set():
                n += 1
                mine, other = handles[n % 2], handles[(n + 1) % 2]
                clock.advance(1)
                if rng.random() < 0.5:
                    fid = f"w{w}-{n}"
                    r = mine.remember(id=fid, text=f"writer {w} note {n} single",
                                      subject=f"writer{w}/last" if n % 3 == 0 else None)
                    assert r.created
                    # The other handle sees it immediately.
                    assert other.get(fid) is not None
                    with acked_lock:
                        acked.append(fid)
                        stats["cross_checks"] += 1
                else:
                    a, b = f"p{w}-{n}-a", f"p{w}-{n}-b"
                    marker = f"pairmark{w}x{n}"
                    with acked_lock:
                        pairs.append((a, b))
                    out = mine.remember_many([
                        {"id": a, "text": f"{marker} first half", "metadata": {"pair": marker}},
                        {"id": b, "text": f"{marker} second half", "metadata": {"pair": marker}},
                    ])
                    assert [r.id for r in out] == [a, b] and all(r.created for r in out)
                    assert other.get(a) is not None and other.get(b) is not None
                    with acked_lock:
                        acked.extend([a, b])
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            stop.set()

    def reader(r: int) -> None:
        rng = random.Random(SEED * 1000 + r)
        memory = handles[r % 2]
        try:
            while not stop.is_set():
                with acked_lock:
                    empty = not pairs
                if empty:
                    time.sleep(0.001)
                    continue
                with acked_lock:
                    a, b = pairs[rng.randrange(len(pairs))]
                first, second = (a, b) if rng.random() < 0.5 else (b, a)
                if memory.get(first) is not None:
                    # Committed together: seeing one means the other is there too.
                    assert memory.get(second) is not None, (first, second)
                    with acked_lock:
                        stats["pair_checks"] += 1
                marker = a.split("-")
                query = f"pairmark{marker[0][1:]}x{marker[1]}"
                ids = {x.id for x in memory.recall(query, k=10)}
                assert ids in (set(), {a, b}), (query, ids)
                doc_hits = {h.id for h in store.search_documents(query, k=10)}
                assert doc_hits in (set(), {a, b}), (query, doc_hits)
                with acked_lock:
                    stats["recalls"] += bool(ids)
        except BaseException as exc:
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    threads += [threading.Thread(target=reader, args=(r,)) for r in range(READERS)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + DURATION
    while time.monotonic() < deadline and not stop.is_set():
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive()
    if errors:
        raise errors[0]
    print(stats, f"acked={len(acked)}")
    assert len(acked) > 20 and stats["pair_checks"] > 0 and stats["cross_checks"] > 0
    assert stats["recalls"] > 0

    for handle in handles:
        assert all(handle.get(fid) is not None for fid in acked)
    # Nothing acknowledged is lost, and nothing half-written appears, after a reopen.
    store.close()
    with Store.open(path, sync="batch") as again:
        memory = Memory(again, config, clock=clock)
        assert all(memory.get(fid) is not None for fid in acked)
        live = set(again.ids())
        for a, b in pairs:
            assert (a in live) == (b in live)


def test_two_handles_see_each_others_writes_and_forgets(store: Store,
                                                        clock: ManualClock) -> None:
    config = MemoryConfig(supersession="latest-by-subject")
    one, two = Memory(store, config, clock=clock), Memory(store, config, clock=clock)
    one.remember(id="h1", text="xena lives in sparta", subject="xena/city", valid_from=1)
    assert [r.id for r in two.recall("xena lives")] == ["h1"]
    two.remember(id="h2", text="xena lives in athens", subject="xena/city", valid_from=2)
    assert [r.id for r in one.recall("xena lives")] == ["h2"]
    h1 = one.get("h1")
    assert h1 is not None and h1.superseded_by == ["h2"]
    # Supersession written through one handle takes the other's facts into account.
    one.remember(id="h3", text="xena lives in thebes", subject="xena/city", valid_from=3)
    assert [x.id for x in two.history("h1")] == ["h1", "h2", "h3"]
    two.forget({"ids": ["h3"]})
    assert one.get("h3") is None
    assert [r.id for r in one.recall("xena lives")] == ["h2"]
