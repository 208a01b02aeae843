"""Memory against a reference model of docs/contract.md §3 (Hypothesis state machine).

The model keeps, for each live fact, its subject, effective time (``valid_from``,
else its ingest time) and ingest order, and reads status straight from §3 with
the latest-by-subject policy: a fact is not-yet-valid before it begins, superseded
once a later fact of its slot (later in effect order) has begun, current otherwise;
``known_at=T`` sees only the facts ingested by T; a forgotten fact is gone as if it
had never been stored (removing the newest makes its predecessor current again,
removing a middle one resurrects nothing). After every step the Memory's statuses
(recall with history "all", recall of current facts per subject, get) must match
the model's at several evaluation times, also after a reopen or a compaction.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    multiple,
    rule,
)

from holomem import ManualClock, Memory, MemoryConfig, Store

SUBJECTS = ["s/a", "s/b", None]
STARTS = [None, 10, 20, 30, 40]  # None: the fact begins at its ingest time
EVAL = [0, 10, 15, 20, 25, 30, 40, 1_000, 10_000]
CLOCK_START = 5  # ingest times land among the valid_from values, on purpose


@dataclass(frozen=True)
class Fact:
    id: str
    subject: str | None
    valid_from: int | None
    ingest: int
    order: int

    @property
    def eff(self) -> int:
        return self.valid_from if self.valid_from is not None else self.ingest

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.eff, self.ingest, self.order)


class Model:
    def __init__(self) -> None:
        self.facts: dict[str, Fact] = {}

    def status(self, f: Fact, t: int, known_at: int | None = None) -> str:
        if t < f.eff:
            return "not-yet-valid"
        if f.subject is not None:
            for g in self.facts.values():
                if (g.subject == f.subject and g.key > f.key and g.eff <= t
                        and (known_at is None or g.ingest <= known_at)):
                    return "superseded"
        return "current"

    def known(self, known_at: int | None) -> list[Fact]:
        return [f for f in self.facts.values() if known_at is None or f.ingest <= known_at]


class MemoryMachine(RuleBasedStateMachine):
    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="holomem-sm-")
        self.store = Store.open(self.dir + "/store", sync="none")
        self.clock = ManualClock(CLOCK_START)
        self.memory = Memory(self.store, MemoryConfig(supersession="latest-by-subject"),
                             clock=self.clock)
        self.model = Model()
        self.n = 0
        self.order = 0
        self.inputs: dict[str, dict[str, object]] = {}

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _input(self, subject: str | None, start: int | None) -> dict[str, object]:
        self.n += 1
        fid = f"f{self.n}"
        return {"id": fid, "text": f"fact number{self.n}", "subject": subject,
                "valid_from": start}

    def _stored(self, x: dict[str, object], ingest: int) -> None:
        self.order += 1
        fid = str(x["id"])
        self.inputs[fid] = x
        self.model.facts[fid] = Fact(fid, x["subject"], x["valid_from"],  # type: ignore[arg-type]
                                     ingest, self.order)

    @rule(target=ids, subject=st.sampled_from(SUBJECTS), start=st.sampled_from(STARTS),
          tick=st.sampled_from([0, 0, 3, 10]))
    def remember(self, subject: str | None, start: int | None, tick: int) -> str:
        self.clock.advance(tick)
        x = self._input(subject, start)
        r = self.memory.remember(**x)
        assert r.created and r.ingest_time == self.clock.now_ms()
        self._stored(x, r.ingest_time)
        return str(x["id"])

    @rule(target=ids, a=st.tuples(st.sampled_from(SUBJECTS), st.sampled_from(STARTS)),
          b=st.tuples(st.sampled_from(SUBJECTS), st.sampled_from(STARTS)))
    def remember_pair(self, a: tuple[str | None, int | None],
                      b: tuple[str | None, int | None]) -> object:
        self.clock.advance(1)
        xs = [self._input(*a), self._input(*b)]
        out = self.memory.remember_many(xs)
        assert [r.id for r in out] == [x["id"] for x in xs]
        for x, r in zip(xs, out, strict=True):
            self._stored(x, r.ingest_time)
        return multiple(*(str(x["id"]) for x in xs))

    @rule(fid=ids)
    def retry(self, fid: str) -> None:
        if fid not in self.model.facts:
            return
        revision = self.store.revision
        self.clock.advance(2)
        r = self.memory.remember(**self.inputs[fid])
        assert not r.created and r.ingest_time == self.model.facts[fid].ingest
        assert self.store.revision == revision

    @rule(fid=consumes(ids))
    def forget(self, fid: str) -> None:
        self.clock.advance(1)
        report = self.memory.forget({"ids": [fid]})
        assert report.removed == ([fid] if fid in self.model.facts else [])
        self.model.facts.pop(fid, None)

    @rule(fid=ids)
    def forget_dry_run(self, fid: str) -> None:
        revision = self.store.revision
        report = self.memory.forget({"ids": [fid]}, dry_run=True)
        assert report.removed == ([fid] if fid in self.model.facts else [])
        assert self.store.revision == revision

    @rule(compact=st.sampled_from([False, False, False, True]))
    def reopen(self, compact: bool) -> None:
        """Replay from the log gives the same state (the invariants check it); so does
        a compaction (a new generation keeps every live fact and link, with its
        known-at time). Compaction syncs, so it is drawn less often."""
        if compact:
            self.store.compact()
        revision = self.store.revision
        self.store.close()
        self.store = Store.open(self.dir + "/store", sync="none")
        self.memory = Memory(self.store, MemoryConfig(supersession="latest-by-subject"),
                             clock=self.clock)
        assert self.store.revision == revision

    @rule(known_step=st.integers(min_value=0, max_value=40))
    def check_known_at(self, known_step: int) -> None:
        known_at = CLOCK_START + known_step
        for t in EVAL:
            got = {r.id: r.status for r in self.memory.recall(
                "fact", k=1000, history="all", as_of=t, known_at=known_at)}
            want = {f.id: self.model.status(f, t, known_at)
                    for f in self.model.known(known_at)}
            assert got == want, (t, known_at)

    @invariant()
    def statuses_match_the_model(self) -> None:
        for t in EVAL:
            got = {r.id: r.status for r in self.memory.recall("fact", k=1000, history="all",
                                                              as_of=t)}
            want = {f.id: self.model.status(f, t) for f in self.model.facts.values()}
            assert got == want, t
            for subject in SUBJECTS[:2]:
                current = [r.id for r in self.memory.recall("fact", k=1000, as_of=t,
                                                            subject=subject)]
                assert current == [f for f, s in want.items()
                                   if s == "current" and self.model.facts[f].subject == subject]
                assert len(current) <= 1

    @invariant()
    def get_reports_status_now(self) -> None:
        now = self.clock.now_ms()
        assert sorted(self.store.ids()) == sorted(self.model.facts)
        for f in self.model.facts.values():
            rec = self.memory.get(f.id)
            assert rec is not None and rec.status == self.model.status(f, now)


MemoryMachine.TestCase.settings = settings(
    max_examples=30, stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestMemoryAgainstModel = MemoryMachine.TestCase
