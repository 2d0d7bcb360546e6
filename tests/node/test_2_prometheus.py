"""A real Prometheus scrapes both operator Pods at the endpoints of the chart's Service, over
the node's Pod network. Every query of the chart's dashboard then returns data, and its
alert rules evaluate, with the examples' pools loaded beside the test driver's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from operator_helpers import load_examples
from test_dashboard import (
    EXAMPLES,
    Prometheus,
    capacity_probes,
    prometheus_binary,
    queries_without_data,
)

from kubecluster import REPO_ROOT, KubeCluster
from node import setting

pytestmark = pytest.mark.cluster


def service_targets(k: KubeCluster, namespace: str, service: str) -> list[dict[str, Any]]:
    """The Service's ready endpoints on its `http-metrics` port, as Prometheus' Kubernetes discovery
    of role `endpointslice` would find them (Debian's prometheus is built without it, so
    the test reads the EndpointSlices and hands Prometheus the same targets as a file)."""
    slices = json.loads(k.check(
        "-n", namespace, "get", "endpointslices", "-o", "json",
        "-l", f"kubernetes.io/service-name={service}",
    ))["items"]  # fmt: skip
    out = []
    for s in slices:
        (port,) = [p["port"] for p in s["ports"] if p["name"] == "http-metrics"]
        for e in s["endpoints"]:
            if e["conditions"].get("ready"):
                out.extend(
                    {"targets": [f"{a}:{port}"], "labels": {"pod": e["targetRef"]["name"]}}
                    for a in e["addresses"]
                )
    return out


@pytest.fixture(scope="module")
def prometheus(
    kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prometheus]:
    namespace, service = setting("DRAVIEW_NAMESPACE"), setting("DRAVIEW_RELEASE_NAME")
    workdir: Path = tmp_path_factory.mktemp("prometheus")
    # The test driver's devices have no counters or capacities: the examples add pools
    # that do, so that every panel has something to show.
    files = [str(REPO_ROOT / "examples" / f"{name}.yaml") for name in EXAMPLES]
    load_examples(kube_cluster, files)
    # A capacity probe on the test driver's devices, in a ConfigMap of the release
    # namespace beside the chart's (whose capacityProbes is empty by default).
    kube_cluster.apply(capacity_probes(namespace, setting("DRAVIEW_NODE_DEVICE_CLASS")))

    def two_targets() -> list[dict[str, Any]] | None:
        found = service_targets(kube_cluster, namespace, service)
        return found if len(found) == 2 else None

    found = kube_cluster.wait_for("two ready endpoints of the Service", two_targets)
    (workdir / "targets.json").write_text(json.dumps(found))
    prom = Prometheus(
        prometheus_binary(),
        workdir,
        scrape_configs=[
            {
                "job_name": "draview",
                "file_sd_configs": [{"files": [str(workdir / "targets.json")]}],
            }
        ],
    )
    try:
        prom.wait("both operator Pods scraped",
                  lambda: len(prom.query('up{job="draview"} == 1')) == 2, timeout=90)  # fmt: skip
        prom.wait("the leader's pool gauges",
                  lambda: prom.query('draview_leader == 1')
                  and prom.query('draview_pool_devices')
                  and prom.query('draview_capacity_fit_min'), timeout=60)  # fmt: skip
        # A few more samples, so that every rate() has two points.
        prom.wait("two samples of every series",
                  lambda: prom.query('count_over_time(up{job="draview"}[1m]) >= 4'))  # fmt: skip
        yield prom
    finally:
        prom.stop()
        kube_cluster.run("delete", "-f", ",".join(files), "--ignore-not-found", "--wait=false")
        kube_cluster.run("delete", "configmap", "probes", "-n", namespace, "--ignore-not-found")


def test_both_pods_are_scraped_and_one_leads(prometheus: Prometheus) -> None:
    up = prometheus.query('up{job="draview"}')
    assert len({s["metric"]["pod"] for s in up}) == 2
    leaders = prometheus.query("draview_leader")
    assert sorted(float(s["value"][1]) for s in leaders) == [0.0, 1.0], leaders


def test_every_dashboard_query_returns_data(prometheus: Prometheus) -> None:
    empty = queries_without_data(prometheus)
    assert not empty, "queries without data:\n" + "\n".join(empty)


def test_the_alert_rules_evaluate(prometheus: Prometheus) -> None:
    groups = prometheus.api("/api/v1/rules")["data"]["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert rules
    assert all(r["health"] == "ok" for r in rules), [
        (r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"
    ]
