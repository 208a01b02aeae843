"""Answers a new user can trust (issue 11, item 10): no empty facts, feedback reports
the multiplier recall applies, consolidation says why it kept what it was asked to
remove.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holomem import InvalidError, ManualClock, Memory, MemoryConfig, Store
from holomem.api.memory.config import ConsolidationConfig, Duplicates, FeedbackConfig
from holomem.api.memory.forget.consolidation import KEPT_NOT_ALLOWED

WHITESPACE = st.text(alphabet=st.sampled_from([" ", "\t", "\n", "\r", "\u00a0", "\u2003",
                                              "\u3000", "\x0b", "\x0c"]), max_size=8)


@settings(max_examples=50, deadline=None)
@given(text=WHITESPACE)
def test_an_empty_or_whitespace_fact_is_refused_and_nothing_is_written(
        tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    with Store.open(tmp_path_factory.mktemp("e") / "s", sync="none") as store:
        memory = Memory(store)
        with pytest.raises(InvalidError, match="empty"):
            memory.remember(text=text)
        with pytest.raises(InvalidError, match="empty"):
            memory.remember_many([{"text": "fine"}, {"text": text}])
        with pytest.raises(InvalidError) as info:
            memory.call("remember", {"text": text})
        assert info.value.code == "invalid_request"
        assert len(store) == 0


def test_the_document_engine_keeps_accepting_empty_documents(tmp_path: Path) -> None:
    """A Store document is a raw primitive (docs/contract.md §2 sets no minimum, and the
    engine's own tests store empty texts): only facts must say something."""
    with Store.open(tmp_path / "s", sync="none") as store:
        store.add_document("blank", "")
        assert store.get_document("blank") is not None
        assert store.search_documents("anything") == []


@pytest.mark.parametrize("weight", [None, 0.0, 0.5, 1.0])
def test_feedback_reports_the_multiplier_recall_applies(tmp_path: Path,
                                                        weight: float | None) -> None:
    """Regression: after one unhelpful vote the report said only ``usefulness`` (the
    vote balance), which read as a zeroed fact; it now gives the multiplier too."""
    config = MemoryConfig(feedback=FeedbackConfig(weight=weight) if weight is not None
                          else "none")
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, config, clock=ManualClock(1_000_000))
        memory.remember(id="tea", text="Alice likes green tea")
        memory.remember(id="other", text="Alice likes black coffee")
        before = memory.explain("Alice", "tea").score
        report = memory.feedback("tea", helpful=False)
        assert (report.helpful, report.unhelpful) == (0, 1)
        assert report.usefulness == pytest.approx(-1 / 3)  # the balance, unchanged
        want = 1.0 if weight is None else 1.0 + weight * (-1 / 3)
        assert report.multiplier == pytest.approx(want)
        explained = memory.explain("Alice", "tea")
        assert explained.usefulness_multiplier == report.multiplier
        assert explained.score == pytest.approx(before * report.multiplier)
        assert memory.call("feedback", {"id": "tea", "helpful": True})["multiplier"] == (
            memory.explain("Alice", "tea").usefulness_multiplier)


def test_consolidation_says_the_sources_were_kept_without_allow_destructive(
        tmp_path: Path) -> None:
    config = MemoryConfig(consolidation=ConsolidationConfig(
        duplicates=Duplicates(near_threshold=1.0), remove_sources=True))
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, config, clock=ManualClock(1_000_000))
        memory.remember(id="d1", text="Dana swims")
        memory.remember(id="d2", text="dana swims!")
        kept = memory.consolidate(dry_run=False)
        assert kept.removed == [] and kept.sources_kept == KEPT_NOT_ALLOWED
        assert "allow_destructive=True" in kept.sources_kept
        assert memory.get("d1") is not None
        memory.remember(id="d3", text="DANA SWIMS")
        gone = memory.consolidate(dry_run=False, allow_destructive=True)
        assert gone.sources_kept is None and "d3" in gone.removed
        plain = Memory(store, MemoryConfig(consolidation=ConsolidationConfig(
            duplicates=Duplicates())), clock=ManualClock(1_000_000), persist=True)
        plain.remember(id="e1", text="Erin runs")
        plain.remember(id="e2", text="erin runs")
        assert plain.consolidate(dry_run=False).sources_kept is None  # kept by design
