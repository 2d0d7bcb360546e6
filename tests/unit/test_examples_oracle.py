"""The engine against the hand-worked expectations in examples/README.md (an oracle
written independently of the engine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from draview.api.world import build_world
from draview.cli.inputs import read_sources
from draview.engine.pool import PoolResult
from draview.engine.world import compute_world

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# pool -> (total, allocated, available, unavailable, error prefixes)
EXPECTED: dict[str, dict[str, tuple[int, int, int, int, tuple[str, ...]]]] = {
    "gpus.yaml": {"node-a": (4, 3, 1, 0, ()), "node-b": (4, 1, 3, 0, ())},
    "mig-a100.yaml": {"gpu-node-1": (26, 2, 3, 21, ())},
    "shareable-nic.yaml": {"net-node-1": (2, 2, 0, 0, ()), "net-node-2": (2, 1, 1, 0, ())},
    "taints.yaml": {"taint-node-1": (5, 1, 2, 2, ()), "taint-node-2": (3, 0, 2, 1, ())},
    "driver-update.yaml": {"npu-node-1": (4, 1, 0, 3, ()), "npu-node-2": (4, 0, 4, 0, ())},
    "invalid.yaml": {
        "dup-pool": (4, 0, 0, 4, ("DuplicateDevice",)),
        "dupset-pool": (2, 0, 0, 2, ("DuplicateCounterSet",)),
        "counter-pool": (3, 1, 0, 2, ("CounterNotFound",)),
        "quantity-pool": (2, 0, 0, 2, ("InvalidQuantity",)),
        "dangling-pool": (2, 1, 1, 0, ("DanglingAllocation",)),
        "overcommit-pool": (3, 2, 0, 1, ("CounterOvercommitted",)),
        "shared-overcommit-pool": (2, 1, 1, 0, ("CapacityOvercommitted",)),
        "healthy-pool": (3, 1, 2, 0, ()),
    },
}


def _pools(name: str) -> dict[str, PoolResult]:
    world = build_world(read_sources([str(EXAMPLES / name)]))
    return {r.key[1]: r for r in compute_world(world)}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_pool_summaries_match_the_worked_examples(name: str) -> None:
    pools = _pools(name)
    for pool, (total, alloc, avail, unavail, prefixes) in EXPECTED[name].items():
        s = pools[pool].status["summary"]
        got = (
            s["totalDevices"],
            s["allocatedDevices"],
            s["availableDevices"],
            s["unavailableDevices"],
        )
        assert got == (total, alloc, avail, unavail), pool
        assert {e.split(":")[0] for e in pools[pool].errors.all()} == set(prefixes), pool


def test_kep_tpu_example_mistakes_are_caught() -> None:
    (pool,) = _pools("tpu-multihost-kep.yaml").values()
    assert pool.status["summary"]["unavailableDevices"] == 7
    assert {e.split(":")[0] for e in pool.errors.allocator} == {"CounterSetNotFound"}
    assert all(
        d.get("stateReason") == "PoolInvalid" for sr in pool.slices for d in sr.status["devices"]
    )


def test_mig_memory_arithmetic() -> None:
    (pool,) = _pools("mig-a100.yaml").values()
    memory = pool.status["counterSets"][0]["counters"]["memory"]
    assert memory == {"total": "40Gi", "consumed": "24832Mi", "available": "16128Mi"}
