"""The recorded disagreements (tests/fixtures/fidelity-cases) asked of the real allocator
again: it must still give the answer their headers record, and draview must agree."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.fidelity.cases import Case, all_cases
from tests.fidelity.harness import (
    claims_case,
    compare_claims,
    compare_devices,
    device_case,
    reduce,
)
from tests.fidelity.oracle import Oracle

from draview.engine.profile import DEFAULT

CASES = all_cases()


@pytest.fixture(scope="module")
def oracle() -> Iterator[Oracle]:
    with Oracle(profile=DEFAULT) as o:
        yield o


def _expected(case: Case) -> str:
    return "yes" if case.allocator == "allocatable" else "no"


@pytest.mark.parametrize("case", [c for c in CASES if c.device], ids=lambda c: c.name)
def test_device_cases(oracle: Oracle, case: Case) -> None:
    answer = oracle.ask(device_case(case.name, case.objects))
    assert "error" not in answer, answer
    assert case.device is not None
    slice_name, device = case.device
    slices = {o["metadata"]["name"]: o for o in case.objects if o.get("kind") == "ResourceSlice"}
    index = [d["name"] for d in slices[slice_name]["spec"]["devices"]].index(device)
    probe = next(p for p in answer["probes"] if p["id"] == f"{slice_name}/{index}")
    assert reduce(probe["nodes"]) == _expected(case), probe
    # Only the recorded device: the oracle's world has no node for a selector to match
    # (it adds label-less nodes for node names only), where draview without Node objects
    # assumes one; the other devices differ by that convention alone.
    differing = [d.device for d in compare_devices(case.objects, answer)]
    assert (slice_name, index) not in differing


@pytest.mark.parametrize("case", [c for c in CASES if c.claim], ids=lambda c: c.name)
def test_claim_cases(oracle: Oracle, case: Case) -> None:
    assert case.claim is not None
    ns, name = case.claim
    pending = [
        o
        for o in case.objects
        if o.get("kind") == "ResourceClaim"
        and (o["metadata"].get("namespace"), o["metadata"]["name"]) == (ns, name)
    ]
    answer = oracle.ask(claims_case(case.name, case.objects, pending))
    assert "error" not in answer, answer
    (probe,) = answer["probes"]
    assert reduce(probe["nodes"]) == _expected(case), probe
    if case.node:
        assert probe["nodes"][case.node][0] == "ok", probe
    diffs, unknown = compare_claims(case.objects, pending, answer)
    assert (diffs, unknown) == ([], 0)
