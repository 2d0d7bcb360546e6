"""Objects and polling shared by the operator's integration tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import yaml

from kubecluster import KubeCluster

DRIVER = "test.draview.io"


def declare_features(cluster: KubeCluster, node: str, *features: str) -> None:
    """Set a fake node's status.declaredFeatures (none: cleared); there is no kubelet
    here to declare them."""
    body = json.dumps({"status": {"declaredFeatures": list(features) or None}})
    cluster.check("patch", "node", node, "--subresource=status", "--type=merge", "-p", body)


def uniq(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def rslice(
    name: str,
    pool: str,
    devices: list[dict[str, Any]] | None = None,
    *,
    count: int = 1,
    generation: int = 1,
    counters: dict[str, dict[str, str]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "nodeName": "node-1",
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
    }
    if devices is not None:
        spec["devices"] = devices
    if counters:
        spec["sharedCounters"] = [
            {"name": n, "counters": {c: {"value": v} for c, v in cs.items()}}
            for n, cs in counters.items()
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": spec,
    }


def claim(name: str, count: int, ns: str | None = None) -> dict[str, Any]:
    """A claim for `count` devices of the class `test-class`, request `r`."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, **({"namespace": ns} if ns else {})},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "r",
                        "exactly": {
                            "deviceClassName": "test-class",
                            "allocationMode": "ExactCount",
                            "count": count,
                        },
                    }
                ]
            }
        },
    }


def allocate(k: KubeCluster, ns: str, name: str, pool: str, *devices: str) -> None:
    k.create(claim(name, len(devices), ns))
    results = [{"request": "r", "driver": DRIVER, "pool": pool, "device": d} for d in devices]
    patch = {
        "status": {
            "allocation": {
                "devices": {"results": results},
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["node-1"]}
                            ]
                        }
                    ]
                },
            }
        }
    }
    k.check(
        "patch",
        "resourceclaim",
        name,
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(patch),
    )


def slice_status(k: KubeCluster, name: str) -> dict[str, Any] | None:
    r = k.run("get", "resourceslicestatus", name, "-o", "json")
    return json.loads(r.stdout) if r.returncode == 0 else None


def device_states(k: KubeCluster, name: str) -> dict[str, tuple[str, str | None]] | None:
    obj = slice_status(k, name)
    if obj is None:
        return None
    return {
        d["name"]: (d["state"], d.get("stateReason"))
        for d in obj.get("status", {}).get("devices", [])
    }


def wait_states(k: KubeCluster, name: str, want: dict[str, tuple[str, str | None]]) -> None:
    k.wait_for(f"{name} states {want}", lambda: device_states(k, name) == want or None, timeout=30)


def load_examples(k: KubeCluster, files: list[str]) -> None:
    """Apply example files with e2e/load_examples.py (objects, then claims' allocations
    through the status subresource)."""
    script = Path(__file__).resolve().parents[2] / "e2e" / "load_examples.py"
    load = subprocess.run(
        [sys.executable, str(script), "--kubectl", k.kubectl, *files],
        env={**os.environ, "KUBECONFIG": k.kubeconfig},
        capture_output=True,
        text=True,
        check=False,
    )
    assert load.returncode == 0, load.stderr


def probes_config_map(namespace: str, probes: list[dict[str, Any]]) -> dict[str, Any]:
    """The ConfigMap that defines capacity probes for the operator of `namespace`."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "probes",
            "namespace": namespace,
            "labels": {"draview.io/capacity-probes": "true"},
        },
        "data": {"probes.yaml": yaml.safe_dump(probes)},
    }
