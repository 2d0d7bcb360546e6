"""The oracle itself, on tiny hand-made worlds whose answers follow from the allocator's source.

If these fail, differential tests built on the oracle prove nothing. A failed build fails
the tests (the fixture raises); nothing is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .oracle import Oracle

DRIVER = "gpu.example.com"
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def oracle() -> Iterator[Oracle]:
    with Oracle() as running:
        yield running


def device_slice(
    name: str,
    devices: list[Obj],
    *,
    node: str = "node-1",
    pool: str = "pool-1",
    count: int = 1,
    generation: int = 1,
) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            "nodeName": node,
            "devices": devices,
        },
    }


def allocated_claim(name: str, *results: Obj) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "x"}}]}},
        "status": {"allocation": {"devices": {"results": list(results)}}},
    }


def result(device: str, pool: str = "pool-1", **extra: Any) -> Obj:
    return {"request": "r", "driver": DRIVER, "pool": pool, "device": device, **extra}


def probe(probe_id: str = "p", **exactly: Any) -> Obj:
    request = {"name": "r", "exactly": {"deviceClassName": "draview-probe", **exactly}}
    return {"id": probe_id, "claim": {"spec": {"devices": {"requests": [request]}}}}


def ask(oracle: Oracle, objects: list[Obj], *probes: Obj, orders: int = 2) -> Obj:
    answer = oracle.ask(
        {"id": "case", "objects": objects, "probes": list(probes) or [probe()], "orders": orders}
    )
    assert answer["id"] == "case"
    assert "error" not in answer, answer
    return answer


def outcomes(answer: Obj, probe_id: str = "p", node: str = "node-1") -> list[str]:
    by_id = {p["id"]: p for p in answer["probes"]}
    return list(by_id[probe_id]["nodes"][node])


ONE_GPU = [device_slice("node-1-gpus", [{"name": "gpu-0"}])]


def test_free_device_is_allocated(oracle: Oracle) -> None:
    answer = ask(oracle, ONE_GPU)
    assert outcomes(answer) == ["ok", "ok"]
    assert answer["probes"][0]["results"] == {
        "node-1": [[{"request": "r", "driver": DRIVER, "pool": "pool-1", "device": "gpu-0"}]]
    }


def test_device_of_an_existing_allocation_is_taken(oracle: Oracle) -> None:
    answer = ask(oracle, [*ONE_GPU, allocated_claim("c", result("gpu-0"))])
    assert outcomes(answer) == ["no", "no"]
    assert "results" not in answer["probes"][0]


def test_admin_access_allocation_leaves_the_device_free(oracle: Oracle) -> None:
    answer = ask(oracle, [*ONE_GPU, allocated_claim("c", result("gpu-0", adminAccess=True))])
    assert outcomes(answer) == ["ok", "ok"]


def test_incomplete_pool_gives_nothing(oracle: Oracle) -> None:
    world = [device_slice("node-1-gpus", [{"name": "gpu-0"}], count=2)]
    assert outcomes(ask(oracle, world)) == ["no", "no"]


def test_duplicate_device_names_make_the_pool_invalid_on_that_node_only(oracle: Oracle) -> None:
    world = [
        device_slice("a", [{"name": "gpu-0"}], count=2),
        device_slice("b", [{"name": "gpu-0"}], count=2),
    ]
    [first, second] = outcomes(ask(oracle, world))
    assert first == second == "invalid: invalid resource pools were encountered"


@pytest.mark.parametrize(("effect", "expected"), [("NoSchedule", "no"), ("None", "ok")])
def test_device_taint(oracle: Oracle, effect: str, expected: str) -> None:
    taint = {"key": "example.com/broken", "value": "yes", "effect": effect}
    world = [device_slice("node-1-gpus", [{"name": "gpu-0", "taints": [taint]}])]
    assert outcomes(ask(oracle, world)) == [expected] * 2


def test_tolerated_taint_does_not_block(oracle: Oracle) -> None:
    taint = {"key": "example.com/broken", "effect": "NoExecute"}
    world = [device_slice("node-1-gpus", [{"name": "gpu-0", "taints": [taint]}])]
    tolerating = probe(tolerations=[{"key": "example.com/broken", "operator": "Exists"}])
    assert outcomes(ask(oracle, world, tolerating)) == ["ok", "ok"]


@pytest.mark.parametrize("api_version", ["resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3"])
@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({"driver": DRIVER, "pool": "pool-1", "device": "gpu-0"}, "no"),
        ({"driver": DRIVER}, "no"),
        ({"device": "gpu-1"}, "ok"),
        ({"driver": "other.example.com"}, "ok"),
    ],
)
def test_device_taint_rule(oracle: Oracle, api_version: str, selector: Obj, expected: str) -> None:
    rule = {
        "apiVersion": api_version,
        "kind": "DeviceTaintRule",
        "metadata": {"name": "maintenance"},
        "spec": {
            "deviceSelector": selector,
            "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"},
        },
    }
    assert outcomes(ask(oracle, [*ONE_GPU, rule])) == [expected] * 2


def partitioned_gpu() -> list[Obj]:
    """One physical GPU with 8Gi, published as a counter slice and two overlapping 8Gi
    partitions in a second slice of the same pool (the 1.35+ layout)."""
    counters = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "node-1-counters"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": "pool-1", "generation": 1, "resourceSliceCount": 2},
            "nodeName": "node-1",
            "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "8Gi"}}}],
        },
    }
    consumes = [{"counterSet": "gpu-0", "counters": {"memory": {"value": "8Gi"}}}]
    partitions = device_slice(
        "node-1-partitions",
        [
            {"name": "gpu-0-part-a", "consumesCounters": consumes},
            {"name": "gpu-0-part-b", "consumesCounters": consumes},
        ],
        count=2,
    )
    return [counters, partitions]


def test_counters_free_allow_a_partition(oracle: Oracle) -> None:
    answer = ask(oracle, partitioned_gpu())
    assert outcomes(answer) == ["ok", "ok"]
    assert answer["probes"][0]["results"]["node-1"][0][0]["device"] == "gpu-0-part-a"


def test_counter_consumed_by_allocated_partition_blocks_its_sibling(oracle: Oracle) -> None:
    world = [*partitioned_gpu(), allocated_claim("c", result("gpu-0-part-a"))]
    assert outcomes(ask(oracle, world)) == ["no", "no"]


def shareable_nic() -> list[Obj]:
    nic = {
        "name": "nic-0",
        "allowMultipleAllocations": True,
        "capacity": {"bandwidth": {"value": "10"}},
    }
    share = result(
        "nic-0", shareID="11111111-2222-3333-4444-555555555555", consumedCapacity={"bandwidth": "4"}
    )
    return [device_slice("node-1-nics", [nic]), allocated_claim("c", share)]


@pytest.mark.parametrize(("bandwidth", "expected"), [("1", "ok"), ("6", "ok"), ("7", "no")])
def test_shareable_device_with_capacity_left(oracle: Oracle, bandwidth: str, expected: str) -> None:
    asking = probe(capacity={"requests": {"bandwidth": bandwidth}})
    answer = ask(oracle, shareable_nic(), asking)
    assert outcomes(answer) == [expected] * 2
    if expected == "ok":
        [[device]] = answer["probes"][0]["results"]["node-1"]
        assert device["consumedCapacity"] == {"bandwidth": bandwidth}
        assert device["shareID"]


def test_shareable_device_without_a_request_takes_the_whole_capacity(oracle: Oracle) -> None:
    assert outcomes(ask(oracle, shareable_nic())) == ["no", "no"]


def test_nodes_implicit_and_labelled(oracle: Oracle) -> None:
    """Nodes named by slices exist without Node objects; Node labels feed node selectors;
    probes see every node, sorted, unless they name some."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-0"}}
    labelled = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-2", "labels": {"rack": "a"}},
    }
    by_selector = device_slice("rack-a", [{"name": "fpga-0"}], pool="rack-a")
    del by_selector["spec"]["nodeName"]
    by_selector["spec"]["nodeSelector"] = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["a"]}]}
        ]
    }
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ignored"}}
    answer = ask(
        oracle,
        [*ONE_GPU, node, labelled, by_selector, pod],
        probe("all"),
        {**probe("one"), "nodes": ["node-2"]},
        orders=1,
    )
    [all_nodes, one_node] = answer["probes"]
    assert all_nodes["nodes"] == {"node-0": ["no"], "node-1": ["ok"], "node-2": ["ok"]}
    assert list(all_nodes["nodes"]) == ["node-0", "node-1", "node-2"]
    assert one_node["nodes"] == {"node-2": ["ok"]}


def test_cel_runtime_error_is_an_error(oracle: Oracle) -> None:
    missing_key = {"cel": {"expression": f"device.attributes['{DRIVER}'].model == 'x'"}}
    answer = ask(oracle, ONE_GPU, probe(selectors=[missing_key]), orders=1)
    [outcome] = outcomes(answer)
    assert outcome.startswith("error: ") and "no such key" in outcome


def test_orders_reverse_and_shuffle(oracle: Oracle) -> None:
    """GatherPools takes resourceSliceCount from the first slice of a pool it meets, so a
    pool whose slices disagree answers by list order; orders 0 and 1 see different ones."""
    world = [
        device_slice("a", [{"name": "gpu-0"}], count=2),
        device_slice("b", [{"name": "gpu-1"}], count=3),
    ]
    answer = ask(oracle, world, orders=4)
    assert outcomes(answer)[:2] == ["ok", "no"]
    assert len(outcomes(answer)) == 4


def test_malformed_cases_are_answered_and_the_oracle_goes_on(oracle: Oracle) -> None:
    cases: list[Obj] = [
        {"id": "bad-version", "objects": [{**ONE_GPU[0], "apiVersion": "resource.k8s.io/v1beta1"}]},
        {"id": "bad-node", "objects": ONE_GPU, "probes": [{**probe(), "nodes": ["nowhere"]}]},
        {"id": "bad-orders", "objects": ONE_GPU, "probes": [probe()], "orders": 0},
        {"id": "good", "objects": ONE_GPU, "probes": [probe()]},
    ]
    answers = oracle.ask_many(cases)
    assert [a["id"] for a in answers] == ["bad-version", "bad-node", "bad-orders", "good"]
    assert all("error" in a for a in answers[:3])
    assert outcomes(answers[3]) == ["ok"]


def test_ask_many_pipelines_in_order(oracle: Oracle) -> None:
    """More data than a pipe buffer holds, both ways: answers come back complete and in order."""
    big_slice = device_slice("big", [{"name": f"dev-{i}"} for i in range(120)])
    cases = [
        {"id": f"c{i}", "objects": [big_slice], "probes": [probe(count=1 + i % 3)]}
        for i in range(150)
    ]
    answers = oracle.ask_many(cases)
    assert [a["id"] for a in answers] == [f"c{i}" for i in range(150)]
    assert all(outcomes(a) == ["ok"] for a in answers)
