"""The worlds where draview once disagreed with the real allocator, with the allocator's
answer (recorded in each file's header) as the expectation. tests/fidelity/test_cases.py
asks the allocator itself again.

01: without Node objects, the nodes other pools name exist (label-less): on node-1 the
    newer generation's selector matches nothing, so the older generation's device is
    still allocatable there.
02-04: an allNodes or selector pool is gathered by every node, not only by the unknown
    node that matches every selector; so the allocator's first fit on node-2/node-3
    mixes it with that node's own devices, and never meets the device whose selector
    fails at run time.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.fidelity.cases import Case, all_cases

from draview.api.world import build_world
from draview.cli.dra.main import main as kubectl_dra
from draview.engine.world import compute_world

CASES = all_cases()
ALLOCATABLE = {"Available", "PartiallyAllocated"}


def _id(case: Case) -> str:
    return case.name


def test_every_case_has_an_expectation() -> None:
    assert len(CASES) >= 4
    for case in CASES:
        assert case.allocator in ("allocatable", "unallocatable"), case.path
        assert (case.device is None) != (case.claim is None), case.path


@pytest.mark.parametrize("case", [c for c in CASES if c.device], ids=_id)
def test_device_state_is_the_allocators(case: Case) -> None:
    assert case.device is not None
    results = compute_world(build_world(case.objects))
    states = {
        (sr.slice.name, d["name"]): d["state"]
        for r in results
        for sr in r.slices
        for d in sr.status["devices"]
    }
    state = states[case.device]
    assert (state in ALLOCATABLE) == (case.allocator == "allocatable"), state


@pytest.mark.parametrize("case", [c for c in CASES if c.claim], ids=_id)
def test_why_verdict_is_the_allocators(
    case: Case, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert case.claim is not None
    ns, name = case.claim
    code = kubectl_dra(["why", name, "-n", ns, "-f", str(case.path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    want = "Allocatable" if case.allocator == "allocatable" else "Unallocatable"
    assert out["verdict"] == want, out
    if case.node:
        assert case.node in out["summary"], out["summary"]
