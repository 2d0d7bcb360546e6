"""Prometheus metrics: the seed's names exactly, plus per-pool gauges for dashboards.

Labels are bounded (driver, pool, node, state, counter_set, counter, capacity); never a
device or claim name.
"""

from __future__ import annotations

import itertools
import math
from array import array
from collections.abc import Iterator
from functools import lru_cache
from operator import itemgetter
from typing import Any

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

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
# Read from the writer's queue at scrape time (set_function, in the composition root):
# with workqueue_depth 0 it says everything judged is written, e.g. before a restart.
WRITES_PENDING = Gauge(
    "draview_writes_pending",
    "Status objects handed to the writer and not yet written: waiting or in flight",
)
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
REREADS = Counter(
    "draview_api_rereads_total",
    "Objects read back before writing them: a write of theirs failed (it may have landed) "
    "or was refused as stale (409)",
    ["kind"],
)
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

# Capacity probes (controller/capacity.py): one series a probe, and per node only for
# the nodes a probe asks series for (nodeSeries, at most 100 a probe). Only the leader
# computes probes, so only its series exist.
CAPACITY_FIT = Gauge(
    "draview_capacity_fit",
    "Copies of the probe's claim that can be allocated now, placed one after another; "
    "a lower bound when draview_capacity_fit_bounded is 1",
    ["probe"],
)
CAPACITY_FIT_MAX = Gauge(
    "draview_capacity_fit_max",
    "Copies the luckiest placement fits (equal to draview_capacity_fit unless placement "
    "decides); absent when the search budget ended first",
    ["probe"],
)
CAPACITY_FIT_BOUNDED = Gauge(
    "draview_capacity_fit_bounded",
    "1 when the search budget or the probe's maxCopies ended the count first",
    ["probe"],
)
CAPACITY_FIT_MIN = Gauge(
    "draview_capacity_fit_min",
    "The probe's minCopies: the example alert fires while fewer copies fit",
    ["probe"],
)
CAPACITY_NODE_FIT = Gauge(
    "draview_capacity_node_fit",
    "Copies one node alone takes, for the nodes taking the most (the probe's nodeSeries)",
    ["probe", "node"],
)
CAPACITY_PROBE_ERRORS = Gauge(
    "draview_capacity_probe_errors",
    "Probe definitions that cannot be asked (a bad definition, a missing template or "
    "DeviceClass): their status says why",
)
CAPACITY_SECONDS = Histogram(
    "draview_capacity_probe_duration_seconds",
    "Time to answer one probe again after a pool it depends on changed",
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
)
FIT_REVIEW_SECONDS = Histogram(
    "draview_fit_review_duration_seconds",
    "Time to answer one FitReview of the explain API (kubectl dra fit), once its turn came",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
)


class PoolSeries:
    """One pool's dashboard figures, as numbers: 8 bytes a series, where prometheus
    client children (one object per series) cost about 1 KB a series and a MIG pool has
    hundreds of series. The series are made from these at scrape time (PoolCollector).
    Label-name tuples are shared between pools of the same layout."""

    __slots__ = (
        "capacities",
        "capacity_values",
        "complete",
        "counter_values",
        "counters",
        "counts",
        "node",
        "states",
        "valid",
    )

    def __init__(self, result: PoolResult) -> None:
        status = result.status
        self.node = result.node_name or ""
        self.states = _shared(tuple(result.states))
        self.counts = tuple(result.states.values())
        names: list[tuple[str, str]] = []
        texts: list[str] = []
        # One pass in C per counter (map, itemgetter): a MIG pool has hundreds, and this
        # runs for every pool judged.
        for cs in status.get("counterSets", ()):
            set_name, counters = cs["name"], cs["counters"]
            names.extend(zip(itertools.repeat(set_name), counters))
            texts.extend(itertools.chain.from_iterable(map(_USAGE, counters.values())))
        self.counters = _shared(tuple(names))
        self.counter_values = array("d", map(_num, texts))
        summary: dict[str, Any] = dict(status["summary"])
        totals = summary.get("totalCapacity", {})
        self.capacities = _shared(tuple(totals))
        self.capacity_values = array("d")
        for name in self.capacities:
            for field in ("totalCapacity", "allocatedCapacity", "availableCapacity"):
                q = summary.get(field, {}).get(name)
                self.capacity_values.append(_num(q) if q is not None else math.nan)
        conds = {c["type"]: c["status"] == "True" for c in status["conditions"]}
        self.complete = conds.get("Complete", False)
        self.valid = conds.get("Valid", False)


KINDS = ("total", "consumed", "available")
_USAGE = itemgetter(*KINDS)
CAPACITY_KINDS = ("total", "allocated", "available")
_SHARED: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _shared(names: tuple[Any, ...]) -> tuple[Any, ...]:
    return _SHARED.setdefault(names, names)


class PoolCollector(Collector):
    """draview_pool_* series of every pool, made when Prometheus scrapes."""

    def __init__(self) -> None:
        self.pools: dict[tuple[str, str], PoolSeries] = {}

    def describe(self) -> Iterator[Metric]:
        return iter(self._families())

    def _families(self) -> tuple[GaugeMetricFamily, ...]:
        def family(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=["driver", "pool", *labels])

        return (
            family("draview_pool_devices", "Current devices of a pool by state", ["node", "state"]),
            family(
                "draview_pool_counter",
                "Shared counters of a pool: total, consumed, available",
                ["counter_set", "counter", "kind"],
            ),
            family(
                "draview_pool_capacity",
                "Consumable capacity of a pool's shareable devices: total, allocated, available",
                ["capacity", "kind"],
            ),
            family("draview_pool_complete", "1 when every slice is published", []),
            family("draview_pool_valid", "1 when the pool has no validation errors", []),
        )

    def collect(self) -> Iterator[Metric]:
        devices, counter, capacity, complete, valid = self._families()
        for (driver, pool), s in list(self.pools.items()):
            for state, n in zip(s.states, s.counts, strict=True):
                devices.add_metric([driver, pool, s.node, state], n)
            values = iter(s.counter_values)
            for counter_set, name in s.counters:
                for kind in KINDS:
                    counter.add_metric([driver, pool, counter_set, name, kind], next(values))
            values = iter(s.capacity_values)
            for name in s.capacities:
                for kind in CAPACITY_KINDS:
                    v = next(values)
                    if not math.isnan(v):
                        capacity.add_metric([driver, pool, name, kind], v)
            complete.add_metric([driver, pool], float(s.complete))
            valid.add_metric([driver, pool], float(s.valid))
        return iter((devices, counter, capacity, complete, valid))


POOLS = PoolCollector()
REGISTRY.register(POOLS)


@lru_cache(maxsize=4096)
def _num(text: str) -> float:
    # Pools repeat a few quantities ("40Gi", "7", "0") thousands of times.
    return float(parse_quantity(text).as_fraction())


def forget_pool(key: tuple[str, str]) -> None:
    POOLS.pools.pop(key, None)


def record_pool(result: PoolResult, new_errors: list[str]) -> None:
    """Replace the pool's figures, so that vanished counters or states do not linger."""
    driver, pool = result.key
    POOLS.pools[result.key] = PoolSeries(result)
    for err in new_errors:
        VALIDATION_ERRORS.labels(driver, pool, err.split(":", 1)[0]).inc()
