"""List-typed and derived attributes in the claim search, one rule per small world, for
every profile (tests/fidelity/list_cases.py; tests/fidelity/test_list_cases.py asks each
release's allocator the same)."""

from __future__ import annotations

import pytest
from tests.fidelity.list_cases import CASES, PROFILES, ListCase

from draview.api.claims import ResourceClaim
from draview.api.world import build_world
from draview.cel import CelEngine
from draview.engine.model import EngineOptions
from draview.engine.profile import Profile, all_gates_on, make_profile
from draview.engine.world import compute_world
from draview.explain.allocatable import allocatable


def profile_of(key: str) -> Profile:
    release, _, gates = key.partition("-")
    return all_gates_on(release) if gates == "all-gates" else make_profile(release)


def draview_answer(case: ListCase, profile: Profile) -> str:
    world = build_world(case.objects())
    results = compute_world(world, EngineOptions(profile=profile))
    claim = ResourceClaim.from_object(case.pending())
    classes = {c.name: c for c in world.classes}
    found = allocatable(claim, results, classes, (), ["node-a"], CelEngine(), profile=profile)
    if found.detail.startswith("the scheduler aborts"):
        return "error"
    return found.answer


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("key", PROFILES)
def test_each_profile_answers_as_its_allocator(case: ListCase, key: str) -> None:
    assert draview_answer(case, profile_of(key)) == case.answers[key], case.why


def test_every_case_names_every_profile() -> None:
    for case in CASES:
        assert set(case.answers) == set(PROFILES), case.name
    # Each rule makes a difference somewhere: no case answers alike everywhere but two.
    assert sum(len(set(c.answers.values())) > 1 for c in CASES) >= len(CASES) - 3


def test_an_empty_constraint_aborts_the_attempt() -> None:
    """What an API server without DRAConsumableCapacity leaves of a distinctAttribute
    constraint: Allocate refuses it ("empty constraint") in every release."""
    case = CASES[0]
    claim = ResourceClaim.from_object(
        {**case.pending(), "spec": {"devices": {**case.claim, "constraints": [{}]}}}
    )
    world = build_world(case.objects())
    for key in PROFILES:
        profile = profile_of(key)
        results = compute_world(world, EngineOptions(profile=profile))
        classes = {c.name: c for c in world.classes}
        found = allocatable(claim, results, classes, (), ["node-a"], profile=profile)
        assert found.answer == "no" and "constraint #0 is empty" in found.detail, key
