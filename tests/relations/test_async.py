"""Guarantee: AsyncMemory's relations calls answer exactly as Memory's."""

from __future__ import annotations

import asyncio

from holomem import AsyncMemory, ManualClock, Store


def test_async_relations_answer_as_memory_does(store: Store, clock: ManualClock) -> None:
    async def main() -> None:
        am = AsyncMemory(store, clock=clock)
        await am.remember("rocket launch delayed", id="a")
        await am.remember("storm over the coast", id="b")
        made = await am.relate("a", "b", "caused_by", {"confidence": 0.9})
        assert made.created and made.link.metadata == {"confidence": 0.9}
        assert await am.links("b", direction="in") == am.memory.links("b", direction="in")
        assert await am.why("rocket launch") == am.memory.why("rocket launch")
        assert [n.id for n in (await am.why("a", 1, "caused_by")).nodes] == ["a", "b"]
        assert (await am.unrelate("a", "b", "caused_by")).removed
        assert (await am.links("a")).links == []

    asyncio.run(main())
