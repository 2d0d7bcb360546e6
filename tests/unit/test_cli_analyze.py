"""`draview analyze` as a user runs it: a real process, real files, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from builders import claim, device, result, rslice

from draview.engine.objects import pool_object_name

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def analyze(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "draview.cli.main", "analyze", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture()
def dump(tmp_path: Path) -> Path:
    objs = [
        rslice("s", [device("gpu-0"), device("gpu-1")]),
        claim("c", result("gpu-0")),
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ignored"}},
    ]
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objs}))
    return path


def test_prints_a_list_of_pool_then_slice_status(dump: Path) -> None:
    proc = analyze(str(dump))
    assert proc.returncode == 0, proc.stderr
    out = yaml.safe_load(proc.stdout)
    assert out["kind"] == "List"
    kinds = [(o["kind"], o["metadata"]["name"]) for o in out["items"]]
    pool_name = pool_object_name("gpu.example.com", "pool-a")
    assert kinds == [("ResourcePoolStatus", pool_name), ("ResourceSliceStatus", "s")]
    assert pool_name.startswith("gpu.example.com-pool-a-")
    summary = out["items"][0]["status"]["summary"]
    assert (summary["allocatedDevices"], summary["availableDevices"]) == (1, 1)


def test_json_and_stdin(dump: Path) -> None:
    proc = analyze("-", "-o", "json", stdin=dump.read_text())
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["items"]) == 2


def test_table(dump: Path) -> None:
    proc = analyze(str(dump), "-o", "wide")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    # The same columns as `kubectl dra get pools|slices|devices -o wide` (cli/status_tables.py).
    assert lines[0].split()[:4] == ["DRIVER", "POOL", "NODE", "TOTAL"]
    assert any(line.split()[3:5] == ["gpu-0", "Allocated"] for line in lines)


@pytest.mark.parametrize(
    "args,message",
    [
        ((), "no input"),
        (("/nonexistent/dump.yaml",), "No such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], message: str) -> None:
    proc = analyze(*args)
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_unparsable_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("items: [\n  - {oops\n")
    proc = analyze(str(bad))
    assert proc.returncode == 2 and "bad.yaml" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_bad_flag_exits_2() -> None:
    proc = analyze("-o", "xml", "x.yaml")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_is_analyzed_deterministically(path: Path) -> None:
    first = analyze(str(path), "--partition-attribute", "gpu.example.com/profile")
    second = analyze(str(path), "--partition-attribute", "gpu.example.com/profile")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    assert yaml.safe_load(first.stdout)["items"]


def test_assumed_nodes_are_said_only_when_something_was_assumed(tmp_path: Path) -> None:
    case = ROOT / "tests/fixtures/fidelity-cases"
    world = next(case.glob("01-*.yaml"))
    out = analyze(str(world), "-o", "table")
    assert out.returncode == 0
    assert "note: the input has no Node objects: assumed 1 label-less node(s)" in out.stderr
    # With the Nodes in the dump, nothing is assumed.
    nodes = tmp_path / "nodes.yaml"
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1", "labels": {}}}
    nodes.write_text(yaml.safe_dump(node))
    assert "note:" not in analyze(str(world), str(nodes), "-o", "table").stderr
    # Slices that only name their nodes need no assumption.
    assert "note:" not in analyze(str(ROOT / "examples/gpus.yaml")).stderr


def test_profile_flags(dump: Path) -> None:
    taints = str(ROOT / "examples" / "taints.yaml")
    default = analyze(taints, "-o", "json")
    older = analyze(taints, "-o", "json", "--kubernetes-version", "1.35")
    assert default.returncode == 0 and older.returncode == 0
    assert "judged as Kubernetes 1.35, default gates (allocator incubating)" in older.stderr

    def tainted(proc: subprocess.CompletedProcess[str]) -> int:
        items = json.loads(proc.stdout)["items"]
        return sum(
            d.get("stateReason") == "Tainted"
            for o in items
            if o["kind"] == "ResourceSliceStatus"
            for d in o["status"]["devices"]
        )

    assert tainted(default) > 0 and tainted(older) == 0
    pools = [o for o in json.loads(older.stdout)["items"] if o["kind"] == "ResourcePoolStatus"]
    assert {p["status"]["profile"]["kubernetesVersion"] for p in pools} == {"1.35"}
    assert {p["status"]["profile"]["source"] for p in pools} == {"defaults"}
    bad = analyze(str(dump), "--kubernetes-version", "1.33")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == (
        "draview analyze: Kubernetes 1.33 is not supported: it serves no resource.k8s.io/v1; "
        "draview supports 1.34 to 1.37\n"
    )
