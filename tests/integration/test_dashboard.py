"""Every query of the Grafana dashboard (and every alert rule) against a real Prometheus
scraping a real operator.

The operator runs as a process (leader election on, Lease in the test's namespace) on the
local control plane with the cluster-ready examples loaded; Debian's `prometheus` scrapes
it every second into a temporary storage directory and loads files/rules.yaml. Each panel
target is run through Prometheus' HTTP API with the dashboard variables replaced by `.*`
and then by a real driver and pool: it must parse, and return data unless it only counts
failures (errors, validation errors, unreadable objects) that a healthy run may not have.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_helpers import load_examples, probes_config_map
from operator_proc import ROOT, Operator, free_port

from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster
CHART = ROOT / "charts" / "draview"
DASHBOARD = CHART / "files" / "dashboards" / "draview.json"
EXAMPLES = ["gpus", "mig-a100", "tpu-multihost", "shareable-nic", "taints", "driver-update"]
# Targets over these metrics count failures; a healthy run may have none.
MAY_BE_EMPTY = (
    "dra_resourceslice_status_update_errors_total",
    "dra_pool_validation_errors_total",
    "draview_invalid_objects_total",
)


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def targets() -> list[tuple[str, str]]:
    return [
        (f"{p['title']} [{t['refId']}]", t["expr"])
        for p in dashboard()["panels"]
        for t in p.get("targets", [])
    ]


def substitute(expr: str, values: dict[str, str]) -> str:
    expr = expr.replace("$__rate_interval", "15s").replace("$__range", "2m")
    expr = expr.replace("$__interval", "1s")
    for name in ("job", "driver", "pool"):
        expr = expr.replace(f"${name}", values.get(name, ".*"))
    assert "$" not in expr, f"unknown variable in {expr}"
    return expr


# -- the dashboard's shape (no cluster) -------------------------------------------------


def test_dashboard_is_well_formed() -> None:
    d = dashboard()
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert {"job", "driver", "pool"} <= set(variables)
    titles = " ".join(p["title"] for p in d["panels"])
    for needed in ("Available", "Devices by state", "Counter utilisation", "Capacity",
                   "latency", "errors", "Queue depth", "Staleness", "Leader"):  # fmt: skip
        assert needed in titles, needed
    for p in d["panels"]:
        if p["type"] == "row":
            continue
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        assert p["targets"], p["title"]
        assert p["gridPos"]["w"] <= 24
    # Bounded labels only: no per-device or per-claim series exist to query.
    for name, expr in targets():
        assert not re.search(
            r"\b(device|claim\w*)\s*(=|!=|=~|!~)|by \([^)]*\b(device|claim)", expr
        ), name


# -- against Prometheus and the operator ------------------------------------------------


class Prometheus:
    """Debian's prometheus scraping the operator every second: at 127.0.0.1:target_port,
    or as the given scrape configurations say (service discovery on a real node)."""

    def __init__(
        self,
        binary: str,
        workdir: Path,
        target_port: int = 0,
        scrape_configs: list[dict[str, Any]] | None = None,
    ) -> None:
        self.port = free_port()
        self.workdir = workdir
        rules = workdir / "rules.yaml"
        shutil.copy(CHART / "files" / "rules.yaml", rules)
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules)],
            "scrape_configs": scrape_configs
            or [
                {
                    "job_name": "draview",
                    "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}],
                }
            ],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = workdir / "prometheus.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={workdir / 'prometheus.yml'}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def api(self, path: str, **params: str) -> dict[str, Any]:
        url = f"http://127.0.0.1:{self.port}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body: dict[str, Any] = json.loads(r.read())
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read())
        return body

    def query(self, expr: str) -> list[dict[str, Any]]:
        out = self.api("/api/v1/query", query=expr)
        assert out["status"] == "success", f"{expr}: {out.get('error')}"
        result: list[dict[str, Any]] = out["data"]["result"]
        return result

    def wait(self, what: str, probe: Any, timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                value = probe()
                if value:
                    return value
            except (OSError, AssertionError, KeyError):
                pass
            time.sleep(0.5)
        pytest.fail(f"timed out waiting for {what}\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def prometheus_binary() -> str:
    found = os.environ.get("DRAVIEW_PROMETHEUS") or shutil.which("prometheus")
    if not found:
        pytest.fail("no prometheus binary: apt-get install prometheus (e2e/deploy-checks.sh does)")
    return found


@pytest.fixture(scope="module")
def world(
    kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Operator, Prometheus]]:
    k = kube_cluster
    k.check("apply", "-k", str(ROOT / "deploy" / "crds"))
    crds = (
        "crd/resourceslicestatuses.draview.io",
        "crd/resourcepoolstatuses.draview.io",
        "crd/capacityprobes.draview.io",
    )
    k.check("wait", "--for=condition=Established", "--timeout=60s", *crds)
    ns = k.create_namespace("draview-dash")
    # A capacity probe, for the capacity panels and the capacity alert.
    k.apply(capacity_probes(ns))
    files = [str(ROOT / "examples" / f"{name}.yaml") for name in EXAMPLES]
    workdir = tmp_path_factory.mktemp("dashboard")
    op = Operator(
        k.kubeconfig,
        (
            "--lease-namespace",
            ns,
            "--lease-name",
            f"dash-{uuid.uuid4().hex[:6]}",
            "--partition-attribute",
            "gpu.example.com/profile",
        ),
    ).start(workdir)
    prom: Prometheus | None = None
    try:
        op.wait_ready()
        prom = Prometheus(prometheus_binary(), workdir, op.port)
        load_examples(k, files)
        prom.wait("a scrape of the operator",
                  lambda: prom.query('up{job="draview"} == 1'))  # fmt: skip
        prom.wait("the leader's pool gauges and counters",
                  lambda: prom.query('draview_leader == 1')
                  and prom.query('draview_pool_counter{kind="total"}')
                  and prom.query('draview_pool_capacity{kind="total"}')
                  and prom.query("dra_resourceslice_status_update_duration_seconds_count > 0")
                  and prom.query("draview_capacity_fit_min"),
                  timeout=90)  # fmt: skip
        time.sleep(3)  # a few more samples so that every rate() has two points
        yield op, prom
    finally:
        if prom is not None:
            prom.stop()
        assert op.stop() == 0, op.logs()
        k.run("delete", "-f", ",".join(files), "--ignore-not-found", "--wait=false")
        k.delete_namespace(ns)


GPU = "gpu.example.com"  # examples/gpus.yaml's DeviceClass


def capacity_probes(namespace: str, device_class: str = GPU) -> dict[str, Any]:
    """A ConfigMap defining one capacity probe, for the operator of `namespace`."""
    request = {"name": "dev", "exactly": {"deviceClassName": device_class}}
    probe = {
        "name": "one-device",
        "claim": {"devices": {"requests": [request]}},
        "minCopies": 1,
        "nodeSeries": 3,
    }
    return probes_config_map(namespace, [probe])


def queries_without_data(prom: Prometheus) -> list[str]:
    """The dashboard's targets that return nothing, but for those that only count failures."""
    empty = []
    for name, expr in targets():
        result = prom.query(substitute(expr, {}))
        if not result and not any(m in expr for m in MAY_BE_EMPTY):
            empty.append(f"{name}: {expr}")
    return empty


def test_every_panel_query_returns_data(world: tuple[Operator, Prometheus]) -> None:
    _, prom = world
    empty = queries_without_data(prom)
    assert not empty, "queries without data:\n" + "\n".join(empty)


def test_panel_queries_with_a_chosen_driver_and_pool(world: tuple[Operator, Prometheus]) -> None:
    _, prom = world
    series = prom.query('draview_pool_counter{kind="total"}')[0]["metric"]
    values = {"job": "draview", "driver": series["driver"], "pool": series["pool"]}
    for name, expr in targets():
        result = prom.query(substitute(expr, values))  # must parse and run
        if "draview_pool_devices" in expr or "draview_pool_counter" in expr:
            assert result or "== 0" in expr, f"{name} has no data for {values}"
    available = prom.query(substitute(targets()[0][1], values))
    assert float(available[0]["value"][1]) >= 0


def test_dashboard_variables_have_values(world: tuple[Operator, Prometheus]) -> None:
    _, prom = world
    for var in dashboard()["templating"]["list"]:
        if var["type"] != "query":
            continue
        m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", var["definition"])
        assert m, var["definition"]
        match, label = substitute(m.group(1), {}), m.group(2)
        out = prom.api(f"/api/v1/label/{label}/values", **{"match[]": match})
        assert out["status"] == "success" and out["data"], var["name"]


def test_alert_rules_evaluate_on_real_metrics(world: tuple[Operator, Prometheus]) -> None:
    _, prom = world

    def evaluated() -> list[dict[str, Any]] | None:
        groups = prom.api("/api/v1/rules")["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        return rules if all(r.get("lastEvaluation", "").startswith("2") for r in rules) else None

    rules = prom.wait("rule evaluation", evaluated)
    assert len(rules) == 7
    for rule in rules:
        assert rule["health"] == "ok", rule
    # Where the data says a pool is incomplete, invalid or full, that alert is pending (its
    # `for` has not passed yet) or firing: the expressions match the real series.
    active = {r["name"] for r in rules if r["state"] in ("pending", "firing")}
    expect = {
        "DraviewPoolIncomplete": "max by (driver, pool) (draview_pool_complete) == 0",
        "DraviewPoolInvalid": "max by (driver, pool) (draview_pool_valid) == 0",
    }
    seen = 0
    for alert, expr in expect.items():
        if prom.query(expr):
            seen += 1
            assert alert in active, (alert, rules)
    assert seen, "the examples should hold an incomplete or invalid pool"
