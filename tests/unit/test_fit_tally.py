"""fit_search.Tally: the bounds over groups kept as sums and patched group by group
equal the bounds summed anew over the same reaches (what a probe asked again relies on)."""

from __future__ import annotations

import random

from draview.explain.fit_search import Reach, Tally, bounds


def _reach(rng: random.Random) -> Reach:
    def depths() -> list[int]:
        return sorted(rng.sample(range(6), rng.randint(0, 2)))

    return Reach(
        ends=depths() if rng.random() < 0.3 else [],
        goes=depths(),
        stuck=depths(),
        frontier=depths() if rng.random() < 0.1 else [],
        start_goes=rng.random() < 0.95,
    )


def test_a_tally_patched_group_by_group_gives_the_bounds_of_its_reaches() -> None:
    rng = random.Random(7)
    kinds = set()
    for _ in range(300):
        reaches = [_reach(rng) for _ in range(rng.randint(0, 6))]
        tally = Tally(reaches)
        assert tally.bounds() == bounds(reaches)
        for _ in range(8):
            if not reaches:
                break
            i = rng.randrange(len(reaches))
            reaches[i] = _reach(rng)
            tally.put(i, reaches[i])
            got = tally.bounds()
            # bounds() builds a new tally: compare with the sum worked out by hand too.
            assert got == bounds(reaches) == _by_hand(reaches)
            kinds.add((got[1] is None, got[0] == got[1]))
    assert len(kinds) == 3, "the random reaches never gave a range, a point and a budget end"


def _by_hand(reaches: list[Reach]) -> tuple[int, int | None]:
    """bounds as fit.py's docstring reads them, written out on the reaches themselves."""
    inf = 1 << 62
    if not reaches or not all(r.start_goes for r in reaches):
        return 0, 0
    low_stuck = [min((*r.stuck, *r.frontier), default=inf) for r in reaches]
    low_end = [min((*r.ends, *r.frontier), default=inf) for r in reaches]
    lowest = min(sum(low_stuck), min(low_end))
    lowest_shown = 0 if lowest >= inf else lowest
    if any(r.frontier for r in reaches):
        return lowest_shown, None
    max_goes = [max(r.goes, default=-1) for r in reaches]
    best = -1
    if all(r.stuck for r in reaches):
        best = sum(max(r.stuck) for r in reaches)
    never = sum(g < 0 for g in max_goes)
    for r, goes in zip(reaches, max_goes, strict=True):
        if r.ends and (never == 0 or (never == 1 and goes < 0)):
            best = max(best, max(r.ends) + sum(max_goes) - goes)
    return lowest_shown, max(best, lowest_shown)
