"""The chart on a real node: how long `helm install` takes to two Ready replicas and to the
first status written, and what each operator Pod uses against the chart's requests and
limits, with the examples loaded and then with 1,000 more ResourceSlices.

Runs on the node of e2e/node (started here when it is not running), with the image built
from the Dockerfile and the DRA test driver installed, exactly as `e2e/node/test` does.
Pod usage comes from the kubelet's Summary API (`/stats/summary`, through the API server),
sampled every second; restarts and OOM kills from the Pods' status.

    python bench/chart/run.py [--slices 1000] [--out bench/chart/results/NAME.json]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "e2e" / "node"
NAMESPACE, RELEASE, NODE_NAME = "draview", "draview", "draview-node"
EXAMPLES = ["gpus", "mig-a100", "tpu-multihost", "shareable-nic", "taints", "driver-update"]


def last_line(*cmd: str) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line.strip()][-1]


class Cluster:
    def __init__(self) -> None:
        self.kubeconfig = last_line(str(NODE / "up")).removeprefix("export KUBECONFIG=")
        state = Path.home() / ".cache" / "draview-cluster" / "run"
        self.kubectl = str(Path((state / "bin-dir").read_text().strip()) / "kubectl")
        self.helm = last_line(str(ROOT / "e2e" / "deploy-checks.sh"), "--print-helm")

    def k(self, *args: str, stdin: str | None = None) -> str:
        return subprocess.run(
            [self.kubectl, f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin, capture_output=True, text=True, check=True, timeout=600,
        ).stdout  # fmt: skip

    def json(self, *args: str) -> Any:
        return json.loads(self.k(*args, "-o", "json"))


def pods(c: Cluster) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = c.json(
        "-n", NAMESPACE, "get", "pods", "-l", f"app.kubernetes.io/instance={RELEASE}"
    )["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def ready(p: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in p.get("status", {}).get("conditions", [])
    )


class Sampler(threading.Thread):
    """Every second: each operator Pod's working set and CPU from the kubelet."""

    def __init__(self, c: Cluster) -> None:
        super().__init__(daemon=True)
        self.c, self.stopped = c, threading.Event()
        self.samples: list[dict[str, Any]] = []

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                raw = self.c.k("get", "--raw", f"/api/v1/nodes/{NODE_NAME}/proxy/stats/summary")
                now = time.monotonic()
                for p in json.loads(raw).get("pods", []):
                    if p["podRef"]["namespace"] != NAMESPACE:
                        continue
                    mem = p.get("memory", {}).get("workingSetBytes")
                    cpu = p.get("cpu", {}).get("usageNanoCores")
                    if mem is not None and cpu is not None:
                        self.samples.append({"t": now, "pod": p["podRef"]["name"],
                                             "mem": mem, "cpu": cpu})  # fmt: skip
            except (subprocess.SubprocessError, json.JSONDecodeError, KeyError):
                pass
            self.stopped.wait(1.0)

    def window(self, since: float) -> dict[str, dict[str, float]]:
        """Per Pod: peak working set (MiB), peak and mean CPU (millicores) since `since`."""
        out: dict[str, dict[str, float]] = {}
        for pod in sorted({s["pod"] for s in self.samples if s["t"] >= since}):
            mine = [s for s in self.samples if s["pod"] == pod and s["t"] >= since]
            cpus = [s["cpu"] / 1e6 for s in mine]
            out[pod] = {
                "peak_mib": round(max(s["mem"] for s in mine) / 2**20, 1),
                "peak_millicores": round(max(cpus), 1),
                "mean_millicores": round(sum(cpus) / len(cpus), 1),
                "samples": len(mine),
            }
        return out


def install(c: Cluster, image: str) -> dict[str, float]:
    """helm install as the README says; seconds to two Ready replicas and to the first
    status of the test driver's pool."""
    helm = [c.helm, f"--kubeconfig={c.kubeconfig}"]
    subprocess.run([*helm, "uninstall", RELEASE, "-n", NAMESPACE, "--wait"],
                   capture_output=True, check=False)  # fmt: skip
    while pods(c):
        time.sleep(0.5)
    # Statuses of an earlier run, where the CRDs are installed.
    with contextlib.suppress(subprocess.CalledProcessError):
        c.k("delete", "resourcepoolstatuses,resourceslicestatuses", "--all", "--wait=true")
    c.k("apply", "-f", "-", stdin=c.k("create", "namespace", NAMESPACE, "--dry-run=client",
                                      "-o", "yaml"))  # fmt: skip
    c.k("label", "--overwrite", "namespace", NAMESPACE,
        "pod-security.kubernetes.io/enforce=restricted")  # fmt: skip
    repository, tag = image.rsplit(":", 1)
    start = time.monotonic()
    proc = subprocess.Popen([
        *helm, "install", RELEASE, str(ROOT / "charts" / "draview"), "-n", NAMESPACE,
        "--set", f"image.repository={repository}", "--set", f"image.tag={tag}",
        "--set", "image.pullPolicy=Never",
    ], stdout=subprocess.DEVNULL)  # fmt: skip
    first_status = ready_at = None
    while ready_at is None or first_status is None:
        now = time.monotonic() - start
        if first_status is None:
            selector = "draview.io/driver=test-driver.cdi.k8s.io"
            # Until the chart has installed the CRDs the question fails.
            with contextlib.suppress(subprocess.CalledProcessError):
                if c.json("get", "resourcepoolstatuses", "-l", selector)["items"]:
                    first_status = now
        if ready_at is None and sum(ready(p) for p in pods(c)) == 2:
            ready_at = now
        if now > 300:
            raise SystemExit("the release did not become ready within 300 s")
        time.sleep(0.2)
    proc.wait()
    return {
        "install_to_first_status_s": round(first_status, 1),
        "install_to_ready_s": round(ready_at, 1),
    }


def many_slices(n: int) -> str:
    items = [{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"bench-chart-{i:05}", "labels": {"bench": "chart"}},
        "spec": {"driver": "bench.draview.io", "nodeName": f"bench-node-{i:05}",
                 "pool": {"name": f"bench-node-{i:05}", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{d}", "attributes": {"index": {"int": d}}}
                             for d in range(8)]},
    } for i in range(n)]  # fmt: skip
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


def wait_for_pools(c: Cluster, n: int, timeout: float = 900) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        got = c.json("get", "resourcepoolstatuses", "-l", "draview.io/driver=bench.draview.io")
        if len(got["items"]) >= n:
            return time.monotonic() - start
        time.sleep(2)
    raise SystemExit(f"fewer than {n} pool statuses after {timeout} s")


def health(c: Cluster) -> list[dict[str, Any]]:
    out = []
    for p in pods(c):
        (s,) = p["status"]["containerStatuses"]
        last = (s.get("lastState") or {}).get("terminated") or {}
        out.append({"pod": p["metadata"]["name"], "restarts": s["restartCount"],
                    "last_termination": last.get("reason")})  # fmt: skip
    return out


def memory_gib() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**30


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slices", type=int, default=1000)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    c = Cluster()
    image = last_line(str(NODE / "image"))
    last_line(str(NODE / "driver"))
    env = {**os.environ, "KUBECONFIG": c.kubeconfig}
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    result: dict[str, Any] = {
        "date": dt.date.today().isoformat(),
        "commit": commit,
        "host": f"{os.cpu_count()} CPUs, {memory_gib()} GiB",
    }
    sampler = Sampler(c)
    sampler.start()
    result["install"] = install(c, image)
    result["chart_resources"] = c.json("-n", NAMESPACE, "get", "deployment", RELEASE)["spec"][
        "template"]["spec"]["containers"][0]["resources"]  # fmt: skip
    files = [str(ROOT / "examples" / f"{e}.yaml") for e in EXAMPLES]
    subprocess.run([sys.executable, str(ROOT / "e2e" / "load_examples.py"), "--kubectl", c.kubectl,
                    *files], env=env, check=True, capture_output=True)  # fmt: skip
    t0 = time.monotonic()
    time.sleep(30)
    result["examples"] = sampler.window(t0)
    t1 = time.monotonic()
    c.k("create", "-f", "-", stdin=many_slices(args.slices))
    result["slices"] = args.slices
    result["slices_to_all_statuses_s"] = round(wait_for_pools(c, args.slices), 1)
    time.sleep(30)
    result["with_slices"] = sampler.window(t1)
    sampler.stopped.set()
    result["pods"] = health(c)
    c.k("delete", "resourceslices", "-l", "bench=chart", "--wait=false")
    c.k("delete", "-f", ",".join(files), "--ignore-not-found", "--wait=false")
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
