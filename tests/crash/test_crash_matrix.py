"""Crash injection (issue 6, docs/guarantees.md §6): a crash at any crash point loses no
acknowledged write, link or removal, and leaves no partial transaction, for a process
crash and for a power loss (also after a restart), and a crash of the recovery itself, on plain,
encrypted and group-commit stores.

Each run starts ``python -m holomem.crashtest --child`` with ``HOLOMEM_CRASH_AT`` set,
then reopens what it left (after a simulated power cut, for the ``power`` fault), checks
it against the acknowledgements the child reported, and runs fsck (see
:mod:`holomem.crashtest`). The power-loss faults come from a seeded RNG: the seed is
printed, and ``HOLOMEM_CRASH_SEED`` replays it. ``HOLOMEM_CRASH_JOBS`` sets how many
runs go at once.

In CI every registered crash point is crashed at, under every fault and in every
variant, at a fixed sample of its hit counts: two of "first", "second", "third",
"middle" and "last" for the plain store (one for a restart, and for the encrypted and
group-commit stores), the pair moving from point to point so that each kind of hit is
tried at many points, and inside every third transaction. ``pytest --exhaustive`` (or
``HOLOMEM_CRASH_SOAK=1``) runs every one of those hit counts at every point, inside
every transaction, and the long soak (every hit count of every point, every variant).
"""

from __future__ import annotations

import concurrent.futures
import os
import random
from collections.abc import Iterator, Sequence

import pytest

# Importing holomem (the harness does) registers every crash point, the store's too.
from holomem import crashtest as ct
from holomem.log import crashpoints
from tests import exhaustive

SOAK = exhaustive.on("HOLOMEM_CRASH_SOAK")
Pool = concurrent.futures.Executor
#: The hit counts a point is crashed at, by name (see _hits).
KINDS = ("first", "second", "third", "middle", "last")
#: In CI, one transaction in this many is crashed inside.
TX_STRIDE = 3
_seed_env = os.environ.get("HOLOMEM_CRASH_SEED", "")
SEED = int(_seed_env) if _seed_env else random.SystemRandom().getrandbits(32)


@pytest.fixture(scope="module")
def references() -> dict[str, ct.Reference]:
    """One uncrashed, traced run per variant: the acknowledgements and the hit counts."""
    refs = [ct.reference_run(False, "full"), ct.reference_run(True, "full"),
            ct.reference_run(False, "batch")]
    return {r.variant: r for r in refs}


@pytest.fixture(scope="module")
def pool() -> Iterator[Pool]:
    """The processes every matrix of this module runs in (each starts once)."""
    with ct.case_pool() as p:
        yield p


def _run(cases: Sequence[ct.Case], refs: Sequence[ct.Reference],
         pool: Pool) -> list[ct.Result]:
    print(f"crash matrix: {len(cases)} runs, seed {SEED} (HOLOMEM_CRASH_SEED={SEED} replays)")
    results = ct.run_matrix(cases, refs, pool=pool)
    bad = [r for r in results if r.outcome != "pass"]
    assert not bad, ct.table(bad, refs, SEED, 0.0)
    return results


def _hits(total: int, wanted: Sequence[str]) -> list[int]:
    """A subset of :func:`holomem.crashtest.hit_counts` (to keep CI short)."""
    pick = {"first": 1, "second": 2, "third": 3, "middle": (total + 1) // 2, "last": total}
    return sorted({pick[w] for w in wanted if 1 <= pick[w] <= total})


def _rotating(index: int, per_point: int) -> list[str]:
    """The CI sample's kinds of hit for the ``index``-th (point, fault): ``per_point`` of
    :data:`KINDS`, two apart, starting one further along for each, so that every kind is
    tried at many points and under every fault."""
    return [KINDS[(index + 2 * k) % len(KINDS)] for k in range(per_point)]


def _cases(ref: ct.Reference, faults: Sequence[str], wanted: Sequence[str] | None,
           per_point: int) -> list[ct.Case]:
    """Every point under every fault: at ``wanted`` (``None``: every hit count of
    :func:`holomem.crashtest.hit_counts`) in the exhaustive run, at ``per_point`` rotating
    kinds in CI."""
    out = []
    for index, (point, total) in enumerate(sorted(ref.hits.items())):
        for shift, fault in enumerate(faults):
            if SOAK:
                counts = ct.hit_counts(total) if wanted is None else _hits(total, wanted)
            else:
                counts = _hits(total, _rotating(index + shift, per_point))
            out += ct.matrix(ref, faults=[fault], seed=SEED, points=[point], hits=counts)
    return out


def test_every_registered_crash_point_is_reached_by_the_workload(
        references: dict[str, ct.Reference]) -> None:
    for ref in references.values():
        # The child registers what this process registers (the same modules load).
        assert set(ref.registry) == set(crashpoints.REGISTRY), ref.variant
        never = sorted(p for p in ref.registry if ref.hits.get(p, 0) == 0)
        assert never == [], f"{ref.variant}: crash points the workload never reaches"


def test_the_crash_points_issue_6_asks_for_exist() -> None:
    wanted = {
        "journal.frame.write.before", "journal.frame.write.after",  # each frame write
        "fs.fsync.before", "fs.fsync.after", "fs.dirsync.before", "fs.dirsync.after",
        "journal.segment.rotate", "journal.segment.create", "journal.segment.ready",
        "recordfile.write", "recordfile.zero", "recordfile.seal",  # text segment, checkpoint
        "store.compact.written", "journal.generation.switched",  # new generation, switch
        "fs.erase.zeroed", "fs.erase.unlinked",  # zero old files, unlink
        "journal.recovery.truncated",
    }
    assert wanted <= set(crashpoints.REGISTRY)


def test_a_process_crash_at_any_point_loses_no_acknowledged_write(
        references: dict[str, ct.Reference], pool: Pool) -> None:
    ref = references["plain/full"]
    # The chosen hits of every point, and one crash inside every transaction (the hit
    # before each frame write): every kind of step that writes is crashed in,
    # whatever the workload's frame sizes make of the other points' hit numbers.
    # (In CI one transaction in TX_STRIDE.)
    txs = ref.hits["journal.frame.write.before"]
    every_tx = ct.matrix(ref, faults=["crash"], seed=SEED, points=["journal.frame.write.before"],
                         hits=exhaustive.strided(range(1, txs + 1), 1 if SOAK else TX_STRIDE))
    cases = {(c.point, c.hit): c for c in [*_cases(ref, ["crash"], None, 2), *every_tx]}
    results = _run(list(cases.values()), [ref], pool)
    # Crashes landed in every kind of step, and some of them while a write was running.
    assert {r.step_kind for r in results} >= {"open", "remember", "remember_many", "forget",
                                              "compact", "reopen_torn", "close"}
    assert {r.inflight for r in results} >= {"present", "absent"}


def test_a_power_loss_at_any_point_loses_no_acknowledged_write(
        references: dict[str, ct.Reference], pool: Pool) -> None:
    ref = references["plain/full"]
    results = _run(_cases(ref, ["power"], None, 2), [ref], pool)
    # The faults really landed: most runs changed files the crashed process had left.
    landed = [r for r in results if any("paths differ" in n for n in r.notes)]
    assert len(landed) > len(results) // 3, [r.notes for r in results]


def test_a_restart_after_a_crash_then_a_power_loss_loses_no_acknowledged_write(
        references: dict[str, ct.Reference], pool: Pool) -> None:
    """The process crashes; the next one opens the store (recovery), acknowledges more
    writes and the power fails: names and bytes the first one never synced must not
    take the second one's acknowledged writes with them (the bug this issue fixed in
    ``Journal._settle``)."""
    ref = references["plain/full"]
    results = _run(_cases(ref, ["restart"], None, 1), [ref], pool)
    assert all("acknowledged r1, r2, r3" in " ".join(r.notes) for r in results)


def test_an_encrypted_store_survives_both_faults(references: dict[str, ct.Reference],
                                                 pool: Pool) -> None:
    ref = references["encrypted/full"]
    _run(_cases(ref, ct.DEFAULT_FAULTS, ["first", "last"], 1), [ref], pool)


def test_a_group_commit_store_survives_both_faults(
        references: dict[str, ct.Reference], pool: Pool) -> None:
    ref = references["plain/batch"]
    _run(_cases(ref, ct.DEFAULT_FAULTS, ["middle"], 1), [ref], pool)


def test_a_crash_during_recovery_is_survivable_too(references: dict[str, ct.Reference],
                                                   pool: Pool) -> None:
    """Crash the workload where the next open has work to do (finish a purge, erase a
    replaced generation, repair the text segment), then crash that open at every point
    it reaches, and check again."""
    ref = references["plain/full"]
    first = [("store.compact.written", 1), ("fs.erase.zeroed", 1), ("recordfile.zero", 1),
             ("journal.generation.switched", 3)]
    cases = [c for point, hit in first
             for c in ct.matrix(ref, faults=["recover"], seed=SEED, points=[point], hits=[hit])]
    results = _run(cases, [ref], pool)
    assert all("recovery crashes" in r.effect for r in results), [r.effect for r in results]


@pytest.mark.skipif(not SOAK, reason="the soak runs only with --exhaustive "
                    "(or HOLOMEM_CRASH_SOAK=1)")
def test_soak_every_hit_count_of_every_point(references: dict[str, ct.Reference],
                                             pool: Pool) -> None:
    refs = list(references.values())
    cases = [c for ref in refs for c in ct.matrix(ref, faults=ct.FAULTS, seed=SEED, soak=True)]
    _run(cases, refs, pool)
