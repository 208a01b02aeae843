"""Guarantee: relate / unrelate follow their documented rules — idempotent, both ends
stored facts of one namespace, other metadata a conflict, bounded per fact and in
metadata, visible as_of / known_at from the moment the store learned the link, and
supersession carries no link over."""

from __future__ import annotations

import pytest

from holomem import ConflictError, InvalidError, LimitError, ManualClock, Memory, NotFoundError
from holomem.api.memory.graph import relations


def _facts(memory: Memory, *ids: str, namespace: list[str] | None = None) -> None:
    for fid in ids:
        memory.remember(f"text {fid}", id=fid, namespace=namespace)


def test_relate_twice_writes_once_and_unrelate_twice_removes_once(memory: Memory) -> None:
    _facts(memory, "a", "b")
    revision = memory.store.revision
    first = memory.relate("a", "b", "cites", {"page": 3})
    assert first.created and memory.store.revision == revision + 1
    again = memory.relate("a", "b", "cites", {"page": 3})
    assert not again.created and again.link == first.link
    assert memory.store.revision == revision + 1  # nothing written
    assert memory.unrelate("a", "b", "cites").removed
    assert not memory.unrelate("a", "b", "cites").removed
    assert memory.store.revision == revision + 2


def test_the_same_link_with_other_metadata_is_a_conflict(memory: Memory) -> None:
    _facts(memory, "a", "b")
    memory.relate("a", "b", "cites", {"page": 3})
    with pytest.raises(ConflictError):
        memory.relate("a", "b", "cites", {"page": 4})
    with pytest.raises(ConflictError):
        memory.relate("a", "b", "cites")
    memory.relate("a", "b", "quotes")  # another relation is another link
    assert [x.relation for x in memory.links("a").links] == ["cites", "quotes"]


def test_links_are_directed_and_listed_by_direction_and_relation(memory: Memory) -> None:
    _facts(memory, "a", "b", "c")
    memory.relate("a", "b", "cites")
    memory.relate("c", "a", "cites")
    memory.relate("a", "c", "causes")
    assert [(x.from_id, x.to_id) for x in memory.links("a").links] == [("a", "b"), ("a", "c")]
    assert [(x.from_id, x.to_id) for x in memory.links("a", direction="in").links] \
        == [("c", "a")]
    assert [(x.from_id, x.to_id, x.relation)
            for x in memory.links("a", "cites", direction="both").links] \
        == [("a", "b", "cites"), ("c", "a", "cites")]
    assert memory.links("a", "never-used").links == []


def test_both_ends_must_be_stored_facts_of_one_namespace(memory: Memory) -> None:
    _facts(memory, "a", "b")
    _facts(memory, "x", namespace=["other"])
    with pytest.raises(NotFoundError):
        memory.relate("a", "missing", "cites")
    with pytest.raises(NotFoundError):
        memory.unrelate("missing", "a", "cites")
    with pytest.raises(InvalidError, match="namespaces"):
        memory.relate("a", "x", "cites")
    with pytest.raises(InvalidError, match="itself"):
        memory.relate("a", "a", "cites")
    memory.store.add_documents([{"id": "doc", "text": "a plain document"}])
    with pytest.raises(NotFoundError):
        memory.relate("a", "doc", "cites")  # a document is not a fact


def test_a_namespace_prefix_hides_facts_outside_it(memory: Memory) -> None:
    _facts(memory, "a", "b", namespace=["u1"])
    _facts(memory, "x", "y", namespace=["u2"])
    memory.relate("a", "b", "cites", namespace=["u1"])
    with pytest.raises(NotFoundError):
        memory.relate("x", "y", "cites", namespace=["u1"])
    with pytest.raises(NotFoundError):
        memory.links("x", namespace=["u1"])
    assert len(memory.links("a", namespace=["u1"]).links) == 1


def test_a_link_is_unknown_before_the_store_learned_it(memory: Memory,
                                                       clock: ManualClock) -> None:
    _facts(memory, "a", "b")
    before = clock.now_ms()
    clock.advance(1000)
    made = memory.relate("a", "b", "cites").link.time
    assert made == before + 1000
    assert memory.links("a", known_at=before).links == []
    assert memory.links("a", as_of=before).links == []
    assert len(memory.links("a", known_at=made).links) == 1
    assert len(memory.links("a", as_of=made).links) == 1
    clock.advance(1000)
    memory.remember("text c", id="c")
    memory.relate("a", "c", "cites")
    # known_at between the two links: the later one (and fact c) are not known yet.
    assert [x.to_id for x in memory.links("a", known_at=made + 500).links] == ["b"]
    with pytest.raises(NotFoundError):
        memory.links("c", known_at=made + 500)


def test_supersession_carries_no_link_over(memory: Memory) -> None:
    memory.remember("alice lives in paris", id="old", subject="alice/city")
    memory.remember("paris is in france", id="paris")
    memory.relate("old", "paris", "mentions")
    memory.remember("alice lives in rome", id="new", subject="alice/city", supersedes=["old"])
    assert memory.links("new", direction="both").links == []
    assert len(memory.links("old").links) == 1  # the old fact keeps its link, as history


def test_links_per_fact_are_bounded(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(relations, "MAX_LINKS_PER_FACT", 3)
    _facts(memory, "hub", "a", "b", "c", "d", "e")
    for x in ("a", "b", "c"):
        memory.relate("hub", x, "cites")
    with pytest.raises(LimitError, match="outgoing"):
        memory.relate("hub", "d", "cites")
    for x in ("a", "b", "c"):
        memory.relate(x, "e", "cites")
    with pytest.raises(LimitError, match="incoming"):
        memory.relate("d", "e", "cites")
    memory.unrelate("hub", "a", "cites")
    memory.relate("hub", "d", "cites")  # room again
    assert len(memory.links("hub").links) == 3


def test_link_metadata_is_bounded(memory: Memory) -> None:
    _facts(memory, "a", "b")
    with pytest.raises(LimitError):
        memory.relate("a", "b", "cites", {"x": "y" * relations.MAX_LINK_METADATA_BYTES})
    with pytest.raises(InvalidError):
        memory.relate("a", "b", "cites", ["not", "a", "dict"])  # type: ignore[arg-type]
