"""The fast ResourceClaim reader builds exactly what the pydantic models build, or steps aside;
and read_claim answers (claim and message) exactly as the models alone did."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from damage import ODD_VALUES, Edit, damaged, paths_of
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from draview.api.claims import READ_ERRORS, ResourceClaim, allocated_part
from draview.api.common import error_text
from draview.api.fastclaim import read_claim, read_claim_fast
from draview.api.world import iter_objects

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def models_read(obj: dict[str, Any]) -> tuple[ResourceClaim | None, str | None]:
    """read_claim as it was before the fast reader: the models alone."""
    try:
        return ResourceClaim.from_object(obj), None
    except READ_ERRORS as exc:
        return allocated_part(obj), error_text(exc)


def _example_claims() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for obj in iter_objects(d for d in yaml.safe_load_all(path.read_text()) if d):
            if obj.get("kind") == "ResourceClaim":
                out.append((f"{path.name}:{obj['metadata']['name']}", obj))
    return out


EXAMPLE_CLAIMS = _example_claims()


@pytest.mark.parametrize("obj", [o for _, o in EXAMPLE_CLAIMS], ids=[n for n, _ in EXAMPLE_CLAIMS])
def test_every_example_claim_reads_the_same_both_ways(obj: dict[str, Any]) -> None:
    fast = read_claim_fast(copy.deepcopy(obj))
    if fast is not None:
        assert repr(fast) == repr(ResourceClaim.from_object(obj))
    assert repr(read_claim(obj)) == repr(models_read(obj))


def test_most_example_claims_take_the_fast_path() -> None:
    fast = [n for n, o in EXAMPLE_CLAIMS if read_claim_fast(o) is not None]
    # Those left to the models: capacity requests (shareable devices), v1beta1 claims,
    # tolerations and the deliberately broken ones of invalid.yaml.
    assert len(fast) >= len(EXAMPLE_CLAIMS) * 2 // 3, fast
    assert any(n.startswith("gpus.yaml") for n in fast)


# The claim the engine bench generates (bench/engine/generate.py), and every other field
# the fast reader reads, at least once.
BENCH_CLAIM: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {
        "name": "1g-5gb-000000",
        "namespace": "team-015",
        "uid": "f4ea2c12",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": {"app": "x"},
    },
    "spec": {
        "devices": {
            "requests": [
                {
                    "name": "mig",
                    "exactly": {
                        "deviceClassName": "mig.example.com",
                        "selectors": [{"cel": {"expression": "device.attributes['a'].b == 'c'"}}],
                        "allocationMode": "ExactCount",
                        "count": 2,
                        "adminAccess": False,
                        "tolerations": [],
                    },
                },
                {
                    "name": "any",
                    "firstAvailable": [
                        {"name": "big", "deviceClassName": "gpu", "count": 1},
                        {"name": "small", "deviceClassName": "mig", "allocationMode": "All"},
                    ],
                },
            ],
            "constraints": [{"requests": ["mig", "any"], "matchAttribute": "gpu/uuid"}],
        }
    },
    "status": {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "mig", "driver": "gpu", "pool": "node-0", "device": "gpu-1"},
                    {
                        "request": "any/small",
                        "driver": "gpu",
                        "pool": "node-0",
                        "device": "gpu-2",
                        "adminAccess": True,
                        "shareID": "s-1",
                        "consumedCapacity": {"memory": "4Gi", "bw": {"value": "1G"}},
                        "tolerations": [{"key": "k"}],
                    },
                ]
            },
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name"}]}]},
        },
        "reservedFor": [{"resource": "pods", "name": "p-0", "uid": "u"}, "junk"],
    },
}


def test_the_bench_claim_takes_the_fast_path_and_reads_the_same() -> None:
    fast = read_claim_fast(BENCH_CLAIM)
    assert fast is not None
    assert repr(fast) == repr(ResourceClaim.from_object(BENCH_CLAIM))
    assert fast.requests[1].prioritized and fast.results[1].consumed_capacity["bw"] == "1G"


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("spec", "devices", "requests", 0), {"name": "flat", "deviceClassName": "v1beta1"}),
        (("spec", "devices", "requests", 0, "exactly", "tolerations"), [{"key": "k"}]),
        (("spec", "devices", "requests", 0, "exactly", "capacity"), {"requests": {"m": "1"}}),
        (("spec", "devices", "requests", 0, "exactly", "device_class_name"), "python-name"),
        (("spec", "devices", "requests", 0, "exactly", "count"), "2"),
        (("status", "allocation", "devices", "results", 0, "share_id"), "python-name"),
        (("spec", "devices", "constraints", 0, "match_attribute"), "python-name"),
        (("metadata", "name"), 7),
    ],
)
def test_unusual_shapes_go_to_the_models(path: tuple[Any, ...], value: Any) -> None:
    obj = damaged(BENCH_CLAIM, [(path, value, False)])
    assert read_claim_fast(obj) is None
    assert repr(read_claim(obj)) == repr(models_read(obj))


# --- any damage to a claim: the fast reader either agrees or steps aside ---------------

PATHS = [p for p in paths_of(BENCH_CLAIM) if p]
# Keys the models read under another name (populate_by_name) or through a validator.
KEYS = ["admin_access", "share_id", "capacity", "tolerations", "count", "name", "exactly", "x"]
ODD_KEYS = st.sampled_from(KEYS)


def _dict_paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    return [p for p in paths_of(node, prefix) if isinstance(_get(node, p[len(prefix) :]), dict)]


def _get(node: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        node = node[step]
    return node


EDITS = st.one_of(
    st.tuples(st.sampled_from(PATHS), ODD_VALUES, st.booleans()),
    st.tuples(
        st.tuples(st.sampled_from(_dict_paths(BENCH_CLAIM)), ODD_KEYS).map(lambda t: (*t[0], t[1])),
        ODD_VALUES,
        st.just(False),
    ),
)


FIXED_ODD = [None, True, False, 0, 2, 1.5, -1, "", "x", [], {}, {"value": "1"}, [{"name": "x"}]]


def test_every_single_edit_reads_the_same_or_falls_back() -> None:
    """Exhaustive for one edit: each path replaced by each odd value or deleted, and
    each odd key added to each map."""
    edits: list[Edit] = [(p, v, False) for p in PATHS for v in FIXED_ODD]
    edits += [(p, None, True) for p in PATHS]
    edits += [
        ((*p, k), v, False) for p in _dict_paths(BENCH_CLAIM) for k in KEYS for v in FIXED_ODD
    ]
    fast = 0
    for edit in edits:
        obj = damaged(BENCH_CLAIM, [edit])
        claim = read_claim_fast(copy.deepcopy(obj))
        if claim is not None:
            fast += 1
            assert repr(claim) == repr(ResourceClaim.from_object(obj)), edit
        assert repr(read_claim(obj)) == repr(models_read(obj)), edit
    assert fast > len(edits) // 4  # the reader is exercised, not just stepping aside


@settings(max_examples=600)
@given(st.lists(EDITS, max_size=3))
def test_a_damaged_claim_reads_the_same_or_falls_back(edits: list[Edit]) -> None:
    obj = damaged(BENCH_CLAIM, edits)
    fast = read_claim_fast(copy.deepcopy(obj))
    if fast is not None:
        # repr, not ==: 1 == True, but a bool field must not come out as an int.
        assert repr(fast) == repr(ResourceClaim.from_object(obj))
    assert repr(read_claim(obj)) == repr(models_read(obj))


def test_fast_claims_carry_every_model_field_in_order() -> None:
    seen = 0

    def walk(obj: object) -> None:
        nonlocal seen
        if isinstance(obj, BaseModel):
            assert list(obj.__dict__) == list(type(obj).model_fields), type(obj).__name__
            seen += 1
            for value in obj.__dict__.values():
                walk(value)
        elif isinstance(obj, tuple):
            for item in obj:
                walk(item)

    for _, obj in [*EXAMPLE_CLAIMS, ("bench", BENCH_CLAIM)]:
        fast = read_claim_fast(obj)
        if fast is not None:
            walk(fast)
    assert seen > 50


def test_specs_are_shared_only_between_equal_values_of_equal_types() -> None:
    """Claims made from one template share their requests; a spec equal by == but not in
    its types (count 1 and count True, 1 and 1.0) is read on its own."""
    path = ("spec", "devices", "requests", 0, "exactly", "count")
    first, second = (read_claim_fast(damaged(BENCH_CLAIM, [(path, 1, False)])) for _ in "ab")
    assert first is not None and second is not None
    assert first.requests is second.requests
    for odd in (True, 1.0):
        obj = damaged(BENCH_CLAIM, [(path, odd, False)])
        assert read_claim_fast(obj) is None
        assert repr(read_claim(obj)) == repr(models_read(obj))
