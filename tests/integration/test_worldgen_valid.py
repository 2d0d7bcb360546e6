"""Every world tests/fidelity/worldgen.py generates is accepted by a real API server.

The generator promises worlds a v1.36 cluster can hold; this holds it to that. For some 40
seeds (together covering every generator feature) each object is created with a server-side
dry run: Nodes, DeviceClasses, ResourceSlices, DeviceTaintRules and all claims, pending or
not. Claims with an allocation are then created for real in throwaway namespaces and their
``status.allocation`` written through the status subresource, the way the operator's tests
set up allocations. Accepted is not enough: every field sent must come back unchanged, so a
field the server drops silently (behind a disabled feature gate) fails the test too.

All worlds go through a handful of kubectl calls (each call costs a process start); when
something is refused, the worlds are submitted again one by one to name the seed.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from fidelity import worldgen
from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster

N_SEEDS = 40
Obj = dict[str, Any]


def _seeds(n: int) -> list[int]:
    """Seeds 0..n-1, then the first later seeds that add a feature the others lack."""
    seeds = list(range(n))
    seen: set[str] = set()
    for seed in seeds:
        seen |= worldgen.generate(seed).features
    seed = n
    while set(worldgen.FEATURES) - seen and seed < 2000:
        features = worldgen.generate(seed).features
        if features - seen:
            seeds.append(seed)
            seen |= features
        seed += 1
    return seeds


@dataclass
class Report:
    """How many objects were submitted and what the server refused or changed."""

    submitted: int = 0
    problems: list[str] = field(default_factory=list)


def _key(obj: Obj) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


def _same_quantity(a: Any, b: Any) -> bool:
    try:
        return bool(worldgen.parse_quantity(str(a)) == worldgen.parse_quantity(str(b)))
    except ValueError:
        return False


def _lost(sent: Any, got: Any, path: str = "") -> list[str]:
    """Paths where ``got`` (the server's object) lacks or changed what was sent."""
    if sent in ({}, []) and got is None:
        return []  # the server omits empty lists and maps
    if isinstance(sent, dict):
        if not isinstance(got, dict):
            return [f"{path}: sent an object, got {got!r}"]
        out: list[str] = []
        for k, v in sent.items():
            if k in got or v in ({}, []):
                out.extend(_lost(v, got.get(k), f"{path}.{k}"))
            else:
                out.append(f"{path}.{k}: dropped by the server")
        return out
    if isinstance(sent, list):
        if not isinstance(got, list) or len(got) != len(sent):
            return [f"{path}: sent {len(sent)} items, got {got!r}"]
        return [
            p
            for i, (s, g) in enumerate(zip(sent, got, strict=True))
            for p in _lost(s, g, f"{path}[{i}]")
        ]
    if sent != got and not _same_quantity(sent, got):
        return [f"{path}: sent {sent!r}, got {got!r}"]
    return []


def _stream(objs: list[Obj]) -> str:
    """A multi-document stream. Not a v1 List: kubectl checks List items against its own
    copy of the schema, which calls pool.generation required although the server defaults it.
    """
    return "\n---\n".join(json.dumps(o) for o in objs)


def _items(stdout: str) -> list[Obj]:
    """The objects kubectl printed: one JSON document after another."""
    decoder = json.JSONDecoder()
    items: list[Obj] = []
    pos = 0
    while True:
        while pos < len(stdout) and stdout[pos].isspace():
            pos += 1
        if pos >= len(stdout):
            return items
        data, pos = decoder.raw_decode(stdout, pos)
        items.extend(data["items"] if data.get("kind") == "List" else [data])


def _refused(line: str, sent: list[Obj]) -> str:
    """A kubectl error line with the object it is about, when the line names one."""
    for obj in sent:
        if f'"{obj["metadata"]["name"]}"' in line and obj["kind"] in line:
            return f"{line}\n    object: {json.dumps(obj)}"
    return line


class Submitter:
    """Sends worlds to the API server; names namespaces after the run and the seed."""

    def __init__(self, cluster: KubeCluster, run: str) -> None:
        self.cluster = cluster
        self.run = run
        self.created_namespaces: list[str] = []

    def namespace(self, name: str) -> str:
        return f"{self.run}-{name}"

    def localize(self, seed: int, obj: Obj) -> Obj:
        """A copy in the run's namespaces, without what the server sets itself.

        The worlds share namespaces (few namespaces to delete afterwards); claims, which
        nothing refers to by name, get the seed into their name instead.
        """
        out = copy.deepcopy(obj)
        meta = out["metadata"]
        meta.pop("uid", None)
        if "namespace" in meta:
            meta["namespace"] = self.namespace(meta["namespace"])
            meta["name"] = f"s{seed}-{meta['name']}"
        return out

    def kubectl(self, args: list[str], objs: list[Obj], part: str, report: Report) -> None:
        """One kubectl call over a stream; records refusals and fields that did not stick."""
        if not objs:
            return
        report.submitted += len(objs)
        result = self.cluster.run(*args, "-o", "json", "-f", "-", input=_stream(objs), timeout=300)
        report.problems.extend(
            _refused(ln.strip(), objs) for ln in result.stderr.splitlines() if ln.strip()
        )
        # kubectl prints what it created in input order; refused objects are missing.
        got = iter(_items(result.stdout))
        back = next(got, None)
        for obj in objs:
            if back is None or _key(back) != _key(obj):
                continue
            lost = _lost(obj[part], back.get(part), f".{part}") if part in obj else []
            lost += _lost(
                obj["metadata"].get("labels", {}), back["metadata"].get("labels"), ".labels"
            )
            report.problems.extend(f"{'/'.join(_key(obj))}{p}" for p in lost)
            back = next(got, None)

    def create_namespaces(self, worlds: list[worldgen.World], report: Report) -> None:
        """For real: claims need their namespace, admin-access claims its label."""
        namespaces: dict[str, Obj] = {}
        for world in worlds:
            for obj in world.objects:
                if obj["kind"] == "Namespace":
                    ns = copy.deepcopy(obj)
                    ns["metadata"]["name"] = self.namespace(obj["metadata"]["name"])
                    # Worlds agree on a namespace's labels, or sharing it would hide a bug.
                    assert namespaces.setdefault(ns["metadata"]["name"], ns) == ns
        self.created_namespaces.extend(namespaces)
        self.kubectl(["create"], list(namespaces.values()), "spec", report)

    def submit(self, worlds: list[worldgen.World]) -> Report:
        """Dry-run every object; create allocated claims and write their status."""
        report = Report()
        everything: list[Obj] = []
        allocated: list[Obj] = []
        for world in worlds:
            objs = [self.localize(world.seed, o) for o in world.objects if o["kind"] != "Namespace"]
            objs += [self.localize(world.seed, o) for o in world.pending]
            everything += [_without_status(o) for o in objs]
            allocated += [o for o in objs if o["kind"] == "ResourceClaim" and "status" in o]
        self.kubectl(["create", "--dry-run=server"], everything, "spec", report)
        self.kubectl(["create"], [_without_status(o) for o in allocated], "spec", report)
        self.kubectl(["replace", "--subresource=status"], allocated, "status", report)
        return report


def _without_status(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k != "status"}


@pytest.fixture
def submitter(kube_cluster: KubeCluster) -> Iterator[Submitter]:
    """A Submitter whose namespaces (and the claims in them) are deleted afterwards."""
    sub = Submitter(kube_cluster, f"wg{uuid.uuid4().hex[:6]}")
    try:
        yield sub
    finally:
        if sub.created_namespaces:
            names = sub.created_namespaces
            kube_cluster.run("delete", "namespace", *names, "--ignore-not-found", "--wait=false")


def test_generated_worlds_are_accepted(submitter: Submitter) -> None:
    worlds = [worldgen.generate(seed) for seed in _seeds(N_SEEDS)]
    covered = set().union(*(w.features for w in worlds))
    assert covered == set(worldgen.FEATURES), set(worldgen.FEATURES) - covered

    start = time.monotonic()
    setup = Report()
    submitter.create_namespaces(worlds, setup)
    assert not setup.problems, "\n".join(setup.problems)
    report = submitter.submit(worlds)
    elapsed = time.monotonic() - start
    submitted = setup.submitted + report.submitted
    print(f"\n{len(worlds)} worlds, {submitted} objects submitted in {elapsed:.1f} s")
    if report.problems:
        # Again world by world, so that every refusal names its seed. The claims created
        # for real in the first pass make creating them again fail: skip those messages.
        lines = []
        for world in worlds:
            for problem in submitter.submit([world]).problems:
                if "AlreadyExists" not in problem:
                    lines.append(f"seed {world.seed}: {problem}")
        pytest.fail("\n".join(lines or report.problems))
