"""Write failures on a real API server: the CRDs deleted under a running operator, and
an object over the byte budget."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from operator_helpers import allocate, rslice, slice_status, uniq
from operator_proc import ROOT, Operator

from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster


def test_crds_deleted_while_running_make_it_unready_quietly_then_it_recovers(
    crds: KubeCluster, tmp_path: Path
) -> None:
    first, second = uniq("crdloss"), uniq("crdloss")
    crds.create(rslice(first, first, [{"name": "gpu-0"}]))
    op = Operator(crds.kubeconfig, ("--leader-elect", "false")).start(tmp_path)
    try:
        op.wait_ready()
        crds.wait_for("first status", lambda: slice_status(crds, first), timeout=30)
        crds.check("delete", "-k", str(ROOT / "deploy" / "crds"), "--wait=true")
        # A change the operator must write: a patch (object gone), then a create (kind gone).
        crds.create(rslice(second, second, [{"name": "gpu-0"}]))
        crds.wait_for("not ready", lambda: op.get("/readyz")[0] == 503, timeout=30)
        lines_before = len(op.logs().splitlines())
        time.sleep(10)  # batches go on every 0.2 s: none of them may log again
        quiet = op.logs().splitlines()[lines_before:]
        assert len(quiet) <= 3, quiet
        _, why = _readyz(op)
        assert "CRD missing" in why
        crds.apply_crds()
        op.wait_ready(timeout=60)
        for name in (first, second):
            crds.wait_for(f"{name} re-created", lambda n=name: slice_status(crds, n), timeout=60)
        assert op.proc is not None and op.proc.poll() is None
    finally:
        crds.apply_crds()  # whatever happened, leave the cluster as other tests need it
        assert op.stop() == 0, op.logs()
        crds.delete("resourceslice", first, second)


def _readyz(op: Operator) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{op.port}/readyz", timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_an_object_over_the_byte_budget_is_written_truncated(
    crds: KubeCluster, kube_namespace: str, tmp_path: Path
) -> None:
    pool, name = uniq("budget"), uniq("budget")
    crds.create(rslice(name, pool, [{"name": "gpu-0"}]))
    claims = [f"{i:02d}-" + "c" * 240 for i in range(32)]  # ~9 KiB of allocations
    for claim in claims:
        allocate(crds, kube_namespace, claim, pool, "gpu-0")
    op = Operator(crds.kubeconfig, ("--leader-elect", "false", "--max-object-bytes", "10000"))
    op.start(tmp_path)
    try:
        op.wait_ready()

        def device() -> dict[str, object] | None:
            obj = slice_status(crds, name)
            devs = (obj or {}).get("status", {}).get("devices", [])
            return devs[0] if devs and devs[0].get("allocationCount") == len(claims) else None

        dev = crds.wait_for("the status with every allocation counted", device, timeout=60)
        assert dev["allocationsTruncated"] is True
        listed = dev["allocations"]
        assert isinstance(listed, list) and 0 < len(listed) < len(claims)
        assert op.metric("dra_resourceslice_status_update_errors_total") == 0
    finally:
        assert op.stop() == 0, op.logs()
        crds.delete("resourceslice", name)
