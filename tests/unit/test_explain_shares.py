"""Shares of a device given back while the search backtracks: what each release's
allocator still counts afterwards (rules.empty_shares_stay, shares_skip_counter_check).
The worlds below are the smallest form of the 10,000-world run's seed 2051; each answer
was given by the allocator library of v0.35.10, v0.36.6 and v0.37.2 (every gate on)."""

from __future__ import annotations

from typing import Any

from builders import DRIVER, device, device_class, rslice, world

from draview.api.claims import ResourceClaim
from draview.engine.model import EngineOptions
from draview.engine.profile import Profile, all_gates_on
from draview.engine.world import compute_world
from draview.explain.allocatable import FITS, UNSCHEDULABLE, allocatable

CLASS = device_class("nic.example.com")
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}}


def _pool(capacity: dict[str, str] | None) -> tuple[dict[str, Any], ...]:
    # A shareable NIC taking the whole of a one-unit counter, then a plain device.
    nic = device("nic-0", shareable=True, counters={"cs": {"c": "1"}}, capacity=capacity, id="0")
    devices = rslice("devices", [nic, device("dev-1", id="1")], count=2)
    counters = rslice("counters", None, count=2, counter_sets={"cs": {"c": "1"}})
    return devices, counters


def _claim() -> ResourceClaim:
    # r1 takes nic-0 first; r2 wants nic-0 too, which distinctAttribute refuses beside
    # r1's nic-0: the search gives r1's share back, takes dev-1 for r1, then shares
    # nic-0 with r2, whose counter the first share reserved.
    wants_nic = {"cel": {"expression": f"device.attributes['{DRIVER}'].id == '0'"}}
    requests = [
        {"name": "r1", "exactly": {"deviceClassName": "nic.example.com"}},
        {"name": "r2", "exactly": {"deviceClassName": "nic.example.com", "selectors": [wants_nic]}},
    ]
    return ResourceClaim.from_object(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {
                "devices": {
                    "requests": requests,
                    "constraints": [{"distinctAttribute": f"{DRIVER}/id"}],
                }
            },
        }
    )


def _outcomes(profile: Profile, capacity: dict[str, str] | None) -> set[str]:
    w = world(CLASS, NODE, *_pool(capacity))
    results = compute_world(w, EngineOptions(profile=profile))
    found = allocatable(_claim(), results, {c.name: c for c in w.classes}, profile=profile)
    return {o for o, _ in found.outcomes}


def test_a_share_without_capacity_given_back_still_counts_as_in_use_on_135() -> None:
    # 1.35's experimental allocator neither returns the counter a share reserved nor
    # forgets a share without capacity: the second share of nic-0 skips the counter
    # check and fits.
    assert _outcomes(all_gates_on("1.35"), None) == {FITS}


def test_a_share_with_capacity_given_back_is_forgotten_on_135() -> None:
    # The share that consumed capacity is taken back, so the next one checks the
    # counter the first left reserved, and finds it spent.
    assert _outcomes(all_gates_on("1.35"), {"bw": "10G"}) == {UNSCHEDULABLE}


def test_from_136_a_share_given_back_returns_its_counter() -> None:
    for release in ("1.36", "1.37"):
        assert _outcomes(all_gates_on(release), None) == {FITS}
        assert _outcomes(all_gates_on(release), {"bw": "10G"}) == {FITS}
