"""`fit` against the real allocator placing copies one after another (e2e/oracle/fit.go),
for every profile draview mirrors, on random worlds and on the examples.

Each random world's pending claims are asked one at a time and in pairs (the claims of
one Pod); the oracle plays out each node alone and the cluster under several placement
policies (tests/fidelity/fit_harness.py). Where draview says placement or the walk order
decides, its range is the answer: every run the allocator plays must lie in it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.fidelity.fit_harness import (
    BUDGET,
    COUNT,
    compare_fit,
    fit,
    fit_case,
    workload_of,
    workloads,
)
from tests.fidelity.oracle import Oracle
from tests.fidelity.served import served_world
from tests.fidelity.test_examples_per_release import NAMES, objects
from tests.fidelity.test_profiles import VERIFIED
from tests.fidelity.worldgen import generate
from tests.fidelity.worlds134 import as_134

from draview.api.world import build_world, iter_objects
from draview.engine.model import EngineOptions
from draview.engine.profile import Profile
from draview.engine.rules import rules_for

ROOT = Path(__file__).resolve().parents[2]
# Worlds per profile. Where the allocator walks pools in map order (1.34, 1.35) every
# walk order of every copy is explored, several times the work: fewer worlds there.
SEEDS = int(os.environ.get("DRAVIEW_FIT_SEEDS", "16"))
MAP_ORDER_SEEDS = int(os.environ.get("DRAVIEW_FIT_MAP_ORDER_SEEDS", "6"))

# Pods found answered differently before a fix, asked on every profile whatever SEEDS
# holds. Seed 10 (1.34, every gate): an admin-access claim beside a claim for a counter
# tile, where one walk order fits and the other does not; seed 17: the claims of one Pod
# taking the same device, one of them with admin access; seed 180 (found by
# bench/fidelity): a Pod whose first claim gets a node-local device and whose second
# gets one with a node selector of two terms, which the allocator cannot write. Found
# by bench/fidelity --fit: seed 2798 (1.37), a Pod whose claim for all devices of its
# class matches 41 on one node (the limit of 32 holds per claim); seed 1734 (1.36), a
# claim for all devices where a node with no view of any pool gathers an incomplete pool
# through its counter slice, and the attempt aborts there; seed 20566 (1.36), a Pod
# whose second copy takes a NIC the first had to pass over, once the first took a share
# of a shareable NIC (a node whose pools hold a shareable device is searched from the
# start for each copy).
FOUND: tuple[tuple[int, tuple[str, ...]], ...] = (
    (10, ("inspect", "tolerant")),
    (17, ("either", "inspect-2")),
    (180, ("together", "either")),
    (2798, ("all", "inspect-2")),
    (1734, ("all",)),
    (20566, ("mixed", "bw")),
)


@pytest.fixture(scope="module", params=sorted(VERIFIED))
def judged(request: pytest.FixtureRequest) -> Iterator[tuple[str, Profile, Oracle]]:
    profile, _ = VERIFIED[request.param]
    with Oracle(profile=profile) as oracle:
        yield request.param, profile, oracle


def _seeds(profile: Profile) -> range:
    return range(SEEDS if rules_for(profile).pools_sorted else MAP_ORDER_SEEDS)


def test_fit_counts_match_the_allocator(judged: tuple[str, Profile, Oracle]) -> None:
    _, profile, oracle = judged
    cases: list[dict[str, Any]] = []
    asked: list[tuple[int, list[dict[str, Any]], list[dict[str, Any]]]] = []
    for seed in _seeds(profile):
        world = served_world(generate(seed), profile)
        for k, claims in enumerate(workloads(world.pending)):
            cases.append(fit_case(f"{seed}-{k}", world.objects, claims))
            asked.append((seed, world.objects, claims))
    answers = oracle.ask_many(cases)
    failures: list[str] = []
    placed = ranges = 0
    for (seed, objs, claims), answer in zip(asked, answers, strict=True):
        got = compare_fit(objs, claims, answer, profile)
        placed += got.copies
        ranges += got.ranges
        names = [c["metadata"]["name"] for c in claims]
        failures.extend(f"seed {seed} {names}: {d}" for d in got.differences)
    assert placed > 10 * len(_seeds(profile)), "the allocator placed too few copies to judge"
    assert not failures, f"{profile.label()}:\n" + "\n".join(failures[:10])


def _class_workloads(objs: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """One device of each DeviceClass of an example, and its pending claims."""
    out = []
    for o in objs:
        if o["kind"] == "DeviceClass":
            cls = o["metadata"]["name"]
            out.append(
                [
                    {
                        "apiVersion": "resource.k8s.io/v1",
                        "kind": "ResourceClaim",
                        "metadata": {"name": f"one-{cls.split('.')[0]}", "namespace": "default"},
                        "spec": {
                            "devices": {
                                "requests": [{"name": "r", "exactly": {"deviceClassName": cls}}]
                            }
                        },
                    }
                ]
            )
    pending = [o for o in objs if o["kind"] == "ResourceClaim" and "status" not in o]
    return out + [[c] for c in pending]


@pytest.mark.parametrize("name", NAMES)
def test_each_example_fits_as_the_allocator_places_it(
    judged: tuple[str, Profile, Oracle], name: str
) -> None:
    _, profile, oracle = judged
    world = as_134(objects(name)) if profile.release == "1.34" else objects(name)
    asked = _class_workloads(world)
    assert asked, f"{name}: nothing to fit"
    answers = oracle.ask_many([fit_case(f"{name}-{k}", world, c) for k, c in enumerate(asked)])
    failures = []
    for claims, answer in zip(asked, answers, strict=True):
        got = compare_fit(world, claims, answer, profile)
        assert not got.undecided
        failures.extend(f"{claims[0]['metadata']['name']}: {d}" for d in got.differences)
    assert not failures, f"{profile.label()} on {name}:\n" + "\n".join(failures)


# The workloads of examples/workloads and the numbers docs and README quote for them,
# from `draview analyze --fit` (the CLI) on the example with a Node per node it names.
QUOTED = [
    ("one-gpu", "gpus", 4, 4, {"node-a": 1, "node-b": 3}),
    ("trainer", "gpus", 1, 1, {"node-a": 0, "node-b": 1}),
    ("one-mig", "mig-a100", 0, 0, {"gpu-node-1": 0}),
    ("one-tpu", "tpu-multihost", 2, 2, {"node-1": 0, "node-2": 0, "node-5": 1, "node-6": 1}),
]


@pytest.mark.parametrize(("workload", "example", "low", "high", "per_node"), QUOTED)
def test_the_quoted_numbers_are_the_cli_s_and_the_allocator_s(
    tmp_path: Path,
    workload: str,
    example: str,
    low: int,
    high: int,
    per_node: dict[str, int],
) -> None:
    world = objects(example)
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump_all(world))
    path = ROOT / "examples" / "workloads" / f"{workload}.yaml"
    cli = [sys.executable, "-m", "draview.cli.main", "analyze"]
    proc = subprocess.run(
        [*cli, "--fit", str(path), str(dump), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["copies"], doc["maxCopies"], doc["bounded"]) == (low, high, False)
    assert {n["name"]: n["copies"] for n in doc["nodes"]} == per_node
    # The same question to the allocator of the default profile.
    docs = list(iter_objects(yaml.safe_load_all(path.read_text())))
    templates = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ResourceClaimTemplate"}
    claims = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": claim_name, "namespace": doc["workload"]["namespace"]},
            "spec": templates[_template(docs, claim_name)]["spec"]["spec"],
        }
        for claim_name in doc["workload"]["claimsPerCopy"]
    ]
    with Oracle() as oracle:
        answer = oracle.ask(fit_case(workload, world, claims))
    got = compare_fit(world, claims, answer)
    assert not got.differences, got.differences
    assert {n: r["copies"] for n, r in answer["nodes"].items() if n in per_node} == per_node
    assert all(low <= r["copies"] <= high for r in answer["policies"].values())


def _template(docs: list[dict[str, Any]], claim_name: str) -> str:
    """The template a copy's claim comes from (a Pod's claims are `<pod>-<entry>`)."""
    for d in docs:
        if d["kind"] == "ResourceClaimTemplate" and d["metadata"]["name"] == claim_name:
            return claim_name
    pod = next(d for d in docs if d["kind"] not in ("ResourceClaimTemplate", "ResourceClaim"))
    spec = pod["spec"]["template"]["spec"] if pod["kind"] != "Pod" else pod["spec"]
    for entry in spec["resourceClaims"]:
        if f"{pod['metadata']['name']}-{entry['name']}" == claim_name:
            return str(entry["resourceClaimTemplateName"])
    raise KeyError(claim_name)


def test_pods_found_before_agree(judged: tuple[str, Profile, Oracle]) -> None:
    _, profile, oracle = judged
    failures = []
    for seed, names in FOUND:
        world = served_world(generate(seed), profile)
        claims = [c for n in names for c in world.pending if c["metadata"]["name"] == n]
        assert len(claims) == len(names), f"seed {seed}: {names} are no longer generated"
        mine = fit(
            build_world(world.objects),
            workload_of(claims),
            EngineOptions(profile=profile),
            count=COUNT,
            budget=BUDGET,
        )
        # 1.34 and 1.35 walk pools in a new order on every call: ask a few times.
        for _ in range(4):
            answer = oracle.ask(fit_case(f"found-{seed}", world.objects, claims))
            got = compare_fit(world.objects, claims, answer, profile, known=mine)
            failures.extend(f"seed {seed} {list(names)}: {d}" for d in got.differences)
    assert not failures, f"{profile.label()}:\n" + "\n".join(failures[:10])
