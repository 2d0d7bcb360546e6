"""Prometheus metrics: the seed's names exactly, plus per-pool gauges for dashboards.

Labels are bounded (driver, pool, node, state, counter_set, counter, capacity); never a
device or claim name.
"""

from __future__ import annotations

import contextlib
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from draview.engine.pool import PoolResult
from draview.quantity import parse_quantity

UPDATE_DURATION = Histogram(
    "dra_resourceslice_status_update_duration_seconds",
    "Time from a watched change to its status being written",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
)
UPDATE_ERRORS = Counter(
    "dra_resourceslice_status_update_errors_total",
    "Status writes that failed, by kind and HTTP status (or timeout, connection)",
    ["kind", "code"],
)
SYNC_TOTAL = Counter(
    "dra_resourceslice_status_controller_sync_total", "Batches the controller computed"
)
QUEUE_DEPTH = Gauge("workqueue_depth", "Pools waiting to be recomputed", ["name"])
STALENESS = Gauge(
    "dra_resourceslice_status_staleness_seconds",
    "Age of the oldest change not yet reflected in status (0 when up to date)",
)
CLAIMS_TRACKED = Gauge(
    "dra_resourceslice_claims_tracked_total", "Allocated ResourceClaims the controller tracks"
)
VALIDATION_ERRORS = Counter(
    "dra_pool_validation_errors_total",
    "Validation errors newly seen on a pool, by prefix",
    ["driver", "pool", "type"],
)
WRITES = Counter("draview_api_writes_total", "API writes by verb", ["verb", "kind"])
INVALID_OBJECTS = Counter(
    "draview_invalid_objects_total", "Watched objects that could not be read", ["kind"]
)
COMPUTE_ERRORS = Counter(
    "draview_pool_compute_errors_total",
    "Pools whose computation raised (their objects stay as last written)",
)
TASK_FAILURES = Counter(
    "draview_task_failures_total", "Internal tasks that failed and ended the process", ["task"]
)
IS_LEADER = Gauge("draview_leader", "1 while this replica holds the leader lease")
NODES = Gauge("draview_nodes", "Nodes known from the metadata-only Node watch")
PROFILE = Gauge(
    "draview_profile_info",
    "1 for the profile pools are judged with: the Kubernetes release, the allocator "
    "implementation its scheduler picks, and where the feature gates came from",
    ["kubernetes_version", "allocator", "gates"],
)
NODES_WATCHED = Gauge(
    "draview_nodes_watched",
    "1 while Nodes are watched; 0: pools that select nodes are judged from assumed nodes",
)

POOL_DEVICES = Gauge(
    "draview_pool_devices",
    "Current devices of a pool by state",
    ["driver", "pool", "node", "state"],
)
POOL_COUNTER = Gauge(
    "draview_pool_counter",
    "Shared counters of a pool: total, consumed, available",
    ["driver", "pool", "counter_set", "counter", "kind"],
)
POOL_CAPACITY = Gauge(
    "draview_pool_capacity",
    "Consumable capacity of a pool's shareable devices: total, allocated, available",
    ["driver", "pool", "capacity", "kind"],
)
POOL_COMPLETE = Gauge(
    "draview_pool_complete", "1 when every slice is published", ["driver", "pool"]
)
POOL_VALID = Gauge(
    "draview_pool_valid", "1 when the pool has no validation errors", ["driver", "pool"]
)

_series: dict[tuple[str, str], list[tuple[Gauge, tuple[str, ...]]]] = {}


def _num(text: str) -> float:
    return float(parse_quantity(text).as_fraction())


def forget_pool(key: tuple[str, str]) -> None:
    for gauge, labels in _series.pop(key, []):
        with contextlib.suppress(KeyError):
            gauge.remove(*labels)


def record_pool(result: PoolResult, new_errors: list[str]) -> None:
    """Replace the pool's series so that vanished counters or states do not linger."""
    forget_pool(result.key)
    driver, pool = result.key
    series: list[tuple[Gauge, tuple[str, ...]]] = []

    def put(gauge: Gauge, labels: tuple[str, ...], value: float) -> None:
        gauge.labels(*labels).set(value)
        series.append((gauge, labels))

    node = result.node_name or ""
    for state, n in result.states.items():
        put(POOL_DEVICES, (driver, pool, node, state), n)
    status = result.status
    for cs in status.get("counterSets", []):
        for name, usage in cs["counters"].items():
            for kind in ("total", "consumed", "available"):
                put(POOL_COUNTER, (driver, pool, cs["name"], name, kind), _num(usage[kind]))
    summary: dict[str, Any] = dict(status["summary"])
    for kind, field in (
        ("total", "totalCapacity"),
        ("allocated", "allocatedCapacity"),
        ("available", "availableCapacity"),
    ):
        for name, q in summary.get(field, {}).items():
            put(POOL_CAPACITY, (driver, pool, name, kind), _num(q))
    conds = {c["type"]: c["status"] == "True" for c in status["conditions"]}
    put(POOL_COMPLETE, (driver, pool), float(conds.get("Complete", False)))
    put(POOL_VALID, (driver, pool), float(conds.get("Valid", False)))
    _series[result.key] = series
    for err in new_errors:
        VALIDATION_ERRORS.labels(driver, pool, err.split(":", 1)[0]).inc()
