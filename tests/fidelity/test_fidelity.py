"""The allocator is the judge: draview's device states against the real allocator library
on random worlds the API server accepts (tests/fidelity/worldgen.py).

A device is Available or PartiallyAllocated exactly when the allocator hands a claim
pinned to it out on some node in every slice list order; a device whose answer depends on
that order must be reported as such (InconsistentSliceCount). Any disagreement fails and
prints the smallest world that still shows it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from tests.fidelity.harness import compare_devices, device_case
from tests.fidelity.minimize import dump, minimize
from tests.fidelity.oracle import Oracle
from tests.fidelity.worldgen import World, generate

# Enough seeds to meet every generator feature many times (test_worldgen checks how
# often), within about a minute on the 2-core CI machine.
SEEDS = range(int(os.environ.get("DRAVIEW_FIDELITY_SEEDS", "300")))


@pytest.fixture(scope="module")
def oracle() -> Iterator[Oracle]:
    with Oracle() as o:
        yield o


@pytest.fixture(scope="module")
def worlds() -> list[World]:
    return [generate(seed) for seed in SEEDS]


def _report(oracle: Oracle, world: World, device: tuple[str, int]) -> str:
    def still_fails(objects: list[dict]) -> bool:
        names = {o["metadata"]["name"] for o in objects if o.get("kind") == "ResourceSlice"}
        if device[0] not in names:
            return False
        answer = oracle.ask(device_case("min", objects))
        return "error" not in answer and any(
            d.device == device for d in compare_devices(objects, answer)
        )

    def keep(obj: dict) -> bool:
        return obj.get("kind") == "ResourceSlice" and obj["metadata"]["name"] == device[0]

    smallest = minimize(world.objects, still_fails, keep)
    answer = oracle.ask(device_case("min", smallest))
    diffs = [d for d in compare_devices(smallest, answer) if d.device == device]
    return f"seed {world.seed}: {diffs[0] if diffs else device}\n--- minimized world ---\n" + dump(
        smallest
    )


def test_device_states_match_the_allocator(oracle: Oracle, worlds: list[World]) -> None:
    answers = oracle.ask_many([device_case(str(w.seed), w.objects) for w in worlds])
    failures: list[str] = []
    devices = 0
    for world, answer in zip(worlds, answers, strict=True):
        assert "error" not in answer, f"seed {world.seed}: the oracle refused: {answer['error']}"
        devices += len(answer["probes"])
        diffs = compare_devices(world.objects, answer)
        if diffs and len(failures) < 3:
            failures.append(_report(oracle, world, diffs[0].device))
        elif diffs:
            failures.append(f"seed {world.seed}: {len(diffs)} more")
    assert devices > 20 * len(worlds), "the worlds hold too few devices to judge anything"
    assert not failures, "\n\n".join(failures)
