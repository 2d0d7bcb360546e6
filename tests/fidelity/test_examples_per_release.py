"""The examples, judged for every mirrored profile and checked by that release's own
allocator: where releases answer an example differently, `draview analyze
--kubernetes-version` shows each answer, and each is the answer of that release.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.fidelity.harness import compare_devices, device_case, engine_verdicts
from tests.fidelity.oracle import Oracle
from tests.fidelity.test_profiles import VERIFIED
from tests.fidelity.worlds134 import as_134

from draview.engine.model import EngineOptions
from draview.engine.profile import Profile, all_gates_on, make_profile

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# The examples an API server accepts, in the versions the oracle reads
# (resource.k8s.io/v1; DeviceTaintRules in any version). invalid.yaml holds a quantity no
# API server stores; driver-update.yaml v1beta1 slices.
NAMES = [
    "gpus",
    "shareable-nic",
    "taints",
    "mig-a100",
    "tpu-multihost",
    "cpu-shares",
    "fabric-gpus",
]
KINDS = ("ResourceSlice", "ResourceClaim", "DeviceClass", "DeviceTaintRule", "Node")


def objects(name: str) -> list[dict[str, Any]]:
    """The example's objects, with a Node (its hostname label set, as the kubelet does)
    for every node a slice or device names: both sides then see the same nodes, where
    without Nodes draview would also assume one that matches every selector."""
    out: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all((EXAMPLES / f"{name}.yaml").read_text()):
        out.extend(
            obj for obj in (doc or {}).get("items", [doc]) if doc and obj.get("kind") in KINDS
        )
    named: set[str] = set()
    for obj in out:
        if obj["kind"] == "ResourceSlice":
            spec = obj["spec"]
            named.update(n for n in [spec.get("nodeName")] if n)
            named.update(d["nodeName"] for d in spec.get("devices") or () if d.get("nodeName"))
    known = {o["metadata"]["name"] for o in out if o["kind"] == "Node"}
    if not named and not known:
        named.add("node-1")  # slices for every node (allNodes): one node to allocate on
    out.extend(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
        }
        for n in sorted(named - known)
    )
    return out


@pytest.fixture(scope="module", params=sorted(VERIFIED))
def judged(request: pytest.FixtureRequest) -> Iterator[tuple[Profile, Oracle]]:
    profile, _ = VERIFIED[request.param]
    with Oracle(profile=profile) as oracle:
        yield profile, oracle


@pytest.mark.parametrize("name", NAMES)
def test_each_release_answers_each_example_as_its_allocator_does(
    judged: tuple[Profile, Oracle], name: str
) -> None:
    profile, oracle = judged
    # A 1.34 API server holds counter sets beside their devices (worlds134.py).
    world = as_134(objects(name)) if profile.release == "1.34" else objects(name)
    answer = oracle.ask(device_case(name, world, profile))
    assert "error" not in answer, answer.get("error")
    assert answer["probes"], f"{name}: no device probed"
    diffs = compare_devices(world, answer, profile, oracle)
    assert not diffs, f"{profile.label()} on {name}:\n" + "\n".join(map(str, diffs))


def test_the_releases_do_answer_some_examples_differently() -> None:
    """Otherwise the test above would not show two releases' answers anywhere."""

    def states(name: str, profile: Profile) -> dict[Any, tuple[str, str, str | None]]:
        return engine_verdicts(objects(name), EngineOptions(profile=profile))

    older, newest = make_profile("1.35"), all_gates_on("1.37")
    differ = [n for n in NAMES if states(n, older) != states(n, newest)]
    assert {"taints", "mig-a100", "shareable-nic", "fabric-gpus"} <= set(differ), differ
    # Fractional ranges: 1.36 rounds a quarter core up to a whole one, 1.37 does not.
    assert states("cpu-shares", make_profile("1.36")) != states("cpu-shares", make_profile("1.37"))
