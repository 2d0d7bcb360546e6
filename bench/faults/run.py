"""Faults in the middle of a first sync, on the local control plane (not run in CI).

Two replicas with leader election start on a world whose status objects were deleted,
so the leader has thousands of writes to make; once it has made `--mid` of them, one
fault:

  kill9           SIGKILL of the leader: the standby takes over when the Lease expires.
  apiserver       the API server is stopped and started again with the same flags.
  watch-expiry    etcd is compacted to its current revision while the API server is
                  down, so every watch resumes from a version the server no longer has
                  (410 Gone) and must re-list.

Then: time until every ResourceSliceStatus/ResourcePoolStatus equals what `draview
analyze` computes from a dump of the world (tests/integration/analyzed.py), and the
audit log's writes grouped into runs of one replica each: a run must end before the next
one begins (never two writers). The world is bench/operator's (`run.py --keep`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "integration")]

import apiserver  # noqa: E402
from analyzed import differences  # noqa: E402
from audit import writes  # noqa: E402
from operator_proc import Operator  # noqa: E402

STATE = apiserver.STATE
KUBECONFIG = str(STATE / "kubeconfig")
AUDIT = STATE / "logs" / "audit.log"
LEASE = ("--lease-duration", "5", "--renew-deadline", "4", "--retry-period", "1")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def kubectl(*args: str) -> str:
    out = subprocess.run(
        # Found when first used, so that --help works without a control plane.
        [
            str(Path((STATE / "bin-dir").read_text().strip()) / "kubectl"),
            f"--kubeconfig={KUBECONFIG}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args[:3])}: {out.stderr.strip()}")
    return out.stdout


def wait(what: str, probe: Any, timeout: float, every: float = 0.5) -> float:
    t0 = time.monotonic()
    while not probe():
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"{what}: not after {timeout} s")
        time.sleep(every)
    return time.monotonic() - t0


def api_ready() -> bool:
    try:
        return kubectl("get", "--raw", "/readyz").strip() == "ok"
    except RuntimeError:
        return False


def restart_apiserver(compact: bool) -> float:
    """Stop the API server, optionally compact etcd meanwhile, start it again with the
    same command line; returns the seconds it was unready."""
    pid = apiserver.pid()
    cmd = apiserver.command(pid)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    try:
        # Graceful termination waits for the requests in flight: over 60 s once, mid-sync.
        wait("API server stopped", lambda: apiserver.gone(pid), 90, 0.1)
    except TimeoutError:
        log("API server still stopping after 90 s: SIGKILL")
        os.kill(pid, signal.SIGKILL)
        wait("API server killed", lambda: apiserver.gone(pid), 30, 0.1)
    res_stopped = time.monotonic() - t0
    log(f"API server stopped after {res_stopped:.1f} s")
    if compact:
        etcd = f"http://127.0.0.1:{os.environ.get('DRAVIEW_CLUSTER_ETCD_PORT', '12379')}"
        rev = _etcd(etcd, "/v3/kv/range", {"key": "Lw=="})["header"]["revision"]
        _etcd(etcd, "/v3/kv/compaction", {"revision": rev, "physical": True})
        log(f"etcd compacted at revision {rev}")
    apiserver.start(cmd)
    wait("API server ready", api_ready, 120)
    return time.monotonic() - t0


def _etcd(base: str, path: str, body: dict[str, Any]) -> Any:
    req = urllib.request.Request(base + path, json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def runs(tag: str) -> list[dict[str, Any]]:
    """The audit log's writes by this scenario's replicas, as runs of one writer each."""
    out: list[dict[str, Any]] = []
    for w in sorted(writes(AUDIT, f"draview/{tag}"), key=lambda w: w.began):
        if out and out[-1]["agent"] == w.agent:
            out[-1]["last_end"] = max(out[-1]["last_end"], w.at)
            out[-1]["writes"] += 1
        else:
            out.append({"agent": w.agent, "first": w.began, "last_end": w.at, "writes": 1})
    return out


def scenario(fault: str, mid: int, log_dir: Path, timeout: float) -> dict[str, Any]:
    tag = f"faults-{fault}-{uuid.uuid4().hex[:4]}"
    for plural in ("resourceslicestatuses", "resourcepoolstatuses"):
        # One deletecollection, not kubectl's one DELETE per object (minutes at 5k).
        kubectl("delete", "--raw", f"/apis/draview.io/v1alpha1/{plural}")
    common = ("--leader-elect", "true", "--lease-namespace", "default", "--lease-name", tag)
    a = Operator(KUBECONFIG, (*common, *LEASE, "--identity", f"{tag}-a"))
    b = Operator(KUBECONFIG, (*common, *LEASE, "--identity", f"{tag}-b"))
    res: dict[str, Any] = {"fault": fault}
    try:
        a.start(log_dir)
        wait("a leads", lambda: a.metric("draview_leader") == 1, 120)
        b.start(log_dir)
        wait(f"a has made {mid} writes", lambda: len(writes(AUDIT, f"draview/{tag}-a")) >= mid, 300)
        t_fault = time.monotonic()
        log(f"{fault}: a has written {len(writes(AUDIT, f'draview/{tag}-a'))}")
        if fault == "kill9":
            assert a.proc is not None
            a.proc.kill()
        else:
            res["apiserver_down_seconds"] = round(restart_apiserver(fault == "watch-expiry"), 1)

        def converged() -> bool:
            alive = [op for op in (a, b) if op.proc and op.proc.poll() is None]
            leading = [op for op in alive if op.metric("draview_leader") == 1]
            if not any(op.get("/readyz")[0] == 200 for op in leading):
                return False
            diffs = differences(kubectl)
            res["differences"] = len(diffs)
            return not diffs

        res["converged_after_fault_seconds"] = round(
            wait("converged to analyze", converged, timeout, 5), 1
        )
        res["total_seconds_after_fault"] = round(time.monotonic() - t_fault, 1)
    finally:
        a.stop()
        b.stop()
    res["relists_after_410"] = sum(op.logs().count("watch expired; re-listing") for op in (a, b))
    rs = runs(tag)
    res["writer_runs"] = [
        {
            "agent": r["agent"],
            "writes": r["writes"],
            "from": str(r["first"]),
            "to": str(r["last_end"]),
        }
        for r in rs
    ]
    res["overlaps"] = sum(1 for x, y in itertools.pairwise(rs) if x["last_end"] >= y["first"])
    res["one_writer_at_a_time"] = res["overlaps"] == 0
    return res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("faults", nargs="*", default=["kill9", "apiserver", "watch-expiry"])
    p.add_argument("--mid", type=int, default=1000, help="leader writes before the fault")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--log-dir", default="/tmp/draview-faults")
    p.add_argument("--json", help="append each result here (JSON lines)")
    args = p.parse_args()
    log_dir = Path(args.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    for fault in args.faults:
        log(f"scenario {fault}")
        res = scenario(fault, args.mid, log_dir, args.timeout)
        log(json.dumps(res))
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
