"""A slice holding both devices and sharedCounters: 1.34's layout, which a 1.35+ API
server no longer accepts but keeps through an upgrade (rules.counter_slices_hold_no_devices).
Each answer below was given by the allocator library of v0.35.10, v0.36.6 and v0.37.2
with every gate on (device probes and the pending claim on the same world), and v0.34.13
for 1.34."""

from __future__ import annotations

from builders import claim, device, device_class, result, rslice, world
from engine_helpers import pool, states

from draview.api.claims import ResourceClaim
from draview.engine.model import EngineOptions
from draview.engine.profile import Profile, all_gates_on, make_profile
from draview.engine.world import compute_world
from draview.explain.allocatable import FITS, UNSCHEDULABLE, allocatable

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}}
CLASS_NAME = "gpu.example.com"
CLASS = device_class(CLASS_NAME)


def _pool() -> tuple[dict[str, object], ...]:
    mixed = rslice(
        "mixed",
        [device("nic-0", counters={"cs": {"c": "1"}}), device("dev-1")],
        count=2,
        counter_sets={"cs": {"c": "1"}},
    )
    return NODE, mixed, rslice("plain", [device("gpu-9")], count=2)


def test_from_135_a_slice_with_counter_sets_hands_out_none_of_its_devices() -> None:
    for release in ("1.35", "1.36", "1.37"):
        r = pool(*_pool(), profile=all_gates_on(release))
        got = states(r)
        assert got["nic-0"] == ("Unavailable", "SliceHoldsCounterSets"), release
        assert got["dev-1"] == ("Unavailable", "SliceHoldsCounterSets"), release
        # The pool stays valid: its other slice's device is allocated.
        assert got["gpu-9"] == ("Available", None), release
        assert not r.errors.all(), release


def test_their_names_are_not_checked_for_duplicates() -> None:
    # buildPool validates the device slices' names only.
    node, mixed, _ = _pool()
    twin = rslice("plain", [device("dev-1")], count=2)
    r = pool(node, mixed, twin, profile=all_gates_on("1.36"))
    assert states(r, "plain")["dev-1"] == ("Available", None)
    assert not r.errors.all()


def test_an_allocation_of_one_still_shows_on_it() -> None:
    r = pool(*_pool(), claim("c", result("dev-1")), profile=all_gates_on("1.36"))
    mixed = next(sr for sr in r.slices if sr.slice.name == "mixed")
    dev = next(d for d in mixed.status["devices"] if d["name"] == "dev-1")
    assert dev["state"] == "Unavailable" and dev["allocationCount"] == 1


def test_134_reads_counters_and_devices_of_one_slice() -> None:
    got = states(pool(*_pool(), profile=all_gates_on("1.34")))
    assert got["nic-0"] == ("Available", None)
    assert got["dev-1"] == ("Available", None)


def test_without_partitionable_devices_the_slice_is_skipped_whole() -> None:
    got = states(pool(*_pool(), profile=make_profile("1.35")))
    assert got["nic-0"] == ("Unavailable", "PartitionableDevicesDisabled")
    assert got["gpu-9"] == ("Available", None)


def test_a_claim_for_two_devices_finds_one_from_135() -> None:
    two = ResourceClaim.from_object(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "two", "namespace": "default"},
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "r", "exactly": {"deviceClassName": CLASS_NAME, "count": 2}}
                    ]
                }
            },
        }
    )

    def outcomes(profile: Profile) -> set[str]:
        w = world(CLASS, *_pool())
        results = compute_world(w, EngineOptions(profile=profile))
        found = allocatable(two, results, {c.name: c for c in w.classes}, profile=profile)
        return {o for o, _ in found.outcomes}

    assert outcomes(all_gates_on("1.36")) == {UNSCHEDULABLE}
    assert outcomes(all_gates_on("1.34")) == {FITS}


def test_pools_that_share_a_debits_list_share_it_in_nanos() -> None:
    # A thousand MIG nodes publish the same consumption maps; the reader interns them
    # and every pool parses each once (validate._SHARED_DEBITS). Their nanos, which the
    # searches read for every device, are worked out once per list as well.
    sets = {"gpu-0": {"memory": "40Gi", "sm": "98"}}
    mig = device("mig-1", counters={"gpu-0": {"memory": "5Gi", "sm": "14"}})
    objs = []
    for n in range(2):
        objs.append(rslice(f"n{n}-counters", None, pool=f"n{n}", count=2, counter_sets=sets))
        objs.append(rslice(f"n{n}-devices", [mig], pool=f"n{n}", count=2))
    results = compute_world(world(*objs), EngineOptions(profile=all_gates_on("1.36")))
    parsed = [r.prepared.parsed for r in results if r.prepared is not None]
    first, second = (p.nanos()["mig-1"] for p in parsed)
    assert first == ((("gpu-0", "memory"), 5 * 2**30 * 10**9), (("gpu-0", "sm"), 14 * 10**9))
    assert parsed[0].needs("mig-1") is parsed[1].needs("mig-1")
    assert first is second
    # A device that debits nothing is not in the map (the searches read it as ()).
    assert parsed[0].nanos().keys() == {"mig-1"}
