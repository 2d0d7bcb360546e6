"""What each scheduler does with fields its cluster's gates leave off, asked of that
release's allocator.

A cluster's API server drops these fields while their gate is off (served.py), so the
profile suites never hand them to a scheduler that cannot use them. But `draview analyze
--kubernetes-version` reads dumps from other clusters, and a scheduler's gates can
differ from its API server's: here the worlds keep binding conditions and compatibility
groups whatever the profile, and draview must still answer as that scheduler would
(BindingConditionsDisabled, CompatibilityGroupsDisabled, dropped groups).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator

import pytest
from tests.fidelity.harness import (
    claims_case,
    compare_claims,
    compare_devices,
    compare_partitions,
    device_case,
    engine_verdicts,
    partition_case,
)
from tests.fidelity.oracle import Oracle
from tests.fidelity.served import served_world
from tests.fidelity.worldgen import World, generate

from draview.engine.model import EngineOptions
from draview.engine.profile import Profile, make_profile

GATED = {"binding-conditions", "binds-to-node", "compatibility-groups", "skip-node-operations"}
SEEDS = range(int(os.environ.get("DRAVIEW_GATED_SEEDS", "200")))

# profile -> the reasons its worlds must show (so the rule is really exercised)
PROFILES: dict[str, tuple[Profile, frozenset[str]]] = {
    "1.35-defaults": (make_profile("1.35"), frozenset({"BindingConditionsDisabled"})),
    "1.34-defaults": (make_profile("1.34"), frozenset({"BindingConditionsDisabled"})),
    "1.36-no-device-status": (
        make_profile("1.36", {"DRAResourceClaimDeviceStatus": False}),
        frozenset({"BindingConditionsDisabled"}),
    ),
    "1.37-defaults": (make_profile("1.37"), frozenset({"CompatibilityGroupsDisabled"})),
    # The experimental allocator (picked for compatibility groups) without optional node
    # operations refuses every device of a slice that skips them.
    "1.37-groups-only": (
        make_profile("1.37", {"DRADeviceCompatibilityGroups": True}),
        frozenset({"OptionalNodeOperationsDisabled", "CompatibilityGroupConflict"}),
    ),
    "1.36-defaults": (make_profile("1.36"), frozenset()),  # groups unknown: dropped
}


@pytest.fixture(scope="module")
def worlds() -> list[World]:
    out = [w for w in (generate(seed) for seed in SEEDS) if w.features & GATED]
    assert len(out) > len(SEEDS) // 4
    return out


@pytest.fixture(scope="module", params=sorted(PROFILES))
def checked(request: pytest.FixtureRequest) -> Iterator[tuple[Profile, frozenset[str], Oracle]]:
    profile, reasons = PROFILES[request.param]
    with Oracle(profile=profile) as oracle:
        yield profile, reasons, oracle


def test_devices_and_partitions(
    checked: tuple[Profile, frozenset[str], Oracle], worlds: list[World]
) -> None:
    profile, reasons, oracle = checked
    worlds = [served_world(w, profile, keep_gated=True) for w in worlds]
    answers = oracle.ask_many([device_case(str(w.seed), w.objects, profile) for w in worlds])
    failures: list[str] = []
    seen: Counter[str] = Counter()
    for world, answer in zip(worlds, answers, strict=True):
        objs = world.objects
        assert "error" not in answer, f"seed {world.seed}: {answer['error']}"
        failures.extend(
            f"seed {world.seed}: {d}" for d in compare_devices(objs, answer, profile, oracle)
        )
        for _, _, reason in engine_verdicts(objs, EngineOptions(profile=profile)).values():
            seen[str(reason)] += 1
    assert reasons <= set(seen), f"{profile.label()}: the worlds never show {reasons - set(seen)}"
    cases = [
        partition_case(str(w.seed), w.objects, w.partition_attributes, profile) for w in worlds
    ]
    answers = oracle.ask_many([case for case, _ in cases])
    for world, (_, expect), answer in zip(worlds, cases, answers, strict=True):
        failures.extend(f"seed {world.seed}: {d}" for d in compare_partitions(expect, answer))
    assert not failures, f"{profile.label()}:\n" + "\n".join(failures[:10])


CLAIM_PROFILES = tuple(sorted(PROFILES))


@pytest.mark.parametrize("name", CLAIM_PROFILES)
def test_pending_claims(name: str, worlds: list[World]) -> None:
    profile, _ = PROFILES[name]
    with Oracle(profile=profile) as oracle:
        _claims_agree(profile, oracle, worlds)


def _claims_agree(profile: Profile, oracle: Oracle, worlds: list[World]) -> None:
    worlds = worlds[:40]
    worlds = [served_world(w, profile, keep_gated=True) for w in worlds]
    answers = oracle.ask_many([claims_case(str(w.seed), w.objects, w.pending) for w in worlds])
    failures: list[str] = []
    for world, answer in zip(worlds, answers, strict=True):
        diffs, unknown = compare_claims(world.objects, world.pending, answer, profile, oracle)
        assert unknown == 0
        failures.extend(f"seed {world.seed}: {d}" for d in diffs)
    assert not failures, f"{profile.label()}:\n" + "\n".join(failures[:10])
