"""`kubectl dra` offline (-f) and over a fake kubectl: tables, describe pages, why, RBAC."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import DRIVER, claim, device, result, rslice

from draview.cli.dra.main import main
from draview.cli.dra.render import bar
from draview.quantity import parse_quantity

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_get_pools_story3(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "get", "pools", "-f", str(EX / "gpus.yaml"))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:7] == [
        "DRIVER", "POOL", "NODE", "TOTAL", "ALLOCATED", "AVAILABLE", "UNAVAILABLE"
    ]  # fmt: skip
    assert lines[1].split()[:7] == [DRIVER, "node-a", "node-a", "4", "3", "1", "0"]
    assert lines[2].split()[:7] == [DRIVER, "node-b", "node-b", "4", "1", "3", "0"]


def test_get_filters_and_sort(capsys: pytest.CaptureFixture[str]) -> None:
    f = ["-f", str(EX / "gpus.yaml"), "-f", str(EX / "taints.yaml")]
    code, out, _ = run(capsys, "get", "pools", *f, "--sort-by", "AVAILABLE")
    avail = [int(line.split()[5]) for line in out.splitlines()[1:]]
    assert code == 0 and avail == sorted(avail)
    code, out, _ = run(capsys, "get", "devices", *f, "--node", "node-b", "--driver", DRIVER)
    rows = out.splitlines()[1:]
    assert len(rows) == 4 and all(r.split()[2] == "node-b" for r in rows)
    assert "gpu-monitoring/health-probe (admin)" in rows[3]
    code, out, _ = run(capsys, "get", "slices", *f, "--pool", "taint-node-2", "-o", "json")
    items = json.loads(out)["items"]
    assert [o["spec"]["pool"] for o in items] == ["taint-node-2"]


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    f = ["-f", str(EX / "gpus.yaml")]
    code, _, err = run(capsys, "get", "pools", *f, "--sort-by", "nope")
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: --sort-by")
    code, _, _ = run(capsys, "get", "widgets", *f)
    assert code == 2
    code, _, _ = run(capsys)
    assert code == 2


@pytest.mark.parametrize("sub", ["get", "describe", "why", "flatten"])
def test_help_on_every_subcommand(capsys: pytest.CaptureFixture[str], sub: str) -> None:
    code, out, _ = run(capsys, sub, "--help")
    assert code == 0 and "--kubeconfig" in out and "--context" in out


def test_not_found_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    f = ["-f", str(EX / "gpus.yaml")]
    code, _, err = run(capsys, "describe", "resourceslice", "nope", *f)
    assert code == 1 and "not found" in err and err.count("\n") == 1
    code, _, err = run(capsys, "why", "nope", "-n", "research", *f)
    assert code == 1 and "not found" in err
    code, _, err = run(capsys, "get", "pools", "-f", "/does/not/exist")
    assert code == 1 and err.count("\n") == 1


def test_describe_slice_mig_counters(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "describe", "resourceslice", "gpu-node-1-devices", "-f", str(EX / "mig-a100.yaml")
    )
    assert code == 0
    assert "Name:           gpu-node-1-devices" in out
    assert "    Resource Slice Count:  2" in out
    assert "memory           ██████░░░░  24832Mi / 40Gi  (16128Mi available)" in out
    assert "        - ml-training/finetune, request " in out
    assert "      Reason:  InsufficientSharedCapacity" in out
    assert "    Complete:    True" in out


def test_describe_slice_story1(capsys: pytest.CaptureFixture[str]) -> None:
    name = "node-a-gpu.example.com-x7k2p"
    code, out, _ = run(capsys, "describe", "resourceslice", name, "-f", str(EX / "gpus.yaml"))
    assert code == 0
    assert "    Total Devices:                4" in out
    assert "    Allocated Devices:            3" in out
    assert "    Available Devices:            1" in out
    # A whole allocated device has nothing left; a free one all of it.
    gpu0 = out.split("    gpu-0:")[1].split("    gpu-1:")[0]
    assert "research/train-llm" in gpu0 and "memory:  0" in gpu0
    gpu3 = out.split("    gpu-3:")[1]
    assert "State:  Available" in gpu3 and "memory:  80Gi" in gpu3.split("Available Capacity")[1]


def test_describe_slice_shows_list_attributes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cpu = device("cpu-0", model="EPYC")
    cpu["attributes"]["numaNodes"] = {"ints": [0, 1]}
    cpu["attributes"]["smt"] = {"bool": True}
    path = tmp_path / "cpus.yaml"
    path.write_text(yaml.safe_dump({"kind": "List", "items": [rslice("cpus", [cpu])]}))
    code, out, _ = run(capsys, "describe", "resourceslice", "cpus", "-f", str(path))
    assert code == 0
    attributes = out.split("      Attributes:\n")[1]
    assert "        numaNodes:  [0, 1]" in attributes
    assert "        model:      EPYC" in attributes and "        smt:        true" in attributes


def test_describe_node_story2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "describe", "node", "node-a", "-f", str(EX / "gpus.yaml"))
    assert code == 0
    assert "DRA Resources:" in out
    assert "    - Device: gpu-0 (Allocated to research/train-llm)" in out
    assert "    - Device: gpu-3 (Available)" in out
    assert "    Allocated:    3" in out


def test_describe_node_reaches_network_devices(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sel = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "rack", "operator": "In", "values": ["r1"]}
    ]}]}  # fmt: skip
    net = {"nodeSelector": sel}
    objs: list[dict[str, Any]] = [
        rslice("local", [device("gpu-0")], pool="node-1", node="node-1"),
        rslice("fabric", [device("nic-0"), device("nic-1")], pool="fabric", node=None, **net),
        rslice("everywhere", [device("x-0")], pool="shared", node=None),
        claim("c", result("nic-0", pool="fabric"), namespace="team-a"),
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "node-1", "labels": {"rack": "r1"}},
        },
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "node-2", "labels": {"rack": "r2"}},
        },
    ]
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    code, out, _ = run(capsys, "describe", "node", "node-1", "-f", str(path))
    assert code == 0
    assert "  Pool:             fabric" in out and "nodes matching a nodeSelector" in out
    assert "- Device: nic-0 (Allocated to team-a/c)" in out
    assert "  Pool:             shared" in out
    code, out, _ = run(capsys, "describe", "node", "node-2", "-f", str(path))
    assert "fabric" not in out and "shared" in out and "node-1" not in out.split("DRA")[1]
    code, out, _ = run(capsys, "get", "devices", "--node", "node-2", "-f", str(path))
    assert [r.split()[3] for r in out.splitlines()[1:]] == ["x-0"]


def test_why_offline(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pending = claim("wants-h100", namespace="research")
    pending["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": "device.attributes['gpu.example.com'].model == 'H100-SXM5-80GB'"}}
    ]
    pending["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    path = tmp_path / "pending.yaml"
    path.write_text(yaml.safe_dump(pending))
    f = ["-f", str(EX / "gpus.yaml"), "-f", str(path)]
    code, out, _ = run(capsys, "why", "wants-h100", "-n", "research", *f)
    assert code == 0
    assert "Verdict:    Unallocatable" in out
    assert "needs 2, 1 of 4 matching devices free (3 Allocated)" in out
    assert "gpu.example.com/node-a/gpu-0: allocated to research/train-llm" in out
    code, out, _ = run(capsys, "why", "wants-h100", "-n", "research", *f, "-o", "json")
    doc = json.loads(out)
    assert doc["verdict"] == "Unallocatable"
    assert doc["requests"][0]["choices"][0]["blocked"]["Allocated"][0].endswith("gpu-0")


def test_flatten_mixins(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "flatten", "-f", str(EX / "mixins.yaml"))
    assert code == 0 and "MixinNotFound" in err
    doc = yaml.safe_load(out)
    devices = {d["name"]: d for o in doc["items"] for d in o["spec"].get("devices", [])}
    assert all("includes" not in d for d in devices.values())
    assert any(d.get("consumesCounters") for d in devices.values())
    code, out, _ = run(capsys, "flatten", "-f", str(EX / "mixins.yaml"), "-o", "json",
                       "mixin-node-1-devices")  # fmt: skip
    assert json.loads(out)["metadata"]["name"] == "mixin-node-1-devices"


def test_bar() -> None:
    q = parse_quantity
    assert bar(q("24832Mi"), q("40Gi")) == "██████░░░░"
    assert bar(q("0"), q("40Gi")) == "░░░░░░░░░░"
    assert bar(q("1"), q("1000")) == "█░░░░░░░░░"  # any use shows
    assert bar(q("999"), q("1000")) == "█████████░"  # only full use fills
    assert bar(q("1"), q("1")) == "██████████"


FAKE_KUBECTL = """#!{python}
import json, sys
args = [a for a in sys.argv[1:] if not a.startswith(("--kubeconfig", "--context"))]
data = json.load(open({data!r}))
if args[:2] == ["auth", "can-i"]:
    ns = args[args.index("-n") + 1]
    ok = ns in data["allowed"]
    print("yes" if ok else "no"); sys.exit(0 if ok else 1)
if args[0] == "get":
    res = args[1].split(".")[0]
    if res in data["objects"] and len(args) > 2 and not args[2].startswith("-"):
        found = [o for o in data["objects"][res] if o["metadata"]["name"] == args[2]]
        if not found:
            sys.stderr.write('Error from server (NotFound): "%s" not found\\n' % args[2])
            sys.exit(1)
        print(json.dumps(found[0])); sys.exit(0)
    if res in data["objects"]:
        print(json.dumps({{"kind": "List", "items": data["objects"][res]}})); sys.exit(0)
    if res in ("resourceclaims",):
        sys.stderr.write("Error from server (Forbidden): forbidden\\n"); sys.exit(1)
    sys.stderr.write('error: the server doesn\\'t have a resource type "%s"\\n' % res); sys.exit(1)
sys.exit(3)
"""


@pytest.fixture
def fake_kubectl(tmp_path: Path) -> Path:
    """A kubectl that serves status objects computed from the gpus example and answers
    `auth can-i` with yes only for namespace inference."""
    from draview.api.world import build_world
    from draview.cli.inputs import read_sources
    from draview.engine.world import world_objects

    objs = read_sources([str(EX / "gpus.yaml")])
    statuses = world_objects(build_world(objs))
    data = {
        "allowed": ["inference"],
        "objects": {
            "resourceslices": [o for o in objs if o["kind"] == "ResourceSlice"],
            "resourceslicestatuses": [o for o in statuses if o["kind"] == "ResourceSliceStatus"],
            "resourcepoolstatuses": [o for o in statuses if o["kind"] == "ResourcePoolStatus"],
        },
    }
    (tmp_path / "data.json").write_text(json.dumps(data))
    script = tmp_path / "kubectl"
    script.write_text(FAKE_KUBECTL.format(python=sys.executable, data=str(tmp_path / "data.json")))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_rbac_elides_claims_and_reads_operator_status(
    capsys: pytest.CaptureFixture[str], fake_kubectl: Path
) -> None:
    k = ["--kubectl", str(fake_kubectl)]
    code, out, _ = run(capsys, "get", "devices", *k, "--pool", "node-a")
    assert code == 0
    rows = {r.split()[3]: r for r in out.splitlines()[1:]}
    assert rows["gpu-0"].endswith("(1 claim)") and "research" not in out
    assert rows["gpu-2"].endswith("inference/serve")
    code, out, _ = run(capsys, "describe", "node", "node-a", *k)
    assert "- Device: gpu-0 (Allocated (1 claim))" in out
    assert "draview operator" in out
    code, out, _ = run(capsys, "describe", "resourceslice", "node-a-gpu.example.com-x7k2p", *k)
    assert "research" not in out and "1 claim you may not see" in out
    code, out, _ = run(capsys, "get", "devices", *k, "-o", "json")
    assert "research" not in out and '"elided": true' in out


def test_kubectl_env_var(
    capsys: pytest.CaptureFixture[str], fake_kubectl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRAVIEW_KUBECTL", str(fake_kubectl))
    code, out, _ = run(capsys, "get", "pools")
    assert code == 0 and "node-a" in out
    monkeypatch.setenv("DRAVIEW_KUBECTL", os.devnull + "-missing")
    code, _, err = run(capsys, "get", "pools")
    assert code == 1 and "kubectl not found" in err


def test_describe_says_which_nodes_see_which_generation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A rollout by rack selector: node-1 sees generation 2, node-2 and node-3 keep 1."""
    world = Path(__file__).resolve().parents[1] / "fixtures" / "selector-rollout.yaml"
    code, out, _ = run(capsys, "describe", "node", "node-2", "-f", str(world))
    assert code == 0
    assert "- Device: nic-old (Available)" in out
    assert (
        "Node Views:  False (NodeViewsDiffer: generation 2, complete and valid, 1 slice(s) "
        "expected on 1 node (node-1); generation 1, complete and valid, 1 slice(s) expected "
        "on 2 nodes (node-2, node-3))"
    ) in out


def test_the_profile_flags_change_the_answer_and_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    f = ["-f", str(EX / "taints.yaml")]
    code, out, err = run(capsys, "get", "devices", *f, "--pool", "taint-node-1")
    assert code == 0 and "Tainted" in out and "judged as" not in err
    # 1.35's default gates leave DRADeviceTaints off: taints do not block there.
    code, out, err = run(
        capsys, "get", "devices", *f, "--pool", "taint-node-1", "--kubernetes-version", "v1.35.4"
    )
    assert code == 0 and "Tainted" not in out
    assert "note: judged as Kubernetes 1.35, default gates (allocator incubating" in err
    code, out, _ = run(
        capsys, "--kubernetes-version", "1.35", "--feature-gates", "DRADeviceTaints=true",
        "get", "devices", *f, "--pool", "taint-node-1",
    )  # fmt: skip
    assert code == 0 and "Tainted" in out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--kubernetes-version", "1.33"], "error: Kubernetes 1.33 is not supported"),
        (["--feature-gates", "DRADeviceTaints"], "error: feature gate 'DRADeviceTaints'"),
        (["--kubernetes-version", "1.34", "--feature-gates", "DRAListTypeAttributes=true"],
         "error: feature gate DRAListTypeAttributes does not exist in Kubernetes 1.34"),
    ],
)  # fmt: skip
def test_bad_profile_flags_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    code, out, err = run(capsys, "get", "pools", "-f", str(EX / "gpus.yaml"), *flags)
    assert code == 2 and out == "" and err.startswith(message) and err.count("\n") == 1
