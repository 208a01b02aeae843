"""Recall ranks its candidates and builds its records all at once: the same answers
as one candidate, one record at a time.

``Ranking.rank`` and ``Ranking.results`` (statuses and multipliers over arrays) give
the candidates, in the order, that the one-at-a-time evaluation gives — each
candidate's status by ``FactIndex.status``, its multipliers by ``Ranking.evaluate``,
then a sort by (score descending, search rank) — and ``records.fact_records`` gives
the records ``records.fact_record`` gives one by one; over facts with subjects
superseding one another, validity windows, time to live, future facts, feedback,
confidence, metadata, entities, namespaces, plain documents and forgotten facts,
under recency, feedback, historical weight and context policies, with and without
``known_at``, for every ``history``.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import ManualClock, Memory, MemoryConfig, RecallOptions, Store
from holomem.api.memory.config import (
    ContextConfig,
    Exponential,
    FeedbackConfig,
    Neighbors,
    RecencyConfig,
)
from holomem.api.memory.facts import records
from holomem.api.memory.facts.records import wanted
from holomem.api.memory.recall import rank as recall
from holomem.projections.fusion import top_k

WORDS = ["red", "blue", "green", "cat", "dog"]

fact = st.fixed_dictionaries({
    "words": st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    "subject": st.one_of(st.none(), st.sampled_from(["a", "b", "c"])),
    "valid_from": st.one_of(st.none(), st.integers(0, 120)),
    "valid_to": st.one_of(st.none(), st.integers(0, 120)),
    "ttl_ms": st.one_of(st.none(), st.integers(1, 60)),
    "event_time": st.one_of(st.none(), st.integers(0, 100)),
    "namespace": st.one_of(st.none(), st.just(["u", "1"])),
    "entities": st.one_of(st.none(), st.just(["Ada"])),
    "metadata": st.one_of(st.none(), st.just({"kind": "note"})),
    "feedback": st.sampled_from([None, True, False]),
    "confidence": st.one_of(st.none(), st.just(0.5)),
    "forget": st.booleans(),
})

config = st.fixed_dictionaries({
    "recency": st.sampled_from(["none", RecencyConfig(exponential=Exponential(
        half_life_ms=40))]),
    "feedback": st.sampled_from(["none", FeedbackConfig(weight=0.5)]),
    "historical_weight": st.sampled_from([1.0, 0.5]),
    "context": st.sampled_from(["none", ContextConfig(neighbors=Neighbors(
        weight=0.3, window=1))]),
})


def one_at_a_time(ranking: recall.Ranking, history: str | None = None
                  ) -> tuple[list[recall.Candidate], list[recall.Candidate]]:
    """The ranking as it was computed candidate by candidate."""
    o = ranking.options
    n = max(o.candidate_limit, o.k)
    fused = (ranking.fused() if ranking.policies.context is not None or ranking.embedding
             else ranking.view.best(ranking.query, n, ranking.allowed))
    order = top_k(fused.slots, fused.score, n)
    evaluated = []
    for rank, i in enumerate(order.tolist(), start=1):
        c = ranking.evaluate(fused, i, rank)  # its status by FactIndex.status
        if c is not None:
            evaluated.append(c)
    evaluated.sort(key=lambda c: (-c.score, c.rank))
    keep = o.history if history is None else history
    return [c for c in evaluated if wanted(keep, c.status)][: o.k], evaluated


@settings(max_examples=30, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(facts=st.lists(fact, min_size=1, max_size=20), docs=st.integers(0, 3),
       cfg=config, k=st.integers(1, 6), limit=st.integers(1, 20),
       queries=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
                        min_size=1, max_size=3))
def test_ranking_and_records_at_once_equal_one_at_a_time(
        tmp_path_factory: Any, facts: list[dict[str, Any]], docs: int, cfg: dict[str, Any],
        k: int, limit: int, queries: list[list[str]]) -> None:
    clock = ManualClock(10)
    with Store.open(tmp_path_factory.mktemp("s") / "store", sync="none") as store:
        memory = Memory(store, MemoryConfig(supersession="latest-by-subject", **cfg),
                        clock=clock)
        for i, f in enumerate(facts):
            clock.advance(3)
            fields = {key: v for key, v in f.items()
                      if v is not None and key not in ("forget", "words", "feedback",
                                                       "confidence")}
            if "valid_to" in fields and fields.get("valid_from", -1) >= fields["valid_to"]:
                del fields["valid_to"]
            memory.remember(id=f"f{i}", text=" ".join(f["words"]), **fields)
            if f["feedback"] is not None:
                memory.feedback(f"f{i}", f["feedback"])
            if f["confidence"] is not None:
                memory.set_confidence(f"f{i}", f["confidence"])
        for i in range(docs):
            store.add_document(f"d{i}", f"{WORDS[i]} plain document")
        for i, f in enumerate(facts):
            if f["forget"] and i % 3 == 0:
                memory.forget({"ids": [f"f{i}"]})
        with store.reading() as view:
            live = [int(s) for s in view.live_slots()]
            # Evaluation times on the facts' own start times too (where <= matters).
            starts = sorted({int(view.facts.eff[s]) for s in live if view.facts.is_fact[s]})
            times = [5, 40, 90, 200, *starts[:: max(1, len(starts) // 3)]]
            for at in times:
                for known_at in (None, 25, 60):
                    assert records.fact_records(view, live, at, known_at) == [
                        records.fact_record(view, s, at, known_at) for s in live]
            for words, at in zip(queries, [clock.now_ms(), *times[4:]], strict=False):
                for history in ("current", "all", "historical"):
                    for known_at in (None, 40):
                        o, where = recall.checked(RecallOptions(
                            k=k, candidate_limit=limit, history=history,  # type: ignore[arg-type]
                            known_at=known_at), {})
                        ranking = recall.Ranking(view, memory.policies, " ".join(words), o,
                                                 at, where)
                        chosen, evaluated = one_at_a_time(ranking)
                        assert ranking.rank() == (chosen, evaluated)
                        assert ranking.rank(history="all")[1] == evaluated
                        found, statuses = ranking.found()
                        assert found == [(c.slot, c.score) for c in chosen]
                        assert statuses == [records.fact_record(view, s, at, known_at).status
                                            for s, _ in found]
                        assert recall.recalled(ranking, found, None, statuses) == \
                            recall.recalled(ranking, found, None)


def test_recall_reads_past_its_first_candidates_when_too_few_of_them_are_wanted(
        tmp_path: Any) -> None:
    """The first 3k candidates are examined first; when fewer than k of them pass the
    history filter, all candidate_limit are: here the four best matches are superseded
    (k = 1: the first three candidates hold no current fact)."""
    clock = ManualClock(10)
    with Store.open(tmp_path / "store", sync="none") as store:
        memory = Memory(store, MemoryConfig(supersession="latest-by-subject"), clock=clock)
        for i in range(4):
            clock.advance(3)
            memory.remember(id=f"old{i}", text="alpha alpha alpha", subject=f"s{i}")
        for i in range(4):
            clock.advance(3)
            memory.remember(id=f"new{i}", text="alpha beta gamma delta", subject=f"s{i}")
        with store.reading() as view:
            for history in ("current", "historical"):
                o, where = recall.checked(RecallOptions(
                    k=1, candidate_limit=10, history=history), {})  # type: ignore[arg-type]
                ranking = recall.Ranking(view, memory.policies, "alpha", o, clock.now_ms(),
                                         where)
                chosen, _ = one_at_a_time(ranking)
                assert len(chosen) == 1
                assert ranking.found()[0] == [(c.slot, c.score) for c in chosen]
        got = memory.recall("alpha", k=1, candidate_limit=10)
        assert [r.id for r in got] == ["new0"]
