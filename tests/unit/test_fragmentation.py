"""Fragmentation: free counter capacity that no single allocatable device can use."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import counter_pool, device, world

from draview.api.slices import Device
from draview.cli.dra.main import main
from draview.engine.fragmentation import fragments
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
    import json

    doc = json.loads(capsys.readouterr().out)
    memory = next(f for f in doc["fragmentation"] if f["counter"] == "memory")
    assert memory["unusable"] == "6272Mi" and memory["largestDevice"] == "gpu-0-mig-1g-10gb-6-7"
