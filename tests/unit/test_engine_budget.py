"""The byte budget: the worst object fits, every device stays, counts stay exact."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from draview.engine.budget import (
    DEFAULT_MAX_OBJECT_BYTES,
    cap_errors,
    fit_object,
    fits,
    object_bytes,
    surely_fits,
)

NS = "n" * 63
CLAIM = "c" * 249  # + "-NNN" = 253 characters, the longest name


def allocation(i: int) -> dict[str, Any]:
    return {
        "claimNamespace": NS,
        "claimName": f"{CLAIM}-{i:03d}",
        "claimUID": f"00000000-0000-0000-0000-{i:012d}",
        "request": "r" * 63,
        "shareID": f"00000000-0000-0000-0000-{i:012d}",
        "capacity": {"example.com/bandwidth": "1Gi"},
    }


def worst_slice(devices: int = 128, shares: int = 300, errors: int = 5000) -> dict[str, Any]:
    return {
        "apiVersion": "draview.io/v1alpha1",
        "kind": "ResourceSliceStatus",
        "metadata": {"name": "s" * 253},
        "spec": {"driver": "d" * 63, "pool": "p", "resourceSliceName": "s" * 253},
        "status": {
            "observedGeneration": 1,
            "devices": [
                {
                    "name": f"dev-{d}",
                    "state": "PartiallyAllocated",
                    "allocations": [allocation(i) for i in range(shares)],
                    "allocationCount": shares,
                    "capacity": {"example.com/bandwidth": "1000Gi"},
                }
                for d in range(devices)
            ],
            "summary": {"totalDevices": devices},
            "poolStatus": {
                "conditions": [],
                "validationErrors": [f"DanglingAllocation: {'x' * 200} {i}" for i in range(errors)],
                "observedSliceCount": 1,
                "expectedSliceCount": 1,
            },
        },
    }


def test_the_worst_slice_fits_and_keeps_every_device() -> None:
    obj = worst_slice()
    assert object_bytes(obj) > 10 * 1024 * 1024  # far over what the API server takes
    fitted = fit_object(obj, DEFAULT_MAX_OBJECT_BYTES)
    size = len(json.dumps(fitted).encode())  # the client's own (non-compact) encoding
    assert size < DEFAULT_MAX_OBJECT_BYTES < 1.5 * 1024 * 1024
    devices = fitted["status"]["devices"]
    assert [d["name"] for d in devices] == [f"dev-{d}" for d in range(128)]
    for d in devices:
        assert d["allocationCount"] == 300  # exact, whatever is listed
        assert d["allocationsTruncated"] is True
        assert len(d["allocations"]) < 300
    assert obj["status"]["devices"][0]["allocations"][299]  # the input is not changed


def test_validation_errors_are_capped_with_a_count_of_the_rest() -> None:
    obj = worst_slice(devices=2, shares=1, errors=20000)
    fitted = fit_object(obj, 200_000)
    errors = fitted["status"]["poolStatus"]["validationErrors"]
    assert object_bytes(fitted) <= 200_000
    assert 0 < len(errors) < 20000
    assert errors[-1] == f"... and {20000 - (len(errors) - 1)} more"
    assert errors[:-1] == obj["status"]["poolStatus"]["validationErrors"][: len(errors) - 1]
    # Allocations go first: with only one per device there was nothing to gain there.
    assert [len(d["allocations"]) for d in fitted["status"]["devices"]] in ([1, 1], [0, 0])


def test_an_object_under_budget_is_returned_as_it_is() -> None:
    obj = worst_slice(devices=2, shares=2, errors=1)
    assert fit_object(obj, DEFAULT_MAX_OBJECT_BYTES) is obj


def test_cap_errors() -> None:
    assert cap_errors(["a", "b", "c"], 1) == ["a", "... and 2 more"]
    assert cap_errors(["a"], 1) == ["a"]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_object_bytes_is_the_size_of_the_request_body(value: Any) -> None:
    """Measured on the text without encoding it (json.dumps escapes all but ASCII),
    and without the encoder's cycle check: the same count as the encoded body."""
    assert object_bytes(value) == len(json.dumps(value).encode())


@given(JSON_VALUES)
def test_what_surely_fits_by_its_compact_size_fits(value: Any) -> None:
    """The writer measures only the compact, key-sorted text it keeps: whatever that
    bound lets through must fit as the request body counts it."""
    compact = len(json.dumps(value, sort_keys=True, separators=(",", ":")))
    tightest = 2 * compact  # the smallest budget the bound lets this value through
    assert surely_fits(compact, tightest) and not surely_fits(compact, tightest - 1)
    assert object_bytes(value) <= tightest


@given(JSON_VALUES, st.integers(-3, 3))
def test_fits_agrees_with_the_request_bodys_size(value: Any, slack: int) -> None:
    """The quick answer (pydantic-core's compact text, twice over) never lets through
    what the client's encoding would take past the budget, at any budget."""
    size = object_bytes(value)
    for budget in (size + slack, 2 * len(json.dumps(value, separators=(",", ":"))) + slack):
        assert fits(value, budget) == (size <= budget)


def test_text_of_no_utf_8_is_measured_as_the_client_escapes_it() -> None:
    value = {"name": "gpu-\ud800"}  # a lone surrogate, as json.loads reads its escape
    size = object_bytes(value)
    assert fits(value, size) and not fits(value, size - 1)
