"""Near-duplicate consolidation finds exactly the pairs an all-pairs comparison finds,
without comparing every pair of current facts (issue 11: the old double loop was
quadratic in the store).
"""

from __future__ import annotations

from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from holomem.api.memory.forget.consolidation import near_duplicate_pairs

word_sets = st.lists(st.tuples(st.sampled_from([None, "s1", "s2"]),
                               st.frozensets(st.sampled_from("abcdefgh"), max_size=6)),
                     max_size=30)


def brute_force(sets: list[tuple[str | None, frozenset[str]]], t: float) -> set[tuple[int, int]]:
    return {(i, j) for (i, (si, a)), (j, (sj, b)) in combinations(enumerate(sets), 2)
            if si == sj and a and b and len(a & b) / len(a | b) >= t}


def components(n: int, pairs: set[tuple[int, int]] | list[tuple[int, int]]) -> list[int]:
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i, j in pairs:
        parent[find(i)] = find(j)
    return [find(i) for i in range(n)]


def same_partition(a: list[int], b: list[int]) -> bool:
    return all((a[i] == a[j]) == (b[i] == b[j]) for i in range(len(a)) for j in range(len(a)))


@settings(max_examples=400, deadline=None)
@given(sets=word_sets, threshold=st.sampled_from([0.0, 0.1, 0.25, 1 / 3, 0.5, 0.6, 2 / 3,
                                                  0.75, 0.8, 0.9, 0.99])
       | st.floats(0.0, 0.999))
def test_the_prefix_join_finds_exactly_the_all_pairs_near_duplicates(
        sets: list[tuple[str | None, frozenset[str]]], threshold: float) -> None:
    found = near_duplicate_pairs(sets, threshold)
    want = brute_force(sets, threshold)
    # Consolidation only needs the groups (connected components) to agree.
    assert same_partition(components(len(sets), found), components(len(sets), want))
    if threshold > 0.0:  # and then the join finds exactly every qualifying pair
        assert sorted(found) == sorted(want)
