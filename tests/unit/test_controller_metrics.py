"""Per-pool dashboard series: made from each pool's figures when Prometheus scrapes, so
that a pool costs a few hundred bytes, not a client object per series."""

from __future__ import annotations

from pathlib import Path

from builders import world
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from draview.cli.inputs import parse_text
from draview.controller import metrics
from draview.engine.world import compute_world

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def scrape() -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(generate_latest().decode()):
        if family.name.startswith("draview_pool_"):
            for sample in family.samples:
                out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def record(example: str) -> list[tuple[str, str]]:
    keys = []
    objects = parse_text((EXAMPLES / example).read_text(), example)
    for result in compute_world(world(*objects)):
        metrics.record_pool(result, [])
        keys.append(result.key)
    return keys


def test_a_scrape_shows_each_pools_states_counters_capacity_and_conditions() -> None:
    keys = record("mig-a100.yaml") + record("shareable-nic.yaml")
    try:
        series = scrape()
        mig = {"driver": "gpu.example.com", "pool": "gpu-node-1"}
        devices = {
            s["state"]: v for s, v in series["draview_pool_devices"] if s.items() >= mig.items()
        }
        assert devices["Allocated"] == 2 and sum(devices.values()) == 26
        memory = {
            s["kind"]: v
            for s, v in series["draview_pool_counter"]
            if s.items() >= mig.items()
            and s["counter_set"] == "gpu-0-counter-set"
            and s["counter"] == "memory"
        }
        # 40Gi, of which 24832Mi are taken by the two MIG devices in use.
        assert memory == {
            "total": 40 * 2**30,
            "consumed": 24832 * 2**20,
            "available": (40 * 1024 - 24832) * 2**20,
        }
        nic = {"driver": "nic.example.com", "pool": "net-node-1", "capacity": "bandwidth"}
        bandwidth = {
            s["kind"]: v for s, v in series["draview_pool_capacity"] if s.items() >= nic.items()
        }
        assert bandwidth == {"total": 200e9, "allocated": 150e9, "available": 50e9}
        complete = [v for s, v in series["draview_pool_complete"] if s == mig]
        assert complete == [1.0]
    finally:
        for key in keys:
            metrics.forget_pool(key)
    assert not any(
        s.get("pool") in {"gpu-node-1", "net-node-1"} for rows in scrape().values() for s, _ in rows
    )


def test_pools_of_one_layout_share_their_label_names() -> None:
    keys = record("shareable-nic.yaml")
    try:
        a, b = (metrics.POOLS.pools[k] for k in keys)
        assert a.capacities is b.capacities and a.states is b.states
    finally:
        for key in keys:
            metrics.forget_pool(key)
