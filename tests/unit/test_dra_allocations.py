"""Claims rebuilt from the operator's slice statuses judge every pool exactly as the
claims themselves: `why` and `fit` may read a status object a slice instead of every
ResourceClaim (cli/dra/allocations.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from draview.api.status import SLICE_STATUS_KIND
from draview.api.world import build_world
from draview.cli.dra.allocations import claims_from_statuses, statuses_cover
from draview.cli.inputs import read_sources
from draview.engine.model import EngineOptions
from draview.engine.world import world_objects

EXAMPLES = sorted(p for p in (Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


def _not_claims(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o.get("kind") != "ResourceClaim"]


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_statuses_stand_in_for_claims(path: Path) -> None:
    objs = read_sources([str(path)])
    judged = world_objects(build_world(objs))
    statuses = [o for o in judged if o["kind"] == SLICE_STATUS_KIND]
    claims = claims_from_statuses(statuses)
    if path.stem == "invalid":
        # A claim names a device its pool does not have: no device status records it.
        assert claims is None
        return
    assert claims is not None
    again = world_objects(build_world([*_not_claims(objs), *claims]))
    assert again == judged


def test_the_claim_asked_about_is_taken_as_the_api_server_has_it() -> None:
    objs = read_sources([str(EXAMPLES[0].parent / "gpus.yaml")])
    judged = world_objects(build_world(objs))
    statuses = [o for o in judged if o["kind"] == SLICE_STATUS_KIND]
    allocated = next(
        o
        for o in objs
        if o.get("kind") == "ResourceClaim" and (o.get("status") or {}).get("allocation")
    )
    claims = claims_from_statuses(statuses, allocated)
    assert claims is not None and claims[-1] is allocated
    names = [(c["metadata"]["namespace"], c["metadata"]["name"]) for c in claims]
    own = (allocated["metadata"].get("namespace"), allocated["metadata"]["name"])
    assert names.count(own) == 1


def test_a_cut_short_list_cannot_stand_in() -> None:
    status = {
        "kind": SLICE_STATUS_KIND,
        "spec": {"driver": "d", "pool": "p"},
        "status": {
            "devices": [
                {
                    "name": "nic-0",
                    "allocations": [{"claimNamespace": "a", "claimName": "b", "request": "r"}],
                    "allocationCount": 40,
                }
            ]
        },
    }
    assert claims_from_statuses([status]) is None


@pytest.mark.parametrize("seed", range(0, 300, 3))
def test_statuses_stand_in_for_claims_on_random_worlds(seed: int) -> None:
    """The fidelity suite's worlds: stale generations, incomplete and invalid pools,
    shared counters, shareable devices, taints, admin access."""
    from tests.fidelity.worldgen import generate

    world = generate(seed)
    options = EngineOptions(partition_attributes=world.partition_attributes)
    judged = world_objects(build_world(world.objects), options)
    statuses = [o for o in judged if o["kind"] == SLICE_STATUS_KIND]
    claims = claims_from_statuses(statuses)
    if claims is None:  # an allocation no device status records: the claims are read
        return
    again = world_objects(build_world([*_not_claims(world.objects), *claims]), options)
    assert again == judged


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_statuses_cover_the_slices_they_were_made_of_and_no_other(path: Path) -> None:
    objs = read_sources([str(path)])
    for i, o in enumerate(objs):
        if o.get("kind") == "ResourceSlice":
            o.setdefault("metadata", {})["uid"] = f"uid-{i}"
    slices = [o for o in objs if o.get("kind") == "ResourceSlice"]
    judged = world_objects(build_world(objs))
    statuses = [o for o in judged if o["kind"] == SLICE_STATUS_KIND]
    assert statuses_cover(statuses, slices)
    # A slice no status was written for yet (a new one, or an operator that is behind).
    newer = {**slices[0], "metadata": {**slices[0]["metadata"], "name": "made-since"}}
    assert not statuses_cover(statuses, [*slices, newer])
    # One deleted and made again under its name since the status was written.
    again = {**slices[0], "metadata": {**slices[0]["metadata"], "uid": "uid-new"}}
    assert not statuses_cover(statuses, [again, *slices[1:]])
