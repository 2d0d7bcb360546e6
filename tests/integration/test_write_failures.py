"""Write failures on a real API server: the CRDs deleted under a running operator, and
an object over the byte budget."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from operator_helpers import DRIVER, allocate, probes_config_map, rslice, slice_status, uniq
from operator_proc import ROOT, Operator

from draview.api.status import API_GROUP
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


def test_capacity_probes_not_served_leave_the_answers_to_the_metrics_until_they_are(
    crds: KubeCluster, tmp_path: Path
) -> None:
    # The CapacityProbe CRD gone before the probes' objects are first read: the answers
    # still reach the metrics, the log says so once, and the objects come when it returns.
    k, tag = crds, uniq("noprobes")
    ns = k.create_namespace("draview-noprobes")
    cls, slice_name = f"class-{tag}", f"slice-{tag}"
    k.apply(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": cls},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
        }
    )
    k.create(rslice(slice_name, slice_name, [{"name": "dev-0"}, {"name": "dev-1"}]))
    request = {"name": "dev", "exactly": {"deviceClassName": cls}}
    probe = {"name": tag, "claim": {"devices": {"requests": [request]}}}
    k.apply(probes_config_map(ns, [probe]))
    k.check("delete", "crd", f"capacityprobes.{API_GROUP}", "--wait=true")
    args = ("--leader-elect", "false", "--lease-namespace", ns, "--capacity-reload", "0.5")
    op = Operator(k.kubeconfig, args).start(tmp_path)
    try:
        op.wait_ready()
        k.wait_for(
            "the probe's answer in its metric",
            lambda: op.metric("draview_capacity_fit", probe=tag) >= 2 or None,
            timeout=30,
        )
        time.sleep(3)  # rounds go on every 0.2 s: one line says it, none repeats it
        logs = op.logs()
        assert logs.count("cannot read CapacityProbes") == 1, logs[-3000:]
        assert "is not served: CRD missing" in logs
        assert "capacity probe round failed" not in logs, logs[-3000:]
        k.apply_crds()

        def written() -> bool | None:
            r = k.run("get", "capacityprobe", tag, "-o", "json")
            if r.returncode != 0:
                return None
            return json.loads(r.stdout).get("status", {}).get("copies") == 2 or None

        k.wait_for(f"capacityprobe {tag} written", written, timeout=30)
    finally:
        k.apply_crds()  # whatever happened, leave the cluster as other tests need it
        assert op.stop() == 0, op.logs()
        k.run("delete", "capacityprobes", "-l", "app.kubernetes.io/managed-by=draview")
        k.delete("resourceslice", slice_name)
        k.delete("deviceclass", cls)
        k.delete_namespace(ns)


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
