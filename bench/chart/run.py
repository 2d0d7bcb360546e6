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


class Watch(threading.Thread):
    """`kubectl get KIND --watch -o json`: when each version of each object arrived."""

    def __init__(self, c: Cluster, *args: str) -> None:
        super().__init__(daemon=True)
        self.proc = subprocess.Popen(
            [c.kubectl, f"--kubeconfig={c.kubeconfig}", "get", *args, "--watch", "-o", "json"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.seen: list[tuple[float, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def run(self) -> None:
        assert self.proc.stdout is not None
        decoder, buf = json.JSONDecoder(), ""
        for line in self.proc.stdout:
            buf += line
            while buf.strip():
                try:
                    obj, end = decoder.raw_decode(buf.lstrip())
                except json.JSONDecodeError:
                    break  # the object is not complete yet
                now = time.monotonic()
                buf = buf.lstrip()[end:]
                with self.lock:
                    self.seen.append((now, obj))

    def first(self, test: Any, since: float = 0.0, timeout: float = 120) -> float:
        """When an object that passes `test` first arrived (after `since`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for at, obj in self.seen:
                    if at >= since and test(obj):
                        return at
            time.sleep(0.02)
        raise SystemExit("timed out waiting for a watch event")

    def stop(self) -> None:
        self.proc.terminate()


def workload(name: str, image: str, device_class: str) -> list[dict[str, Any]]:
    """A ResourceClaimTemplate of one device and a Pod that uses it."""
    template = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "dev", "exactly": {"deviceClassName": device_class, "count": 1}}]}}},
    }  # fmt: skip
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": image, "imagePullPolicy": "Never",
                            "command": ["sleep", "3600"],
                            "resources": {"claims": [{"name": "dev"}]}}],
            "resourceClaims": [{"name": "dev", "resourceClaimTemplateName": name}],
        },
    }  # fmt: skip
    return [template, pod]


def allocation_to_visible(c: Cluster, image: str, device_class: str, count: int) -> dict[str, Any]:
    """For Pods created one at a time: from the claim's allocation (the scheduler's
    write, as a watch sees it) to draview's slice status naming the claim on its device,
    and from the Pod's deletion to the device shown Available again."""
    ns = "bench-chart-alloc"
    c.k("create", "namespace", ns)
    claims = Watch(c, "resourceclaims", "-n", ns)
    statuses = Watch(c, "resourceslicestatuses")
    claims.start()
    statuses.start()
    shown, freed = [], []
    try:
        for i in range(count):
            name = f"alloc-{i:02}"
            t_create = time.monotonic()
            c.k(
                "-n",
                ns,
                "create",
                "-f",
                "-",
                stdin=json.dumps(
                    {
                        "apiVersion": "v1",
                        "kind": "List",
                        "items": workload(name, image, device_class),
                    }
                ),
            )

            def allocated(o: dict[str, Any], pod: str = name) -> bool:
                # The claim the resource claim controller made from the template: the
                # Pod owns it.
                owners = [r["name"] for r in o["metadata"].get("ownerReferences") or []]
                return pod in owners and bool((o.get("status") or {}).get("allocation"))

            t_alloc = claims.first(allocated, since=t_create)
            claim = next(o for _, o in claims.seen if allocated(o))
            claim_name = claim["metadata"]["name"]
            (result,) = claim["status"]["allocation"]["devices"]["results"]

            def names_claim(
                o: dict[str, Any], want: str = claim_name, dev: str = result["device"]
            ) -> bool:
                return any(
                    d["name"] == dev
                    and any(a["claimName"] == want for a in d.get("allocations") or [])
                    for d in (o.get("status") or {}).get("devices") or []
                )

            shown.append(statuses.first(names_claim) - t_alloc)
            t_delete = time.monotonic()
            c.k("-n", ns, "delete", "pod", name, "--wait=false")

            def available(
                o: dict[str, Any], dev: str = result["device"], want: str = claim_name
            ) -> bool:
                return any(
                    d["name"] == dev and d["state"] == "Available"
                    for d in (o.get("status") or {}).get("devices") or []
                ) and not names_claim(o, want, dev)

            freed.append(statuses.first(available, since=t_delete) - t_delete)
    finally:
        claims.stop()
        statuses.stop()
        c.k("delete", "namespace", ns, "--wait=false")
    shown.sort()
    freed.sort()
    return {
        "pods": count,
        "allocation_to_status_s": {
            "p50": round(shown[len(shown) // 2], 3),
            "max": round(shown[-1], 3),
        },
        "pod_deleted_to_available_s": {
            "p50": round(freed[len(freed) // 2], 3),
            "max": round(freed[-1], 3),
        },
    }


def memory_gib() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**30


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slices", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=10, help="Pods timed one at a time")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    c = Cluster()
    image = last_line(str(NODE / "image"))
    device_class = last_line(str(NODE / "driver"))
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
    result["allocation"] = allocation_to_visible(c, image, device_class, args.pods)
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
