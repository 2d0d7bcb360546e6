"""Proof that the local control plane does DRA for real.

The scheduler allocates claims of pods bound to the fake nodes, honours shared counters of
partitionable devices, and the controller manager answers ResourcePoolStatusRequests.
These tests exercise upstream Kubernetes only; they are the reference the operator's
tests build on.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster

NODE = "node-1"
RESOURCE_V1 = "resource.k8s.io/v1"


class Driver:
    """A unique driver name per test, with the cluster-scoped objects it created."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.suffix = uuid.uuid4().hex[:8]
        self.name = f"gpu-{self.suffix}.example.com"
        self.created: list[tuple[str, str]] = []

    def apply(self, *objects: dict[str, Any]) -> None:
        self.cluster.create(*objects)
        for obj in objects:
            self.created.append((obj["kind"].lower(), obj["metadata"]["name"]))

    def cleanup(self) -> None:
        for kind, name in reversed(self.created):
            self.cluster.run("delete", kind, name, "--ignore-not-found", "--wait=false")


@pytest.fixture
def driver(kube_cluster: KubeCluster) -> Iterator[Driver]:
    d = Driver(kube_cluster)
    try:
        yield d
    finally:
        d.cleanup()


def device_class(driver: Driver, name: str) -> dict[str, Any]:
    return {
        "apiVersion": RESOURCE_V1,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver.name}"'}}]},
    }


def resource_slice(
    driver: Driver,
    name: str,
    pool: str,
    slice_count: int = 1,
    devices: list[dict[str, Any]] | None = None,
    shared_counters: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": driver.name,
        "nodeName": NODE,
        "pool": {"name": pool, "generation": 1, "resourceSliceCount": slice_count},
    }
    if devices is not None:
        spec["devices"] = devices
    if shared_counters is not None:
        spec["sharedCounters"] = shared_counters
    return {
        "apiVersion": RESOURCE_V1,
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": spec,
    }


def claim(name: str, device_class_name: str, selector: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class_name}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {
        "apiVersion": RESOURCE_V1,
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


def pod(name: str, claim_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


def allocation(cluster: KubeCluster, namespace: str, claim_name: str) -> dict[str, Any] | None:
    status = cluster.get("resourceclaim", claim_name, namespace).get("status", {})
    result: dict[str, Any] | None = status.get("allocation")
    return result


def scheduled_node(cluster: KubeCluster, namespace: str, pod_name: str) -> str | None:
    node: str | None = cluster.get("pod", pod_name, namespace)["spec"].get("nodeName")
    return node


def unschedulable(cluster: KubeCluster, namespace: str, pod_name: str) -> bool:
    conditions = cluster.get("pod", pod_name, namespace).get("status", {}).get("conditions", [])
    return any(
        c["type"] == "PodScheduled"
        and c["status"] == "False"
        and c.get("reason") == "Unschedulable"
        for c in conditions
    )


def test_scheduler_allocates_a_claim_for_a_pod_on_a_fake_node(
    kube_cluster: KubeCluster, kube_namespace: str, driver: Driver
) -> None:
    dc = f"gpu-{driver.suffix}"
    driver.apply(
        device_class(driver, dc),
        resource_slice(
            driver,
            f"{dc}-slice",
            pool=NODE,
            devices=[
                {"name": "gpu-0", "attributes": {"model": {"string": "a100"}}},
                {"name": "gpu-1", "attributes": {"model": {"string": "h100"}}},
            ],
        ),
    )
    kube_cluster.create(
        claim("gpu", dc, selector=f'device.attributes["{driver.name}"].model == "h100"'),
        pod("worker", "gpu"),
        namespace=kube_namespace,
    )

    alloc = kube_cluster.wait_for(
        "the claim's allocation", lambda: allocation(kube_cluster, kube_namespace, "gpu")
    )
    [result] = alloc["devices"]["results"]
    assert (result["driver"], result["pool"], result["device"]) == (driver.name, NODE, "gpu-1")
    assert (
        kube_cluster.wait_for(
            "the pod's binding", lambda: scheduled_node(kube_cluster, kube_namespace, "worker")
        )
        == NODE
    )
    reserved = kube_cluster.get("resourceclaim", "gpu", kube_namespace)["status"]["reservedFor"]
    assert [r["name"] for r in reserved] == ["worker"]


def test_shared_counters_of_a_partitionable_device_are_not_overcommitted(
    kube_cluster: KubeCluster, kube_namespace: str, driver: Driver
) -> None:
    dc = f"gpu-{driver.suffix}"
    pool = f"{NODE}-partitioned"

    def partition(name: str, kind: str, memory: str) -> dict[str, Any]:
        return {
            "name": name,
            "attributes": {"kind": {"string": kind}},
            "consumesCounters": [
                {"counterSet": "gpu-0-counters", "counters": {"memory": {"value": memory}}}
            ],
        }

    driver.apply(
        device_class(driver, dc),
        # Since 1.35 a slice holds either devices or shared counters: two slices, one pool.
        resource_slice(
            driver,
            f"{dc}-counters",
            pool=pool,
            slice_count=2,
            shared_counters=[{"name": "gpu-0-counters", "counters": {"memory": {"value": "8Gi"}}}],
        ),
        resource_slice(
            driver,
            f"{dc}-devices",
            pool=pool,
            slice_count=2,
            devices=[
                partition("gpu-0", "whole", "8Gi"),
                partition("gpu-0-part-0", "part", "4Gi"),
                partition("gpu-0-part-1", "part", "4Gi"),
            ],
        ),
    )
    kind = f'device.attributes["{driver.name}"].kind'
    kube_cluster.create(
        claim("whole", dc, selector=f'{kind} == "whole"'),
        pod("whole", "whole"),
        namespace=kube_namespace,
    )
    alloc = kube_cluster.wait_for(
        "the whole device's allocation", lambda: allocation(kube_cluster, kube_namespace, "whole")
    )
    assert [r["device"] for r in alloc["devices"]["results"]] == ["gpu-0"]

    # The whole device used all 8Gi of the counter: a partition would overcommit it.
    kube_cluster.create(
        claim("part", dc, selector=f'{kind} == "part"'),
        pod("part", "part"),
        namespace=kube_namespace,
    )
    kube_cluster.wait_for(
        "the second pod to be unschedulable",
        lambda: unschedulable(kube_cluster, kube_namespace, "part"),
    )
    time.sleep(3)
    assert allocation(kube_cluster, kube_namespace, "part") is None
    assert scheduled_node(kube_cluster, kube_namespace, "part") is None

    # Freeing the whole device makes room: the partition is then allocated.
    kube_cluster.check(
        "delete", "pod", "whole", "-n", kube_namespace, "--force", "--grace-period=0"
    )
    alloc = kube_cluster.wait_for(
        "the partition's allocation once the counter is free",
        lambda: allocation(kube_cluster, kube_namespace, "part"),
        timeout=90,
    )
    assert [r["device"] for r in alloc["devices"]["results"]] in (
        ["gpu-0-part-0"],
        ["gpu-0-part-1"],
    )


def test_controller_manager_answers_a_resource_pool_status_request(
    kube_cluster: KubeCluster, kube_namespace: str, driver: Driver
) -> None:
    dc = f"gpu-{driver.suffix}"
    driver.apply(
        device_class(driver, dc),
        resource_slice(
            driver,
            f"{dc}-slice",
            pool=NODE,
            devices=[{"name": "gpu-0"}, {"name": "gpu-1"}, {"name": "gpu-2"}],
        ),
    )
    kube_cluster.create(claim("gpu", dc), pod("worker", "gpu"), namespace=kube_namespace)
    kube_cluster.wait_for(
        "the claim's allocation", lambda: allocation(kube_cluster, kube_namespace, "gpu")
    )

    request = f"pools-{driver.suffix}"
    driver.apply(
        {
            "apiVersion": "resource.k8s.io/v1alpha3",
            "kind": "ResourcePoolStatusRequest",
            "metadata": {"name": request},
            "spec": {"driver": driver.name},
        }
    )

    def answered() -> dict[str, Any] | None:
        obj = kube_cluster.get("resourcepoolstatusrequest", request)
        status: dict[str, Any] | None = obj.get("status")
        return status if status and status.get("conditions") else None

    status = kube_cluster.wait_for("the request's status", answered)
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions.get("Complete") == "True", status
    assert status["poolCount"] == 1
    [pool] = status["pools"]
    assert (pool["driver"], pool["poolName"], pool.get("nodeName")) == (driver.name, NODE, NODE)
    assert pool["totalDevices"] == 3
    assert pool["allocatedDevices"] == 1
    assert pool["availableDevices"] == 2
