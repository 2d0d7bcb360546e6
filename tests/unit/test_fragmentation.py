"""Fragmentation: free counter capacity that no single allocatable device can use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from builders import claim, counter_pool, device, result, rslice, world
from engine_helpers import pool

from draview.api.slices import Device
from draview.api.world import build_world
from draview.cli.dra.main import main
from draview.cli.inputs import read_sources
from draview.engine.fragmentation import capacity_fragments, fragments
from draview.engine.model import EngineOptions
from draview.engine.profile import all_gates_on
from draview.engine.world import compute_world
from draview.quantity import parse_quantity

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def part(name: str, memory: str) -> Device:
    return (
        world(
            *counter_pool(
                "p",
                [device(name, counters={"gpu-0": {"memory": memory}})],
                {"gpu-0": {"memory": "40Gi"}},
            )
        )
        .slices[1]
        .devices[0]
    )


def sets(available: str) -> list[dict[str, object]]:
    return [
        {
            "name": "gpu-0",
            "counters": {"memory": {"total": "40Gi", "consumed": "0", "available": available}},
        }
    ]


def test_free_memory_beyond_the_largest_free_partition_is_unusable() -> None:
    devices = [(part("small", "8Gi"), "Available"), (part("big", "20Gi"), "Unavailable")]
    (found,) = fragments(sets("16Gi"), devices)
    assert (found.counter_set, found.counter, found.device) == ("gpu-0", "memory", "small")
    assert found.largest == parse_quantity("8Gi")
    assert found.unusable == parse_quantity("8Gi")


def test_nothing_is_said_when_one_device_can_take_all_that_is_free() -> None:
    assert fragments(sets("8Gi"), [(part("small", "8Gi"), "Available")]) == []
    assert fragments(sets("0"), [(part("small", "8Gi"), "Available")]) == []


def test_free_capacity_no_allocatable_device_takes_is_all_unusable() -> None:
    (found,) = fragments(sets("16Gi"), [(part("big", "20Gi"), "Unavailable")])
    assert found.largest is None and found.unusable == parse_quantity("16Gi")


def test_describe_says_it_for_the_mig_example(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["describe", "resourceslice", "gpu-node-1-devices", "-f", str(EXAMPLES / "mig-a100.yaml")]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert (
        "gpu-0-counter-set/memory: 16128Mi available, the most one allocatable device takes is "
        "9856Mi (gpu-0-mig-1g-10gb-6-7): 6272Mi no single device can use"
    ) in out
    code = main(
        [
            "describe",
            "resourceslice",
            "gpu-node-1-devices",
            "-f",
            str(EXAMPLES / "mig-a100.yaml"),
            "-o",
            "json",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    memory = next(f for f in doc["fragmentation"] if f["counter"] == "memory")
    assert memory["unusable"] == "6272Mi" and memory["largestDevice"] == "gpu-0-mig-1g-10gb-6-7"


def _pool_fragmentation(example: str, *flags: str) -> list[dict[str, str]]:
    """The `fragmentation` of the example's pools' ResourcePoolStatus, as analyze writes it."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "draview.cli.main",
            "analyze",
            str(EXAMPLES / example),
            *flags,
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    items = json.loads(out.stdout)["items"]
    return [
        f
        for o in items
        if o["kind"] == "ResourcePoolStatus"
        for f in o["status"].get("fragmentation", [])
    ]


def test_the_pool_status_carries_what_describe_says() -> None:
    memory = next(f for f in _pool_fragmentation("mig-a100.yaml") if f.get("counter") == "memory")
    assert memory == {
        "counterSet": "gpu-0-counter-set",
        "counter": "memory",
        "available": "16128Mi",
        "largest": "9856Mi",
        "largestDevice": "gpu-0-mig-1g-10gb-6-7",
        "unusable": "6272Mi",
    }


def test_1_34_names_a_slice_s_own_counter_set() -> None:
    # 1.34 reads counter sets per slice (a slice holds its devices and their sets): the
    # pool status names them "slice/set", and the largest allocatable partition is found
    # in the slice's own set.
    devices = [
        device("small", counters={"gpu-0": {"memory": "8Gi"}}),
        device("big", counters={"gpu-0": {"memory": "20Gi"}}),
    ]
    one = rslice("gpus", devices, counter_sets={"gpu-0": {"memory": "40Gi"}})
    taken = claim("c", result("big"))
    r = pool(one, taken, profile=all_gates_on("1.34"))
    (memory,) = r.status["fragmentation"]
    assert memory == {
        "counterSet": "gpus/gpu-0",
        "counter": "memory",
        "available": "20Gi",
        "largest": "8Gi",
        "largestDevice": "small",
        "unusable": "12Gi",
    }


def test_shareable_devices_left_capacity_no_single_share_can_use() -> None:
    (bandwidth,) = [f for f in _pool_fragmentation("shareable-nic.yaml") if "capacity" in f]
    assert bandwidth == {
        "capacity": "bandwidth",
        "available": "175G",
        "largest": "100G",
        "largestDevice": "nic-0",
        "unusable": "75G",
    }


def test_capacity_left_on_one_device_only_is_no_fragmentation() -> None:
    one = [{"name": "nic-0", "state": "Available", "availableCapacity": {"bandwidth": "10G"}}]
    taken = [{"name": "nic-1", "state": "Allocated", "availableCapacity": {"bandwidth": "5G"}}]
    assert capacity_fragments(one + taken) == []
    (f,) = capacity_fragments(
        [
            *one,
            {
                "name": "nic-2",
                "state": "PartiallyAllocated",
                "availableCapacity": {"bandwidth": "10G"},
            },
        ]
    )
    assert (f.available, f.largest, f.device) == (
        parse_quantity("20G"),
        parse_quantity("10G"),
        "nic-0",  # a tie goes to the first name
    )


def test_describe_reads_the_pool_status_shareable_capacity_included(
    capsys: pytest.CaptureFixture[str],
) -> None:
    nic = ["describe", "resourceslice", "net-node-2-nic.example.com-t5r1n"]
    code = main([*nic, "-f", str(EXAMPLES / "shareable-nic.yaml")])
    out = capsys.readouterr().out
    assert code == 0
    assert (
        "capacity bandwidth: 175G left on the shareable devices, the most left on one is 100G "
        "(nic-0): 75G no single share can use"
    ) in out
    code = main([*nic, "-f", str(EXAMPLES / "shareable-nic.yaml"), "-o", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["fragmentation"] == _pool_fragmentation("shareable-nic.yaml")


def test_a_world_judged_only_to_be_explained_skips_the_figures_alone() -> None:
    # fit judges the world after its copies without them (EngineOptions.fragmentation):
    # everything else a pool's status says stays the same.
    w = build_world(read_sources([str(EXAMPLES / "mig-a100.yaml")]))
    full = compute_world(w, EngineOptions())
    lean = compute_world(w, EngineOptions(fragmentation=False))
    assert any("fragmentation" in r.status for r in full)
    for a, b in zip(full, lean, strict=True):
        assert "fragmentation" not in b.status
        assert {k: v for k, v in a.status.items() if k != "fragmentation"} == b.status
        assert [s.status for s in a.slices] == [s.status for s in b.slices]
