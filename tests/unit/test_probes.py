"""Capacity probe definitions (api/probes.py) and answers (explain/probes.py)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from builders import device, device_class, rslice

from draview.api.probes import ProbeSpec, parse_probe, read_configmap, unique, workload_of
from draview.api.slices import ResourceSlice
from draview.api.workload import WorkloadError
from draview.api.world import build_world
from draview.cel import CelEngine
from draview.explain.fit import fit
from draview.explain.probes import answer, failed, pool_relevant, selectors

CLAIM = {
    "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}
}


def configmap(**data: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "draview", "name": "probes"},
        "data": {k: v if isinstance(v, str) else yaml.safe_dump(v) for k, v in data.items()},
    }


def test_a_configmap_key_holds_one_probe_or_a_list() -> None:
    probes, problems = read_configmap(
        configmap(
            **{
                "one.yaml": {"name": "one-gpu", "claim": CLAIM, "minCopies": 2},
                "more.yaml": [
                    {"name": "tmpl", "template": {"namespace": "ml", "name": "mig"}},
                    {"name": "capped", "claim": CLAIM, "maxCopies": 5, "nodeSeries": 3},
                ],
                "notes.txt": "not a probe",
            }
        )
    )
    assert problems == []
    by_name = {p.name: p for p in probes}
    assert set(by_name) == {"one-gpu", "tmpl", "capped"}
    assert by_name["one-gpu"].min_copies == 2 and by_name["one-gpu"].namespace == "default"
    assert by_name["one-gpu"].source == "draview/probes:one.yaml"
    assert by_name["tmpl"].template == ("ml", "mig") and by_name["tmpl"].namespace == "ml"
    assert (by_name["capped"].max_copies, by_name["capped"].node_series) == (5, 3)
    assert by_name["capped"].spec() == {
        "source": "draview/probes:more.yaml",
        "namespace": "default",
        "claim": CLAIM,
        "maxCopies": 5,
        "nodeSeries": 3,
    }


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ({"name": "x", "claim": CLAIM, "template": {"namespace": "a", "name": "b"}}, "exactly one"),
        ({"name": "x"}, "exactly one"),
        ({"name": "Bad_Name", "claim": CLAIM}, "DNS label"),
        ({"name": "x", "claim": CLAIM, "colour": "red"}, "unknown field(s) colour"),
        (
            {"name": "x", "claim": CLAIM, "maxCopies": 0},
            "maxCopies must be an integer of at least 1",
        ),
        ({"name": "x", "claim": CLAIM, "nodeSeries": 101}, "nodeSeries must be at most 100"),
        ({"name": "x", "claim": CLAIM, "minCopies": True}, "minCopies must be an integer"),
        ({"name": "x", "template": {"name": "b"}}, "template needs namespace and name"),
        ({"name": "x", "claim": ["not", "a", "map"]}, "claim must be a ResourceClaim spec"),
        ("just text", "a probe is a map"),
    ],
)
def test_a_bad_definition_says_what_is_wrong(doc: Any, says: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_probe(doc, "ns/cm:k")
    assert says in str(err.value)


def test_a_bad_probe_loses_only_itself() -> None:
    probes, problems = read_configmap(
        configmap(
            **{
                "a.yaml": [{"name": "good", "claim": CLAIM}, {"name": "bad"}],
                "b.yaml": "name: [unclosed",
            }
        )
    )
    assert [p.name for p in probes] == ["good"]
    assert [p.source for p in problems] == ["draview/probes:a.yaml[1]", "draview/probes:b.yaml"]
    assert "exactly one of claim and template" in problems[0].message


def test_a_name_defined_twice_keeps_the_first_source() -> None:
    a = ProbeSpec("p", "ns/a:k", claim=CLAIM)
    b = ProbeSpec("p", "ns/b:k", claim=CLAIM, min_copies=3)
    kept, problems = unique([b, a])
    assert kept == {"p": a}
    assert [str(p) for p in problems] == ["ns/b:k: probe p is already defined in ns/a:k"]


def test_the_workload_of_a_probe() -> None:
    w = workload_of(ProbeSpec("one-gpu", "s", claim=CLAIM, namespace="ml"), None)
    assert (w.kind, w.name, w.namespace) == ("ResourceClaim", "one-gpu", "ml")
    assert w.claims[0].requests[0].choices[0].device_class_name == "gpu.example.com"
    spec = ProbeSpec("t", "s", template=("ml", "mig"), namespace="ml")
    with pytest.raises(WorkloadError, match='resourceclaimtemplate "mig" not found') as err:
        workload_of(spec, None)
    assert err.value.missing
    template = {"metadata": {"name": "mig", "namespace": "ml"}, "spec": {"spec": CLAIM}}
    assert workload_of(spec, template).claims[0].requests[0].name == "gpu"
    with pytest.raises(WorkloadError, match="requests no device"):
        workload_of(ProbeSpec("e", "s", claim={"devices": {}}), None)


def slices_of(objs: list[dict[str, Any]]) -> list[ResourceSlice]:
    return build_world(objs).slices


def test_a_pool_counts_when_a_device_matches_or_fails() -> None:
    objs = [
        device_class(),
        rslice("gpus", [device("gpu-0", model="a100")], pool="node-a", node="node-a"),
        rslice("nics", [device("nic-0")], pool="nics", node="node-a", driver="nic.example.com"),
    ]
    world = build_world(objs)
    w = workload_of(ProbeSpec("p", "s", claim=CLAIM), None)
    sels = selectors(w, {c.name: c for c in world.classes})
    cel = CelEngine()
    by_name = {s.name: s for s in world.slices}
    assert pool_relevant(sels, [by_name["gpus"]], cel)
    assert not pool_relevant(sels, [by_name["nics"]], cel)
    # A selector that fails on a device with a runtime error counts it.
    failing = {
        "devices": {
            "requests": [
                {
                    "name": "x",
                    "exactly": {
                        "deviceClassName": "gpu.example.com",
                        "selectors": [{"cel": {"expression": "device.attributes['x'].y == 1"}}],
                    },
                }
            ]
        }
    }
    w2 = workload_of(ProbeSpec("p", "s", claim=failing), None)
    assert pool_relevant(selectors(w2, {c.name: c for c in world.classes}), [by_name["gpus"]], cel)


def test_the_answer_as_status_and_series() -> None:
    objs = [
        device_class(),
        rslice("a", [device("gpu-0"), device("gpu-1")], pool="node-a", node="node-a"),
        rslice("b", [device("gpu-0")], pool="node-b", node="node-b"),
    ]
    world = build_world(objs)
    w = workload_of(ProbeSpec("p", "s", claim=CLAIM), None)
    got = answer(fit(world, w), "Kubernetes 1.37, default gates", node_series=1)
    assert got.copies == 3 and got.max_copies == 3 and not got.bounded
    assert got.status["nodes"] == [{"name": "node-a", "copies": 2}, {"name": "node-b", "copies": 1}]
    assert got.status["nodeCount"] == 2 and got.status["stopped"] == "unallocatable"
    assert got.per_node == (("node-a", 2),)
    assert got.status["profile"] == "Kubernetes 1.37, default gates"
    bad = failed('deviceclass "x" not found', "p")
    assert bad.copies is None and bad.status == {
        "error": 'deviceclass "x" not found',
        "profile": "p",
    }
