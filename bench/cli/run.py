#!/usr/bin/env python3
"""`kubectl dra` at the size of real clusters, against kubectl's own commands in one run.

On a running control plane (KUBECONFIG), bench/operator/run.py builds the world (N
single-slice pools of 8 GPUs on fake nodes, M allocated claims) and runs the operator
until every pool's status is written, then stops it: its status objects stay, as they are
while an operator runs in sync. Then each `kubectl dra` command is timed (median of
--repeat runs, wall clock, a fresh process each) beside the kubectl command that reads
the same objects, and the ratio is checked against the target of the command. Last,
`why` of the pending claim and `fit` of a one-GPU claim again, answered by an operator
started with the explain API (bench/cli/explain_api.py).

    python bench/cli/run.py --slices 5000 --claims 50000 --json bench/cli/results/5k.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "operator"))
import run as operator_bench  # noqa: E402  (bench/operator/run.py: the world's names)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import explain_api  # noqa: E402  (bench/cli/explain_api.py)

PENDING = "pending-one"
# The workload `fit` is asked about: one GPU of the bench class per copy.
WORKLOAD = ROOT / "bench" / "out" / "cli-fit-one-gpu.json"


def workload_file() -> str:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "one-gpu"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": operator_bench.CLASS}}]
            }
        },
    }
    WORKLOAD.parent.mkdir(parents=True, exist_ok=True)
    WORKLOAD.write_text(json.dumps(claim))
    return str(WORKLOAD)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def kubectl_binary() -> str:
    out = subprocess.run(
        [str(ROOT / "e2e/cluster/build")], capture_output=True, text=True, check=True
    ).stdout
    return str(Path(out.strip().splitlines()[-1]) / "kubectl")


def timed(cmd: list[str], env: dict[str, str], repeat: int) -> dict[str, Any]:
    """Median wall time of `repeat` runs; the output of the last one (its size, its exit)."""
    times = []
    proc = None
    for _ in range(repeat):
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, env=env, check=False)
        times.append(time.monotonic() - t0)
    assert proc is not None
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.decode()[-500:]}")
    return {
        "seconds": round(statistics.median(times), 3),
        "runs": [round(t, 3) for t in times],
        "stdout_bytes": len(proc.stdout),
    }


def pending_claim(kubectl: str, env: dict[str, str]) -> None:
    ns = f"{operator_bench.NS_PREFIX}00"
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": PENDING, "namespace": ns},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {"deviceClassName": operator_bench.CLASS, "count": 1},
                    }
                ]
            }
        },
    }
    subprocess.run(
        [kubectl, "apply", "-f", "-"],
        input=json.dumps(claim).encode(),
        env=env,
        check=True,
        capture_output=True,
    )


def commands(
    kubectl: str, dra: list[str], n: int
) -> list[tuple[str, list[str], list[str] | None, str]]:
    """(what, kubectl dra command, kubectl's equivalent or None, target)."""
    node = operator_bench.node_name(min(42, n - 1))
    slice_name = operator_bench.slice_name(min(42, n - 1))
    allocated_ns, allocated = operator_bench.claim_ref(100)
    pending_ns = f"{operator_bench.NS_PREFIX}00"
    one = [kubectl, "get", "resourceslice", slice_name, "-o", "json"]
    return [
        ("get pools", [*dra, "get", "pools"], [kubectl, "get", "rpst", "-o", "json"], "1.5x"),
        ("get pools --node", [*dra, "get", "pools", "--node", node], one, "small"),
        (
            "get pools --driver",
            [*dra, "get", "pools", "--driver", operator_bench.DRIVER],
            None,
            "none",
        ),
        (
            "get pools --pool",
            [*dra, "get", "pools", "--driver", operator_bench.DRIVER, "--pool", node],
            one,
            "small",
        ),
        ("describe node", [*dra, "describe", "node", node], one, "small"),
        ("describe resourceslice", [*dra, "describe", "resourceslice", slice_name], one, "small"),
        ("why (allocated claim)", [*dra, "why", allocated, "-n", allocated_ns], None, "1s"),
        ("why (pending claim)", [*dra, "why", PENDING, "-n", pending_ns], None, "3s"),
        # Without the explain API: every slice, every slice status, every pool judged.
        ("fit (one GPU)", [*dra, "fit", workload_file(), "-n", pending_ns], None, "none"),
        (
            "get pools --live",
            [*dra, "get", "pools", "--live"],
            [kubectl, "get", "resourceslices,resourceclaims", "-A", "-o", "json"],
            "0.5x",
        ),
    ]


def explained(
    kubectl: str, dra: list[str], env: dict[str, str], repeat: int
) -> list[dict[str, Any]]:
    """`why` of the pending claim and `fit` of one GPU, answered by an operator through
    the explain API."""
    ns = f"{operator_bench.NS_PREFIX}00"
    asked = [
        ("why (pending claim), explain API", [*dra, "why", PENDING, "-n", ns]),
        ("fit (one GPU), explain API", [*dra, "fit", workload_file(), "-n", ns]),
    ]
    log_path = ROOT / "bench" / "out" / "cli-explain-operator.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    with explain_api.serving(kubectl, env, log_path) as ready:
        for what, cmd in asked:
            check = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
            if "answered by the draview operator" not in check.stderr:
                raise SystemExit(f"the operator did not answer: {check.stderr[-500:]}")
            ours = timed(cmd, env, repeat)
            ok = verdict("3s", ours["seconds"], None)
            log(f"{what}: {ours['seconds']} s (operator ready in {ready} s)")
            rows.append(
                {
                    "command": what,
                    "kubectl_dra": ours,
                    "kubectl": None,
                    "target": "3s",
                    "met": ok,
                    "argv": cmd[3:],
                    "kubectl_argv": [],
                    "operator_ready_seconds": ready,
                }
            )
    return rows


def verdict(target: str, ours: float, theirs: float | None) -> bool | None:
    if target == "1.5x" and theirs:
        return ours <= 1.5 * theirs
    if target == "0.5x" and theirs:
        return ours <= 0.5 * theirs
    if target == "small" and theirs:
        # At most ten times one `kubectl get` of one object plus half a second.
        return ours <= 10 * theirs + 0.5
    if target.endswith("s") and target[:-1].replace(".", "").isdigit():
        return ours <= float(target[:-1])
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--slices", type=int, default=5000)
    p.add_argument("--claims", type=int, default=50000)
    p.add_argument("--reuse", action="store_true", help="the world of an earlier run is there")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()
    if not args.kubeconfig:
        sys.exit('set KUBECONFIG or --kubeconfig (eval "$(e2e/cluster/up)")')
    env = {**os.environ, "KUBECONFIG": args.kubeconfig, "PYTHONPATH": str(ROOT / "operator")}
    env.pop("DRAVIEW_KUBECTL", None)
    kubectl = kubectl_binary()
    if not args.reuse:
        log(f"building {args.slices} pools and {args.claims} claims, operator until in sync")
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "bench/operator/run.py"),
                "--slices",
                str(args.slices),
                "--claims",
                str(args.claims),
                "--changes",
                "0",
                "--skip-after",
                "--keep",
                "--converge-timeout",
                "3600",
                "--kubeconfig",
                args.kubeconfig,
            ],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    pending_claim(kubectl, env)
    dra = [sys.executable, "-m", "draview.cli.dra.main"]
    rows = []
    start = timed([*dra, "version", "--client"], env, args.repeat)
    log(f"plugin start-up: {start['seconds']} s")
    for what, ours_cmd, theirs_cmd, target in commands(kubectl, dra, args.slices):
        ours = timed(ours_cmd, env, args.repeat)
        theirs = timed(theirs_cmd, env, args.repeat) if theirs_cmd else None
        ok = verdict(target, ours["seconds"], theirs["seconds"] if theirs else None)
        rows.append(
            {
                "command": what,
                "kubectl_dra": ours,
                "kubectl": theirs,
                "target": target,
                "met": ok,
                "argv": ours_cmd[3:],
                "kubectl_argv": (theirs_cmd or [])[1:],
            }
        )
        log(
            f"{what}: {ours['seconds']} s; kubectl {theirs['seconds'] if theirs else '-'} s; "
            f"target {target}: {ok}"
        )
    rows.extend(explained(kubectl, dra, env, args.repeat))
    res = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "commit": subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip(),
        "slices": args.slices,
        "claims": args.claims,
        "cpus": os.cpu_count(),
        "plugin_start_seconds": start["seconds"],
        "commands": rows,
    }
    text = json.dumps(res, indent=2)
    print(text)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
