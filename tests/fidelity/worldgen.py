"""Seeded random DRA worlds that a Kubernetes v1.37 API server with every DRA gate accepts
(apiserver.py holds them as the API servers of other releases and gate sets would).

``generate(seed)`` builds a small cluster state — Nodes, Namespaces, DeviceClasses,
ResourceSlices, DeviceTaintRules and allocated ResourceClaims — plus pending claims to ask
"why" about. The worlds are deliberately nasty: stale pool generations, incomplete pools,
slices that disagree on their count, duplicate device names, MIG-style overlapping
partitions, shareable devices with and without capacity, taints, overcommitted counters and
capacity, dangling and inconsistent allocations. Every object stays within what the API
server validates (pkg/apis/resource/validation in v1.36.3): the point is that a real cluster
can hold each world, so a differential run against the scheduler's allocator is meaningful.

Only ``random.Random(seed)`` decides, so a seed names a world for good; list-typed and
derived attributes (worldgen_lists.py) are drawn from a stream of their own afterwards.
"""

from __future__ import annotations

import copy
import random
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .worldgen_gated import add_gated
from .worldgen_lists import LIST_FEATURES, with_lists

Obj = dict[str, Any]

RESOURCE_V1 = "resource.k8s.io/v1"
RESOURCE_V1BETA2 = "resource.k8s.io/v1beta2"
ADMIN_LABEL = "resource.kubernetes.io/admin-access"
DEVICE_TAINT_KEY = "example.com/unhealthy"
RULE_TAINT_KEY = "example.com/maintenance"
RACK_LABEL = "topology.example.com/rack"
FABRIC_LABEL = "example.com/fabric"
HOSTNAME_LABEL = "kubernetes.io/hostname"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
# A harness adds attributes to every device later; the API allows 32 attributes+capacities.
MAX_ATTRS_AND_CAPS = 28

FEATURES: tuple[str, ...] = (
    # drivers, pools, placement
    "multi-driver",
    "multi-slice-pool",
    "slice-node-name",
    "slice-node-selector",
    "slice-all-nodes",
    "slice-per-device-node",
    "device-node-name",
    "device-node-selector",
    "device-all-nodes",
    "node-unmatched",
    "selector-no-node",
    "pool-name-slash",
    # generations and completeness
    "stale-generation",
    "partial-new-generation",
    "rollout-by-selector",
    "views-differ-generation",
    "views-differ-count",
    "generation-zero",
    "generation-absent",
    "incomplete-pool",
    "slice-count-disagree",
    "empty-pool",
    "dup-device-node",
    "dup-device-across-nodes",
    # partitionable devices
    "shared-counters",
    "mig-layout",
    "whole-gpu-no-counters",
    "multi-counter-set-device",
    "zero-counter",
    "counter-set-missing",
    "counter-missing",
    "dup-counter-set",
    # shareable devices
    "shareable-capacity",
    "shareable-no-capacity",
    "shareable-no-policy",
    "policy-default",
    "policy-range",
    "policy-values",
    "shareable-counters",
    # attributes and quantities
    "foreign-attribute",
    "odd-quantity",
    "partition-attribute",
    # taints
    "taint-noschedule",
    "taint-noexecute",
    "taint-none",
    "taint-rule-driver",
    "taint-rule-pool",
    "taint-rule-device",
    "taint-rule-no-match",
    # existing allocations
    "alloc-exclusive",
    "alloc-double-exclusive",
    "alloc-multi-device",
    "alloc-first-available",
    "alloc-shared-capacity",
    "alloc-shared-no-capacity",
    "alloc-shareable-no-shareid",
    "alloc-shareid-not-shareable",
    "alloc-admin",
    "alloc-dangling",
    "alloc-counter-overcommit",
    "alloc-capacity-overcommit",
    # pending claims, classes, CEL
    "pending-count",
    "pending-all",
    "pending-first-available",
    "pending-capacity",
    "pending-toleration",
    "pending-admin",
    "pending-constraint",
    "pending-mixed-reach",
    "cel-attribute",
    "cel-capacity",
    "cel-guarded",
    "cel-runtime-error",
    "class-selector",
    "class-no-selector",
    # gated fields (worldgen_gated.py)
    "binding-conditions",
    "binds-to-node",
    "fractional-range",
    "pending-fractional",
    "compatibility-groups",
    "skip-node-operations",
    # list-typed and derived attributes, drawn apart (worldgen_lists.py)
    *LIST_FEATURES,
)


@dataclass
class World:
    """One generated cluster state; see the module docstring."""

    seed: int
    objects: list[Obj]
    pending: list[Obj]
    partition_attributes: tuple[str, ...]
    features: frozenset[str]


@dataclass(frozen=True)
class _Size:
    workers: int
    pools: int
    devices: int
    allocated: int
    pending: int


_SIZES = {
    "small": _Size(workers=3, pools=6, devices=50, allocated=16, pending=14),
    "medium": _Size(workers=6, pools=12, devices=200, allocated=40, pending=30),
}


def generate(seed: int, size: str = "small") -> World:
    """The world named by ``seed``: same seed, same objects."""
    if size not in _SIZES:
        raise ValueError(f"unknown size {size!r}; choose one of {sorted(_SIZES)}")
    # List-typed and derived attributes come from a random stream of their own, after
    # everything else: the objects the seed named before keep what they had.
    return with_lists(_Builder(seed, _SIZES[size]).build())


# --- quantities ----------------------------------------------------------------------------

_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 10**3, "M": 10**6, "G": 10**9}


def parse_quantity(text: str) -> int:
    """The integer value of the simple quantities this module writes ("40Gi", "1k", "7")."""
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix):
            return int(text[: -len(suffix)]) * _SUFFIXES[suffix]
    return int(text)


def _fmt(value: int, unit: str) -> str:
    """``value`` (base units) written with ``unit`` when it divides evenly, else plainly."""
    if unit and value and value % _SUFFIXES[unit] == 0:
        return f"{value // _SUFFIXES[unit]}{unit}"
    return str(value)


# --- small object helpers ------------------------------------------------------------------


class _Version(str):
    """Marks an attribute value as a semver version rather than a string."""


def _attribute(value: Any) -> Obj:
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, _Version):
        return {"version": str(value)}
    return {"string": str(value)}


def _name_term(*nodes: str) -> Obj:
    """A node selector term the way the scheduler writes one for node-local devices."""
    return {"matchFields": [{"key": "metadata.name", "operator": "In", "values": list(nodes)}]}


def _selector(*terms: Obj) -> Obj:
    return {"nodeSelectorTerms": list(terms)}


def term_matches(term: Obj, name: str, labels: dict[str, str]) -> bool:
    """Whether a node selector term (the subset this module writes) selects the node."""
    for expr in term.get("matchExpressions", []):
        value = labels.get(expr["key"])
        op = expr["operator"]
        if op == "In" and value not in expr["values"]:
            return False
        if op == "NotIn" and value in expr["values"]:
            return False
        if op == "Exists" and value is None:
            return False
        if op == "DoesNotExist" and value is not None:
            return False
    for expr in term.get("matchFields", []):
        if expr["key"] != "metadata.name":
            return False
        if (name in expr["values"]) != (expr["operator"] == "In"):
            return False
    return True


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


# --- bookkeeping ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Node:
    name: str
    labels: dict[str, str]


@dataclass
class _Policy:
    kind: str  # "none", "default", "range", "values"
    body: Obj | None
    amounts: list[int]  # request sizes the policy allows, ascending


@dataclass
class _Capacity:
    value: int
    unit: str
    policy: _Policy


@dataclass
class _Dev:
    """What the allocation and claim generators need to know about a published device."""

    driver: str
    pool: str
    name: str
    body: Obj
    alloc_selector: Obj | None
    current: bool = True
    shareable: bool = False
    capacity: dict[str, _Capacity] = field(default_factory=dict)
    counters: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def attrs(self) -> dict[str, Obj]:
        attrs: dict[str, Obj] = self.body.get("attributes", {})
        return attrs

    @property
    def tainted(self) -> bool:
        return bool(self.body.get("taints"))


@dataclass
class _Pool:
    driver: str
    name: str
    kind: str
    slices: list[Obj] = field(default_factory=list)
    counter_sets: dict[str, dict[str, int]] = field(default_factory=dict)
    generation: int | None = 1


# --- device catalog ------------------------------------------------------------------------

_KIND_OF_DRIVER = {
    "gpu.example.com": "gpu",
    "nic.example.com": "nic",
    "accel.example.com": "accel",
    "fpga.example.com": "fpga",
}
_ARCHETYPES = {
    "gpu": (("mig", 5), ("local", 3), ("spread", 3), ("per-device", 1), ("empty", 1)),
    "nic": (("shared", 5), ("network", 2), ("spread", 1), ("local", 1), ("empty", 1)),
    "accel": (("counters", 4), ("shared", 2), ("network", 1), ("per-device", 2), ("local", 1)),
    "fpga": (("local", 2), ("network", 2), ("per-device", 2), ("counters", 1), ("spread", 1)),
}
_GPU_MODELS = (("A100-SXM4-40GB", "40Gi"), ("H100-80GB-HBM3", "80Gi"), ("B200", "284208Mi"))
_PROFILES = ("small", "medium", "large")

# NVIDIA A100-40GB MIG placements: (tag, profile, memory slices, starts, memory Mi, SMs,
# copy engines, decoders, jpeg, ofa).
_MIG = (
    ("1g5gb", "1g.5gb", 1, (0, 1, 2, 3, 4, 5, 6), 4864, 14, 1, 0, 0, 0),
    ("1g5gb-me", "1g.5gb+me", 1, (0, 1, 2, 3, 4, 5, 6), 4864, 14, 1, 1, 1, 1),
    ("1g10gb", "1g.10gb", 2, (0, 2, 4, 6), 9856, 14, 1, 1, 0, 0),
    ("2g10gb", "2g.10gb", 2, (0, 2, 4), 9856, 28, 2, 1, 0, 0),
    ("3g20gb", "3g.20gb", 4, (0, 4), 19968, 42, 3, 2, 0, 0),
    ("4g20gb", "4g.20gb", 4, (0,), 19968, 56, 4, 2, 0, 0),
    ("7g40gb", "7g.40gb", 8, (0,), 40192, 98, 7, 5, 1, 1),
)
_MIG_SET = {
    "memory": 40 * 2**30,
    **{f"memory-slice-{i}": 1 for i in range(8)},
    "copy-engines": 7,
    "decoders": 5,
    "encoders": 0,
    "jpeg-engines": 1,
    "ofa-engines": 1,
    "multiprocessors": 98,
}
_GEN_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"


class _Builder:
    """Builds one world; every choice goes through ``self.rng``."""

    def __init__(self, seed: int, size: _Size) -> None:
        self.seed = seed
        self.size = size
        self.rng = random.Random(seed)
        self.features: set[str] = set()
        self.workers: list[_Node] = []
        self.spare: list[_Node] = []
        self.pools: list[_Pool] = []
        self.devs: list[_Dev] = []
        self.classes: dict[str, Obj] = {}
        self.rules: list[Obj] = []
        self.claims: list[Obj] = []
        self.pending: list[Obj] = []
        self.namespaces: dict[str, dict[str, str]] = {}
        self.names: set[str] = set()
        self.partition_attrs: set[str] = set()

    # --- top level -------------------------------------------------------------------------

    def build(self) -> World:
        self._make_nodes()
        self._make_pools()
        self._make_taint_rules()
        self._make_allocations()
        self._make_pending()
        # Deep copies: callers may edit the objects, and builders share sub-objects.
        objects = copy.deepcopy(self._objects())
        self.features |= add_gated(self.seed, objects, self.pending)
        if self._has_partition_types():
            self.features.add("partition-attribute")
        self.features |= _observed_features(objects, self._all_nodes())
        unknown = self.features - set(FEATURES)
        assert not unknown, f"undeclared features {unknown}"
        return World(
            seed=self.seed,
            objects=objects,
            pending=copy.deepcopy(self.pending),
            partition_attributes=tuple(sorted(self.partition_attrs)),
            features=frozenset(self.features),
        )

    def _objects(self) -> list[Obj]:
        out: list[Obj] = []
        for name, labels in sorted(self.namespaces.items()):
            meta: Obj = {"name": name}
            if labels:
                meta["labels"] = dict(labels)
            out.append({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
        for node in self._all_nodes():
            meta = {"name": node.name, "labels": dict(node.labels)}
            out.append({"apiVersion": "v1", "kind": "Node", "metadata": meta})
        out.extend(self.classes.values())
        for pool in self.pools:
            out.extend(pool.slices)
        out.extend(self.rules)
        out.extend(self.claims)
        return out

    def _has_partition_types(self) -> bool:
        """Some partition attribute value is carried by several current devices."""
        seen: dict[tuple[str, str], int] = {}
        for dev in self.devs:
            profile = dev.attrs.get("profile", {}).get("string")
            if dev.current and profile and f"{dev.driver}/profile" in self.partition_attrs:
                seen[(dev.driver, profile)] = seen.get((dev.driver, profile), 0) + 1
        return any(n >= 2 for n in seen.values())

    def _all_nodes(self) -> list[_Node]:
        return self.workers + self.spare

    def _chance(self, p: float) -> bool:
        return self.rng.random() < p

    def _unique(self, base: str) -> str:
        """``base`` or ``base-N``: names must be unique within the world."""
        name, n = base, 1
        while name in self.names:
            n += 1
            name = f"{base}-{n}"
        self.names.add(name)
        return name

    # --- nodes -----------------------------------------------------------------------------

    def _make_nodes(self) -> None:
        n = self.rng.randint(1, self.size.workers)
        for i in range(n):
            labels = {HOSTNAME_LABEL: f"worker-{i}", RACK_LABEL: f"rack-{i % 2}"}
            if i == 0 or self._chance(0.5):
                labels[FABRIC_LABEL] = "true"
            self.workers.append(_Node(f"worker-{i}", labels))
        # A node no selector chooses: slices must not reach it by accident.
        if self._chance(0.6):
            labels = {HOSTNAME_LABEL: "spare-0", RACK_LABEL: "rack-z"}
            self.spare.append(_Node("spare-0", labels))

    def _node_term(self) -> Obj:
        """A node selector term that matches at least one worker."""
        target = self.rng.choice(self.workers)
        choice = self.rng.randrange(4)
        if choice == 0:
            return {"matchExpressions": [_in(RACK_LABEL, target.labels[RACK_LABEL])]}
        if choice == 1:
            return {"matchExpressions": [{"key": FABRIC_LABEL, "operator": "Exists"}]}
        if choice == 2:
            return _name_term(target.name)
        names = sorted({target.name, self.rng.choice(self.workers).name})
        return {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": names}]}

    # --- pools -----------------------------------------------------------------------------

    def _make_pools(self) -> None:
        drivers = self._pick_drivers()
        n_pools = self.rng.randint(max(1, len(drivers)), self.size.pools)
        builders: dict[str, Callable[[_Pool], None]] = {
            "mig": self._fill_mig,
            "local": self._fill_local,
            "spread": self._fill_spread,
            "per-device": self._fill_per_device,
            "empty": self._fill_empty,
            "shared": self._fill_shared,
            "network": self._fill_network,
            "counters": self._fill_counters,
        }
        for i in range(n_pools):
            if self._budget() < 3:
                break
            driver = drivers[i] if i < len(drivers) else self.rng.choice(drivers)
            choices = _ARCHETYPES[_KIND_OF_DRIVER[driver]]
            kind = self.rng.choices([k for k, _ in choices], [w for _, w in choices])[0]
            pool = _Pool(driver=driver, name="", kind=kind)
            builders[kind](pool)
            self._finish_pool(pool)
            self.pools.append(pool)

    def _pick_drivers(self) -> list[str]:
        all_drivers = list(_KIND_OF_DRIVER)
        n = self.rng.choices((1, 2, 3, 4), (3, 4, 2, 1))[0]
        others = self.rng.sample(all_drivers[1:], n - 1)
        # The GPU driver is in most worlds because most partitionable layouts are GPUs.
        first = all_drivers[0] if self._chance(0.8) else self.rng.choice(all_drivers[1:])
        return [first, *[d for d in others if d != first]][:n] or [first]

    def _budget(self) -> int:
        return self.size.devices - len(self.devs)

    def _pool_name(self, pool: _Pool, node: str | None, base: str) -> str:
        """Node-local pools are named after their node, like real drivers name them."""
        stem = node or base
        taken = {p.name for p in self.pools if p.driver == pool.driver}
        if node is None and self._chance(0.15):
            stem = f"zone-a/{stem}"
            self.features.add("pool-name-slash")
        name, n = stem, 1
        while name in taken:
            n += 1
            name = f"{stem}-{n}"
        return name

    def _new_slice(self, pool: _Pool, placement: Obj, hint: str) -> Obj:
        short = pool.driver.split(".")[0]
        stem = pool.name.replace("/", "-")
        if self._chance(0.5):
            rand = "".join(self.rng.choice(_GEN_SUFFIX) for _ in range(5))
            base = f"{hint}-{pool.driver}-{rand}"
        else:
            base = f"{stem}-{short}-{hint}"
        spec: Obj = {"driver": pool.driver, "pool": {"name": pool.name}, **placement}
        return {
            "apiVersion": RESOURCE_V1,
            "kind": "ResourceSlice",
            "metadata": {"name": self._unique(base)},
            "spec": spec,
        }

    def _add_devices(self, pool: _Pool, slc: Obj, devs: list[_Dev]) -> None:
        slc["spec"]["devices"] = [d.body for d in devs]
        self.devs.extend(devs)

    def _placement(self, pool: _Pool) -> tuple[Obj, Obj | None, str | None]:
        """A slice placement, the allocation node selector it implies and its node."""
        choice = self.rng.randrange(3)
        if choice == 0:
            node = self.rng.choice(self.workers).name
            return {"nodeName": node}, _selector(_name_term(node)), node
        if choice == 1:
            term = self._node_term()
            return {"nodeSelector": _selector(term)}, _selector(term), None
        return {"allNodes": True}, None, None

    # --- archetypes ------------------------------------------------------------------------

    def _fill_local(self, pool: _Pool) -> None:
        node = self.rng.choice(self.workers).name
        pool.name = self._pool_name(pool, node, "local")
        n_slices = self.rng.choices((1, 2, 3, 4), (4, 3, 2, 1))[0]
        n_devs = self.rng.randint(1, min(6, self._budget()))
        slices = [self._new_slice(pool, {"nodeName": node}, node) for _ in range(n_slices)]
        kind = _KIND_OF_DRIVER[pool.driver]
        devs = [
            self._device(pool, f"{kind}-{i}", kind, i, _selector(_name_term(node)))
            for i in range(n_devs)
        ]
        for i, slc in enumerate(slices):
            part = devs[i::n_slices]
            if part or self._chance(0.5):
                self._add_devices(pool, slc, part)
        self._maybe_duplicate_in_view(pool, slices)
        pool.slices.extend(slices)

    def _maybe_duplicate_in_view(self, pool: _Pool, slices: list[Obj]) -> None:
        """Two slices of one pool on one node publishing the same device name."""
        with_devs = [s for s in slices if s["spec"].get("devices")]
        if len(with_devs) < 2 or not self._chance(0.35):
            return
        a, b = self.rng.sample(with_devs, 2)
        twin = copy.deepcopy(self.rng.choice(a["spec"]["devices"]))
        b["spec"]["devices"].append(twin)
        alloc = _alloc_selector_of(b, twin)
        self.devs.append(_Dev(pool.driver, pool.name, twin["name"], twin, alloc))

    def _fill_spread(self, pool: _Pool) -> None:
        """One pool across nodes: every node publishes the same device names."""
        pool.name = self._pool_name(pool, None, "cluster")
        n = len(self.workers)
        nodes = self.rng.sample(self.workers, self.rng.randint(min(2, n), n))
        kind = _KIND_OF_DRIVER[pool.driver]
        per_node = max(1, min(3, self._budget() // max(1, len(nodes))))
        for node in nodes:
            slc = self._new_slice(pool, {"nodeName": node.name}, node.name)
            sel = _selector(_name_term(node.name))
            devs = [self._device(pool, f"{kind}-{i}", kind, i, sel) for i in range(per_node)]
            self._add_devices(pool, slc, devs)
            pool.slices.append(slc)
        if len(nodes) >= 2 and self._chance(0.7):
            self._partial_new_generation(pool, nodes, kind, per_node)

    def _partial_new_generation(
        self, pool: _Pool, nodes: list[_Node], kind: str, per_node: int
    ) -> None:
        """A driver update that has reached only some nodes yet."""
        pool.generation = self.rng.randint(1, 3)
        for slc in pool.slices:
            slc["spec"]["pool"]["generation"] = pool.generation
            slc["spec"]["pool"]["resourceSliceCount"] = len(nodes)
        for dev in self.devs:
            if dev.pool == pool.name and dev.driver == pool.driver:
                dev.current = False
        reached = self.rng.sample(nodes, self.rng.randint(1, len(nodes) - 1))
        # The new slices either announce the full count or only what is published so far.
        count = len(nodes) if self._chance(0.5) else len(reached)
        for node in reached:
            slc = self._new_slice(pool, {"nodeName": node.name}, node.name)
            slc["spec"]["pool"].update(generation=pool.generation + 1, resourceSliceCount=count)
            sel = _selector(_name_term(node.name))
            devs = [self._device(pool, f"{kind}-{i}", kind, i, sel) for i in range(per_node)]
            self._add_devices(pool, slc, devs)
            pool.slices.append(slc)
        pool.generation = None  # slices carry their own generations already
        self.features.add("partial-new-generation")

    def _fill_empty(self, pool: _Pool) -> None:
        """A pool of two empty slices: complete, with nothing in it."""
        node = self.rng.choice(self.workers).name
        pool.name = self._pool_name(pool, node, "empty")
        for i in range(2):
            slc = self._new_slice(pool, {"nodeName": node}, f"{node}-{i}")
            if self._chance(0.5):
                slc["spec"]["devices"] = []
            pool.slices.append(slc)

    def _fill_network(self, pool: _Pool) -> None:
        """Network-attached devices: slices by node selector or for all nodes."""
        pool.name = self._pool_name(pool, None, "fabric")
        kind = _KIND_OF_DRIVER[pool.driver]
        n_slices = self.rng.randint(1, 3)
        index = 0
        for _ in range(n_slices):
            if self._chance(0.5):
                term = self._dead_term() if self._chance(0.15) else self._node_term()
                placement: Obj = {"nodeSelector": _selector(term)}
                alloc: Obj | None = _selector(term)
            else:
                placement, alloc = {"allNodes": True}, None
            slc = self._new_slice(pool, placement, "fabric")
            n = self.rng.randint(0, min(3, self._budget()))
            devs = [
                self._device(pool, f"{kind}-{index + i}", kind, index + i, alloc) for i in range(n)
            ]
            index += n
            self._add_devices(pool, slc, devs)
            pool.slices.append(slc)
        if self._chance(0.4) and self._budget() > 0:
            self._selector_rollout(pool, kind, index)

    def _selector_rollout(self, pool: _Pool, kind: str, index: int) -> None:
        """A new generation published by a selector that reaches some nodes only: those
        nodes see it, the others keep the older generation (the allocator gathers pools
        per node), and the two may announce different slice counts."""
        old = self.rng.randint(1, 3)
        for slc in pool.slices:
            slc["spec"]["pool"].update(generation=old, resourceSliceCount=len(pool.slices))
        for dev in self.devs:
            if dev.pool == pool.name and dev.driver == pool.driver:
                dev.current = False
        rack = self.rng.choice(self.workers).labels[RACK_LABEL]
        term = {"matchExpressions": [_in(RACK_LABEL, rack)]}
        slc = self._new_slice(pool, {"nodeSelector": _selector(term)}, "rollout")
        slc["spec"]["pool"].update(generation=old + 1, resourceSliceCount=self.rng.choice((1, 2)))
        n = self.rng.randint(1, max(1, min(2, self._budget())))
        devs = [
            self._device(pool, f"{kind}-{index + i}", kind, index + i, _selector(term))
            for i in range(n)
        ]
        self._add_devices(pool, slc, devs)
        pool.slices.append(slc)
        pool.generation = None  # slices carry their own generations already
        self.features.add("rollout-by-selector")

    def _dead_term(self) -> Obj:
        """A node selector term that no node matches (a rack no node is in)."""
        return {"matchExpressions": [_in(RACK_LABEL, "rack-none")]}

    def _fill_per_device(self, pool: _Pool) -> None:
        """perDeviceNodeSelection: every device says where it is reachable."""
        pool.name = self._pool_name(pool, None, "attached")
        kind = _KIND_OF_DRIVER[pool.driver]
        index = 0
        for _ in range(self.rng.randint(1, 2)):
            slc = self._new_slice(pool, {"perDeviceNodeSelection": True}, "per-device")
            devs = []
            for _ in range(self.rng.randint(1, max(1, min(4, self._budget())))):
                dev = self._device(pool, f"{kind}-{index}", kind, index, None)
                self._place_device(dev)
                devs.append(dev)
                index += 1
            self._add_devices(pool, slc, devs)
            pool.slices.append(slc)

    def _place_device(self, dev: _Dev) -> None:
        choice = self.rng.randrange(3)
        if choice == 0:
            node = self.rng.choice(self.workers).name
            dev.body["nodeName"] = node
            dev.alloc_selector = _selector(_name_term(node))
        elif choice == 1:
            terms = [self._node_term() for _ in range(self.rng.randint(1, 2))]
            dev.body["nodeSelector"] = _selector(*terms)
            dev.alloc_selector = _selector(*copy.deepcopy(terms))
        else:
            dev.body["allNodes"] = True

    # --- partitionable archetypes ----------------------------------------------------------

    def _fill_mig(self, pool: _Pool) -> None:
        """NVIDIA DynamicMIG: all counter sets first, then one device slice per GPU."""
        node = self.rng.choice(self.workers).name
        pool.name = self._pool_name(pool, node, "gpu")
        sel = _selector(_name_term(node))
        n_mig = 1 if self._budget() < 24 or self._chance(0.6) else 2
        n_whole = self.rng.choice((0, 0, 1, 2))
        counters = self._new_slice(pool, {"nodeName": node}, node)
        sets = []
        for g in range(n_mig):
            name = f"gpu-{g}-counter-set"
            values = dict(_MIG_SET)
            pool.counter_sets[name] = values
            sets.append({"name": name, "counters": _counter_map(values, "Gi")})
        counters["spec"]["sharedCounters"] = sets
        pool.slices.append(counters)
        for g in range(n_mig):
            slc = self._new_slice(pool, {"nodeName": node}, f"{node}-gpu-{g}")
            self._add_devices(pool, slc, self._mig_devices(pool, g, sel))
            pool.slices.append(slc)
        if n_whole:
            slc = self._new_slice(pool, {"nodeName": node}, f"{node}-whole")
            devs = [
                self._device(pool, f"gpu-{n_mig + i}", "gpu", n_mig + i, sel)
                for i in range(n_whole)
            ]
            self._add_devices(pool, slc, devs)
            pool.slices.append(slc)
            self.features.add("whole-gpu-no-counters")
        self.features.add("mig-layout")
        self.partition_attrs.add(f"{pool.driver}/profile")
        self._maybe_break_counters(pool)

    def _mig_devices(self, pool: _Pool, gpu: int, sel: Obj) -> list[_Dev]:
        cap = min(12, max(2, self._budget() - 2))
        profiles = list(_MIG)
        self.rng.shuffle(profiles)
        devs: list[_Dev] = []
        for tag, profile, width, starts, mem, sms, ce, dec, jpeg, ofa in profiles:
            if len(devs) + len(starts) > cap:
                continue
            for start in starts:
                consumed = {f"memory-slice-{k}": 1 for k in range(start, start + width)}
                consumed |= {"memory": mem * 2**20, "multiprocessors": sms, "copy-engines": ce}
                consumed |= {"decoders": dec, "jpeg-engines": jpeg, "ofa-engines": ofa}
                body: Obj = {
                    "name": f"gpu-{gpu}-mig-{tag}-{start}",
                    "attributes": {
                        "type": _attribute("mig"),
                        "profile": _attribute(profile),
                        "parentIndex": _attribute(gpu),
                        "placementStart": _attribute(start),
                        "placementSize": _attribute(width),
                    },
                    "capacity": {
                        "memory": {"value": f"{mem}Mi"},
                        "multiprocessors": {"value": str(sms)},
                        "copyEngines": {"value": str(ce)},
                    },
                }
                dev = _Dev(pool.driver, pool.name, body["name"], body, copy.deepcopy(sel))
                dev.counters = {f"gpu-{gpu}-counter-set": consumed}
                body["consumesCounters"] = [
                    {
                        "counterSet": f"gpu-{gpu}-counter-set",
                        "counters": _counter_map(consumed, "Mi"),
                    }
                ]
                self._maybe_taint(body)
                devs.append(dev)
        return devs

    def _fill_counters(self, pool: _Pool) -> None:
        """Cards split into tiles; a bridge device draws from two cards' counter sets."""
        placement, alloc, node = self._placement(pool)
        pool.name = self._pool_name(pool, node, "cards")
        n_cards = self.rng.randint(1, 3)
        sets = []
        for c in range(n_cards):
            values = {
                "tiles": 4,
                "cores": 16,
                "memory": 16 * 2**30,
                "links": self.rng.choice((0, 2)),
            }
            pool.counter_sets[f"card-{c}"] = values
            sets.append({"name": f"card-{c}", "counters": _counter_map(values, "Gi")})
        counters = self._new_slice(pool, copy.deepcopy(placement), "counters")
        counters["spec"]["sharedCounters"] = sets
        devices_slice = self._new_slice(pool, copy.deepcopy(placement), "tiles")
        devs: list[_Dev] = []
        for c in range(n_cards):
            for tiles in self.rng.sample((1, 2, 4), self.rng.randint(1, 3)):
                for start in range(0, 4, tiles):
                    if len(devs) >= min(10, self._budget()):
                        break
                    devs.append(self._tile(pool, c, start, tiles, alloc))
        if n_cards >= 2 and self._chance(0.8):
            devs.append(self._bridge(pool, alloc))
        self._add_devices(pool, devices_slice, devs)
        # Counter-sets-first, or devices first: drivers do both.
        order = [counters, devices_slice] if self._chance(0.7) else [devices_slice, counters]
        pool.slices.extend(order)
        self.partition_attrs.add(f"{pool.driver}/profile")
        self._maybe_break_counters(pool)

    def _tile(self, pool: _Pool, card: int, start: int, tiles: int, alloc: Obj | None) -> _Dev:
        consumed = {"tiles": tiles, "cores": 4 * tiles, "memory": 4 * tiles * 2**30}
        body: Obj = {
            "name": f"card-{card}-tile-{tiles}x-{start}",
            "attributes": {
                "profile": _attribute(f"{tiles}-tile"),
                "card": _attribute(card),
                "model": _attribute("accel-x1"),
            },
            "capacity": {"memory": {"value": _fmt(4 * tiles * 2**30, "Gi")}},
            "consumesCounters": [
                {"counterSet": f"card-{card}", "counters": _counter_map(consumed, "Gi")}
            ],
        }
        self._maybe_taint(body)
        dev = _Dev(pool.driver, pool.name, body["name"], body, copy.deepcopy(alloc))
        dev.counters = {f"card-{card}": consumed}
        return dev

    def _bridge(self, pool: _Pool, alloc: Obj | None) -> _Dev:
        a, b = sorted(self.rng.sample(sorted(pool.counter_sets), 2))
        consumed = {"links": 1, "cores": 2}
        body: Obj = {
            "name": f"bridge-{a}-{b}",
            "attributes": {"profile": _attribute("bridge"), "model": _attribute("accel-x1")},
            "consumesCounters": [
                {"counterSet": a, "counters": _counter_map(consumed, "")},
                {"counterSet": b, "counters": _counter_map(consumed, "")},
            ],
        }
        dev = _Dev(pool.driver, pool.name, body["name"], body, copy.deepcopy(alloc))
        dev.counters = {a: dict(consumed), b: dict(consumed)}
        return dev

    def _maybe_break_counters(self, pool: _Pool) -> None:
        """Counter references the allocator refuses: a missing set, a missing counter."""
        consumers = [
            d for d in self.devs if d.pool == pool.name and d.driver == pool.driver and d.counters
        ]
        if consumers and self._chance(0.1):
            dev = self.rng.choice(consumers)
            dev.body["consumesCounters"][0]["counterSet"] = "retired-counter-set"
            dev.counters = {}
            self.features.add("counter-set-missing")
        if consumers and self._chance(0.1):
            dev = self.rng.choice(consumers)
            dev.body["consumesCounters"][0]["counters"]["phantom-units"] = {"value": "1"}
            dev.counters = {}
            self.features.add("counter-missing")
        if pool.counter_sets and self._chance(0.1):
            name = self.rng.choice(sorted(pool.counter_sets))
            spec = pool.slices[0]["spec"]
            placement = {k: copy.deepcopy(spec[k]) for k in _PLACEMENTS if k in spec}
            dup = self._new_slice(pool, placement, "counters-dup")
            values = pool.counter_sets[name]
            dup["spec"]["sharedCounters"] = [{"name": name, "counters": _counter_map(values, "Gi")}]
            pool.slices.append(dup)
            self.features.add("dup-counter-set")

    # --- shareable devices -----------------------------------------------------------------

    def _fill_shared(self, pool: _Pool) -> None:
        """NIC-like devices that several claims share by bandwidth."""
        placement, alloc, node = self._placement(pool)
        pool.name = self._pool_name(pool, node, "nics")
        with_counters = self._chance(0.35)
        slc = self._new_slice(pool, copy.deepcopy(placement), "nics")
        devs = []
        kind = _KIND_OF_DRIVER[pool.driver]
        for i in range(self.rng.randint(1, max(1, min(5, self._budget())))):
            dev = self._device(pool, f"{kind}-{i}", kind, i, copy.deepcopy(alloc))
            if self._chance(0.8):
                self._make_shareable(dev)
            devs.append(dev)
        if with_counters:
            pool.counter_sets["port-0"] = {"bandwidth": 200 * 10**9, "vfs": 8}
            counters = self._new_slice(pool, copy.deepcopy(placement), "ports")
            sets = [{"name": "port-0", "counters": _counter_map(pool.counter_sets["port-0"], "G")}]
            counters["spec"]["sharedCounters"] = sets
            for dev in self.rng.sample(devs, self.rng.randint(1, len(devs))):
                consumed = {"bandwidth": 100 * 10**9, "vfs": self.rng.choice((1, 4))}
                dev.counters = {"port-0": consumed}
                dev.body["consumesCounters"] = [
                    {"counterSet": "port-0", "counters": _counter_map(consumed, "G")}
                ]
                if dev.shareable:
                    self.features.add("shareable-counters")
            pool.slices.append(counters)
        self._add_devices(pool, slc, devs)
        pool.slices.append(slc)

    def _make_shareable(self, dev: _Dev) -> None:
        dev.shareable = True
        dev.body["allowMultipleAllocations"] = True
        if not self._chance(0.75):
            dev.body.pop("capacity", None)
            return
        caps: Obj = dev.body.setdefault("capacity", {})
        for cname, cap in caps.items():
            value = parse_quantity(cap["value"])
            dev.capacity[cname] = _Capacity(value, _unit_of(cap["value"]), _no_policy(value))
        value = self.rng.choice((10, 25, 40, 100)) * 10**9
        policy = self._policy(value, 10**9, "G")
        caps["bandwidth"] = {"value": _fmt(value, "G")}
        if policy.body is not None:
            caps["bandwidth"]["requestPolicy"] = policy.body
        dev.capacity["bandwidth"] = _Capacity(value, "G", policy)
        if self._chance(0.3):
            # An odd but legal quantity: "1k" queues, no policy.
            caps["queues"] = {"value": "1k"}
            dev.capacity["queues"] = _Capacity(1000, "k", _no_policy(1000))

    def _policy(self, value: int, unit: int, suffix: str) -> _Policy:
        """A request policy the API accepts (validation.go validateRequestPolicy).

        validRange: min <= default <= max <= capacity, min + step <= capacity, and default
        and max are min plus whole steps. validValues: ascending, unique, at most 10, none
        above the capacity, the default among them.
        """
        units = value // unit

        def q(n: int) -> str:
            return _fmt(n * unit, suffix)

        kind = self.rng.choice(("none", "default", "range", "values"))
        if kind == "default":
            d = self.rng.randint(1, units)
            return _Policy(kind, {"default": q(d)}, [n * unit for n in range(d, units + 1)])
        if kind == "range":
            lo, step = self.rng.choice((1, 2)), self.rng.choice((1, 2, 5))
            top = units
            valid_range: Obj = {"min": q(lo)}
            if self._chance(0.5):
                top = lo + step * self.rng.randint(0, (units - lo) // step)
                valid_range["max"] = q(top)
            if step != 1 or self._chance(0.5):
                valid_range["step"] = q(step)
            else:
                step = 1
            allowed = list(range(lo, top + 1, step))
            body = {"default": q(self.rng.choice(allowed)), "validRange": valid_range}
            return _Policy(kind, body, [n * unit for n in allowed])
        if kind == "values":
            k = min(units, self.rng.randint(1, 5))
            options = sorted(self.rng.sample(range(1, units + 1), k))
            body = {"default": q(self.rng.choice(options)), "validValues": [q(n) for n in options]}
            return _Policy(kind, body, [n * unit for n in options])
        return _no_policy(value)

    # --- plain devices ---------------------------------------------------------------------

    def _device(self, pool: _Pool, name: str, kind: str, index: int, alloc: Obj | None) -> _Dev:
        attrs, caps = _KIND_BUILDERS[kind](self.rng, index)
        if self._chance(0.35):
            # Partition types: a string attribute in the driver's own domain.
            attrs["profile"] = self.rng.choice(_PROFILES[:2])
            self.partition_attrs.add(f"{pool.driver}/profile")
        if self._chance(0.5):
            attrs[PCIE_ROOT] = f"pci0000:{self.rng.choice(('3a', '5d', '80'))}"
        body: Obj = {"name": name, "attributes": {k: _attribute(v) for k, v in attrs.items()}}
        if caps:
            body["capacity"] = {k: {"value": v} for k, v in caps.items()}
        self._maybe_taint(body)
        return _Dev(pool.driver, pool.name, name, body, copy.deepcopy(alloc))

    def _maybe_taint(self, body: Obj) -> None:
        if not self._chance(0.12):
            return
        taint: Obj = {"key": DEVICE_TAINT_KEY, "effect": self.rng.choice(_EFFECTS)}
        if self._chance(0.6):
            taint["value"] = self.rng.choice(("ecc-errors", "overheating", "true"))
        if self._chance(0.3):
            taint["timeAdded"] = "2026-01-02T03:04:05Z"
        body["taints"] = [taint]

    # --- pool decorations ------------------------------------------------------------------

    def _finish_pool(self, pool: _Pool) -> None:
        """Generations, stale slices and slice counts."""
        stale = pool.generation is not None and self._chance(0.3) and bool(self._stale_source(pool))
        if pool.generation is not None:
            pool.generation = self.rng.choices((None, 0, 1, 2, 5), (2, 2, 4, 1, 1))[0]
            if stale and not pool.generation:
                pool.generation = 1
        current = list(pool.slices)
        for slc in current:
            pool_meta = slc["spec"]["pool"]
            pool_meta.setdefault("resourceSliceCount", len(current))
            if pool.generation is not None:
                pool_meta["generation"] = pool.generation
        if stale:
            self._add_stale_slice(pool, current)
        if self._chance(0.12):
            for slc in current:
                slc["spec"]["pool"]["resourceSliceCount"] += self.rng.randint(1, 2)
        if len(current) >= 2 and self._chance(0.15):
            slc = self.rng.choice(current)
            slc["spec"]["pool"]["resourceSliceCount"] += 1
        for slc in pool.slices:
            # Generation 0 is also what an absent generation means: write it both ways.
            if slc["spec"]["pool"].get("generation") == 0 and self._chance(0.5):
                del slc["spec"]["pool"]["generation"]

    def _stale_source(self, pool: _Pool) -> list[Obj]:
        """Device slices small enough to copy as a stale slice within the device budget."""
        budget = self._budget() + 6
        return [s for s in pool.slices if 0 < len(s["spec"].get("devices", [])) < budget]

    def _add_stale_slice(self, pool: _Pool, current: list[Obj]) -> None:
        """A slice the driver published for an older generation and has not deleted yet."""
        source = self.rng.choice(self._stale_source(pool))
        stale = copy.deepcopy(source)
        stale["metadata"]["name"] = self._unique(f"{source['metadata']['name']}-old")
        stale["spec"]["pool"]["generation"] = (pool.generation or 1) - 1
        devices = stale["spec"]["devices"]
        if len(devices) > 1 and self._chance(0.5):
            devices.pop()
        if self._chance(0.4):
            devices.append(copy.deepcopy(devices[0]))
            devices[-1]["name"] = f"{devices[0]['name']}-retired"
        for body in devices:
            alloc = _alloc_selector_of(stale, body)
            dev = _Dev(pool.driver, pool.name, body["name"], body, alloc, current=False)
            dev.shareable = bool(body.get("allowMultipleAllocations"))
            self.devs.append(dev)
        pool.slices.append(stale)

    # --- taint rules -----------------------------------------------------------------------

    def _make_taint_rules(self) -> None:
        for i in range(self.rng.choices((0, 1, 2, 3), (3, 3, 2, 1))[0]):
            selector = self._rule_selector()
            taint: Obj = {"key": RULE_TAINT_KEY, "effect": self.rng.choice(_EFFECTS)}
            if self._chance(0.5):
                taint["value"] = "planned"
            rule = {
                "apiVersion": RESOURCE_V1BETA2,
                "kind": "DeviceTaintRule",
                "metadata": {"name": self._unique(f"maintenance-{i}")},
                "spec": {"deviceSelector": selector, "taint": taint},
            }
            if not any(_rule_matches(selector, d) for d in self.devs if d.current):
                self.features.add("taint-rule-no-match")
            self.rules.append(rule)

    def _rule_selector(self) -> Obj:
        if not self.devs or self._chance(0.15):
            return {"driver": self.rng.choice(list(_KIND_OF_DRIVER)), "pool": "decommissioned"}
        dev = self.rng.choice(self.devs)
        choice = self.rng.randrange(4)
        if choice == 0:
            self.features.add("taint-rule-driver")
            return {"driver": dev.driver}
        if choice == 1:
            self.features.add("taint-rule-pool")
            return {"driver": dev.driver, "pool": dev.pool}
        self.features.add("taint-rule-device")
        if choice == 2:
            return {"driver": dev.driver, "pool": dev.pool, "device": dev.name}
        return {"device": dev.name}

    # --- allocated claims ------------------------------------------------------------------

    def _make_allocations(self) -> None:
        steps: list[tuple[float, Callable[[], bool]]] = [
            (0.7, self._alloc_exclusive),
            (0.3, self._alloc_multi),
            (0.25, self._alloc_first_available),
            (0.6, self._alloc_shares),
            (0.3, self._alloc_share_without_capacity),
            (0.2, self._alloc_shareable_without_share_id),
            (0.15, self._alloc_share_id_on_exclusive),
            (0.25, self._alloc_admin),
            (0.15, self._alloc_dangling),
            (0.35, self._alloc_counter_overcommit),
            (0.5, self._alloc_exclusive),
        ]
        for p, step in steps:
            if len(self.claims) < self.size.allocated - 2 and self._chance(p):
                step()

    def _namespace(self, admin: bool = False) -> str:
        name = "admin-ops" if admin else self.rng.choice(("team-a", "team-b", "ml-training"))
        self.namespaces[name] = {ADMIN_LABEL: "true"} if admin else {}
        return name

    def _claim(self, base: str, requests: list[Obj], *, admin: bool = False) -> Obj:
        name = self._unique(base)
        return {
            "apiVersion": RESOURCE_V1,
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": self._namespace(admin), "uid": _uuid(self.rng)},
            "spec": {"devices": {"requests": requests}},
        }

    def _allocated(
        self, base: str, request: Obj, results: list[Obj], devs: list[_Dev], **kw: Any
    ) -> Obj:
        claim = self._claim(base, [request], **kw)
        allocation: Obj = {"devices": {"results": results}}
        selector = _merge_selectors([d.alloc_selector for d in devs])
        if selector is not None:
            allocation["nodeSelector"] = selector
        claim["status"] = {"allocation": allocation}
        self.claims.append(claim)
        return claim

    def _class_for(self, driver: str) -> str:
        name = f"{driver.split('.')[0]}.example.com"
        if name not in self.classes:
            expr = f"device.driver == '{driver}'"
            self.classes[name] = _device_class(name, [expr])
            self.features.add("class-selector")
        return name

    def _pick(self, pred: Callable[[_Dev], bool], current: bool = True) -> _Dev | None:
        found = [d for d in self.devs if pred(d) and (d.current or not current)]
        return self.rng.choice(found) if found else None

    def _result(self, request: str, dev: _Dev, **extra: Any) -> Obj:
        return {
            "request": request,
            "driver": dev.driver,
            "pool": dev.pool,
            "device": dev.name,
            **extra,
        }

    def _exact(self, name: str, dev: _Dev, count: int = 1, **extra: Any) -> Obj:
        exactly: Obj = {
            "deviceClassName": self._class_for(dev.driver),
            "allocationMode": "ExactCount",
        }
        exactly["count"] = count
        return {"name": name, "exactly": {**exactly, **extra}}

    def _alloc_exclusive(self) -> bool:
        dev = self._pick(lambda d: not d.shareable)
        if dev is None:
            return False
        double = self._chance(0.25)
        for _ in range(2 if double else 1):
            request, result = self._exact("dev", dev), self._result("dev", dev)
            self._tolerate(dev, request, result)
            self._allocated("job", request, [result], [dev])
        self.features.add("alloc-exclusive")
        if double:
            self.features.add("alloc-double-exclusive")
        return True

    def _tolerate(self, dev: _Dev, request: Obj, result: Obj) -> None:
        """A claim on a tainted device tolerated the taint; the result keeps a copy."""
        taints = [t for t in dev.body.get("taints", []) if t["effect"] != "None"]
        if not taints or not self._chance(0.6):
            return
        tolerations = [
            {"key": t["key"], "operator": "Exists", "effect": t["effect"]} for t in taints
        ]
        request["exactly"]["tolerations"] = tolerations
        result["tolerations"] = copy.deepcopy(tolerations)

    def _alloc_multi(self) -> bool:
        dev = self._pick(lambda d: not d.shareable)
        if dev is None:
            return False
        peers = [
            d for d in self.devs if (d.driver, d.pool) == (dev.driver, dev.pool) and d is not dev
        ]
        # One node must reach both devices, as for anything the scheduler allocates.
        peers = [
            d
            for d in peers
            if not d.shareable and d.name != dev.name and d.alloc_selector == dev.alloc_selector
        ]
        if not peers:
            return False
        other = self.rng.choice(peers)
        results = [self._result("devs", dev), self._result("devs", other)]
        self._allocated("pair", self._exact("devs", dev, count=2), results, [dev, other])
        self.features.add("alloc-multi-device")
        return True

    def _alloc_first_available(self) -> bool:
        dev = self._pick(lambda d: not d.shareable)
        if dev is None:
            return False
        cls = self._class_for(dev.driver)
        subs = [
            {"name": "big", "deviceClassName": cls, "allocationMode": "ExactCount", "count": 2},
            {"name": "small", "deviceClassName": cls, "allocationMode": "ExactCount", "count": 1},
        ]
        request = {"name": "acc", "firstAvailable": subs}
        self._allocated("flex", request, [self._result("acc/small", dev)], [dev])
        self.features.add("alloc-first-available")
        return True

    def _alloc_shares(self) -> bool:
        dev = self._pick(lambda d: d.shareable and bool(d.capacity))
        if dev is None:
            return False
        overcommit = self._chance(0.35)
        left = {k: c.value for k, c in dev.capacity.items()}
        for _ in range(self.rng.randint(1, 3)):
            consumed = {}
            for cname, cap in dev.capacity.items():
                fits = [a for a in cap.policy.amounts if a <= left[cname]]
                amount = (
                    self.rng.choice(fits) if fits and not overcommit else max(cap.policy.amounts)
                )
                left[cname] -= amount
                consumed[cname] = _fmt(amount, cap.unit)
            request = self._exact("net", dev, capacity={"requests": dict(consumed)})
            result = self._result("net", dev, shareID=_uuid(self.rng), consumedCapacity=consumed)
            self._allocated("share", request, [result], [dev])
        if overcommit:
            # One more share of the whole capacity: the sum now exceeds what the device has.
            consumed = {k: _fmt(c.value, c.unit) for k, c in dev.capacity.items()}
            result = self._result("net", dev, shareID=_uuid(self.rng), consumedCapacity=consumed)
            self._allocated("share", self._exact("net", dev), [result], [dev])
        if any(v < 0 for v in left.values()) or overcommit:
            self.features.add("alloc-capacity-overcommit")
        self.features.add("alloc-shared-capacity")
        return True

    def _alloc_share_without_capacity(self) -> bool:
        dev = self._pick(lambda d: d.shareable and not d.capacity) or self._pick(
            lambda d: d.shareable
        )
        if dev is None:
            return False
        result = self._result("net", dev, shareID=_uuid(self.rng))
        self._allocated("share", self._exact("net", dev), [result], [dev])
        self.features.add("alloc-shared-no-capacity")
        return True

    def _alloc_shareable_without_share_id(self) -> bool:
        dev = self._pick(lambda d: d.shareable)
        if dev is None:
            return False
        self._allocated("whole", self._exact("net", dev), [self._result("net", dev)], [dev])
        self.features.add("alloc-shareable-no-shareid")
        return True

    def _alloc_share_id_on_exclusive(self) -> bool:
        dev = self._pick(lambda d: not d.shareable)
        if dev is None:
            return False
        result = self._result("dev", dev, shareID=_uuid(self.rng))
        self._allocated("odd", self._exact("dev", dev), [result], [dev])
        self.features.add("alloc-shareid-not-shareable")
        return True

    def _alloc_admin(self) -> bool:
        dev = self._pick(lambda d: True)
        if dev is None:
            return False
        request = self._exact("probe", dev, adminAccess=True)
        result = self._result("probe", dev, adminAccess=True)
        self._allocated("monitor", request, [result], [dev], admin=True)
        self.features.add("alloc-admin")
        return True

    def _alloc_dangling(self) -> bool:
        if not self.devs:
            return False
        dev = copy.copy(self.rng.choice(self.devs))
        dev.name = f"{dev.name}-gone"
        dev.shareable = False
        self._allocated("orphan", self._exact("dev", dev), [self._result("dev", dev)], [dev])
        self.features.add("alloc-dangling")
        return True

    def _alloc_counter_overcommit(self) -> bool:
        """Two allocated partitions that together need more of a counter than there is."""
        pairs = list(self._overcommitting_pairs())
        if not pairs:
            return False
        a, b = self.rng.choice(pairs)
        self._allocated("part", self._exact("part", a), [self._result("part", a)], [a])
        self._allocated("part", self._exact("part", b), [self._result("part", b)], [b])
        self.features.add("alloc-counter-overcommit")
        return True

    def _overcommitting_pairs(self) -> Iterator[tuple[_Dev, _Dev]]:
        pools = {(p.driver, p.name): p for p in self.pools}
        consumers = [d for d in self.devs if d.counters and d.current]
        for i, a in enumerate(consumers):
            for b in consumers[i + 1 :]:
                if (a.driver, a.pool) != (b.driver, b.pool) or a.name == b.name:
                    continue
                sets = pools[(a.driver, a.pool)].counter_sets
                if _exceeds(a.counters, b.counters, sets):
                    yield a, b

    # --- pending claims --------------------------------------------------------------------

    def _make_pending(self) -> None:
        if not self.devs:
            return
        makers: list[Callable[[], Obj | None]] = [
            self._pending_basic,
            self._pending_basic,
            self._pending_all,
            self._pending_first_available,
            self._pending_capacity,
            self._pending_toleration,
            self._pending_admin,
            self._pending_constraint,
            self._pending_mixed,
        ]
        for _ in range(self.rng.randint(2, self.size.pending)):
            claim = self.rng.choice(makers)()
            if claim is not None:
                self.pending.append(claim)

    def _request(self, dev: _Dev, name: str = "req", count: int = 1, **extra: Any) -> Obj:
        cls = self._pending_class(dev)
        exactly: Obj = {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count}
        selectors = self._selectors(dev.driver)
        if cls == "any-device":
            # The class selects every driver's devices; without this, attribute reads of
            # the driver's domain would fail on all other devices.
            prefix = f"device.driver == '{dev.driver}'"
            exprs = [f"{prefix} && ({s['cel']['expression']})" for s in selectors] or [prefix]
            selectors = [{"cel": {"expression": e}} for e in exprs]
        if selectors:
            exactly["selectors"] = selectors
        return {"name": name, "exactly": {**exactly, **extra}}

    def _pending_class(self, dev: _Dev) -> str:
        """The driver's class, a class with an attribute selector, or one without selectors."""
        roll = self.rng.random()
        if roll < 0.12:
            self.classes.setdefault("any-device", _device_class("any-device", []))
            self.features.add("class-no-selector")
            return "any-device"
        if roll < 0.3 and "profile" in dev.attrs:
            profile = dev.attrs["profile"]["string"]
            name = f"{dev.driver.split('.')[0]}-{_dns(profile)}.example.com"
            d = dev.driver
            expr = (
                f"device.driver == '{d}' && 'profile' in device.attributes['{d}'] && "
                f"device.attributes['{d}'].profile == '{profile}'"
            )
            self.classes.setdefault(name, _device_class(name, [expr]))
            self.features.update(("class-selector", "cel-guarded"))
            return name
        return self._class_for(dev.driver)

    def _selectors(self, driver: str) -> list[Obj]:
        if not self._chance(0.6):
            return []
        devs = [d for d in self.devs if d.driver == driver]
        makers = (self._cel_attribute, self._cel_capacity, self._cel_guarded, self._cel_unguarded)
        expr = self.rng.choice(makers)(driver, devs)
        return [{"cel": {"expression": expr}}] if expr else []

    def _cel_attribute(self, driver: str, devs: list[_Dev]) -> str | None:
        """A comparison on an attribute every device of the driver has: never an error."""
        common = set.intersection(*(set(d.attrs) for d in devs)) if devs else set()
        names = sorted(a for a in common if "/" not in a)
        if not names:
            return None
        attr = self.rng.choice(names)
        value = self.rng.choice(devs).attrs[attr]
        self.features.add("cel-attribute")
        return _compare(f"device.attributes['{driver}'].{attr}", value, self.rng)

    def _cel_capacity(self, driver: str, devs: list[_Dev]) -> str | None:
        having = [d for d in devs if d.body.get("capacity")]
        if not having:
            return None
        dev = self.rng.choice(having)
        cap = self.rng.choice(sorted(dev.body["capacity"]))
        value = dev.body["capacity"][cap]["value"]
        op = self.rng.choice((">=", "<", "=="))
        test = f"device.capacity['{driver}'].{cap}.compareTo(quantity('{value}')) {op} 0"
        self.features.add("cel-capacity")
        if all(cap in d.body.get("capacity", {}) for d in devs):
            return test
        if self._chance(0.5):
            self.features.add("cel-runtime-error")
            return test
        self.features.add("cel-guarded")
        return f"'{cap}' in device.capacity['{driver}'] && {test}"

    def _partial_attrs(self, driver: str, devs: list[_Dev]) -> list[tuple[str, str, Obj]]:
        """(domain, name, value) of attributes only some devices of the driver have.

        Unqualified names belong to the driver's domain; qualified ones such as
        resource.kubernetes.io/pcieRoot to theirs.
        """
        counts: dict[str, int] = {}
        for d in devs:
            for a in d.attrs:
                counts[a] = counts.get(a, 0) + 1
        found = []
        for d in devs:
            for a in sorted(d.attrs):
                if counts[a] < len(devs):
                    domain, _, name = a.rpartition("/")
                    found.append((domain or driver, name, d.attrs[a]))
        return found

    def _cel_guarded(self, driver: str, devs: list[_Dev]) -> str | None:
        found = self._partial_attrs(driver, devs)
        if not found:
            return self._cel_attribute(driver, devs)
        domain, attr, value = self.rng.choice(found)
        test = _compare(f"device.attributes['{domain}'].{attr}", value, self.rng)
        self.features.update(("cel-guarded", "cel-attribute"))
        if self._chance(0.5):
            return f"has(device.attributes['{domain}'].{attr}) && {test}"
        return f"'{attr}' in device.attributes['{domain}'] && {test}"

    def _cel_unguarded(self, driver: str, devs: list[_Dev]) -> str | None:
        """Reads a key only some devices have: a runtime error on the others."""
        found = self._partial_attrs(driver, devs)
        if not found:
            return self._cel_attribute(driver, devs)
        domain, attr, value = self.rng.choice(found)
        self.features.update(("cel-runtime-error", "cel-attribute"))
        return _compare(f"device.attributes['{domain}'].{attr}", value, self.rng)

    def _pending_basic(self) -> Obj:
        dev = self.rng.choice(self.devs)
        count = self.rng.choices((1, 2, 3), (5, 3, 1))[0]
        if count > 1:
            self.features.add("pending-count")
        return self._claim("want", [self._request(dev, count=count)])

    def _pending_mixed(self) -> Obj | None:
        """A network-attached device and a node-local one in one claim: only a node that
        gathers both pools can serve it."""
        current = {(d.driver, d.pool, d.name): d for d in self.devs if d.current}
        local: list[_Dev] = []
        network: list[_Dev] = []
        for pool in self.pools:
            for slc in pool.slices:
                spec = slc["spec"]
                for body in spec.get("devices", []):
                    dev = current.get((pool.driver, pool.name, body["name"]))
                    holder = body if spec.get("perDeviceNodeSelection") else spec
                    if dev is not None:
                        (local if "nodeName" in holder else network).append(dev)
        if not local or not network:
            return None
        requests = [
            self._request(self.rng.choice(network), name="fabric"),
            self._request(self.rng.choice(local), name="local"),
        ]
        self.rng.shuffle(requests)
        self.features.add("pending-mixed-reach")
        return self._claim("mixed", requests)

    def _pending_all(self) -> Obj:
        dev = self.rng.choice(self.devs)
        request = self._request(dev)
        request["exactly"]["allocationMode"] = "All"
        del request["exactly"]["count"]
        self.features.add("pending-all")
        return self._claim("all", [request])

    def _pending_first_available(self) -> Obj:
        subs = []
        for i in range(self.rng.randint(2, 3)):
            dev = self.rng.choice(self.devs)
            sub = self._request(dev, name=f"option-{i}", count=self.rng.randint(1, 2))
            subs.append({"name": sub["name"], **sub["exactly"]})
        self.features.add("pending-first-available")
        return self._claim("either", [{"name": "acc", "firstAvailable": subs}])

    def _pending_capacity(self) -> Obj | None:
        dev = self._pick(lambda d: d.shareable and bool(d.capacity), current=False)
        if dev is None:
            return None
        requests = {}
        for cname, cap in dev.capacity.items():
            # Sometimes a size the policy does not list: the allocator rounds it up.
            amount = self.rng.choice([*cap.policy.amounts, cap.value // 3 + 1, cap.value + 1])
            requests[cname] = _fmt(amount, cap.unit)
        self.features.add("pending-capacity")
        return self._claim("bw", [self._request(dev, capacity={"requests": requests})])

    def _pending_toleration(self) -> Obj:
        dev = self._pick(lambda d: d.tainted, current=False) or self.rng.choice(self.devs)
        tolerations = []
        for key in self.rng.sample((DEVICE_TAINT_KEY, RULE_TAINT_KEY), self.rng.randint(1, 2)):
            tol: Obj = {"key": key, "operator": self.rng.choice(("Exists", "Equal"))}
            if tol["operator"] == "Equal":
                tol["value"] = self.rng.choice(("ecc-errors", "planned", "true"))
            if self._chance(0.6):
                tol["effect"] = self.rng.choice(("NoSchedule", "NoExecute"))
            tolerations.append(tol)
        self.features.add("pending-toleration")
        return self._claim("tolerant", [self._request(dev, tolerations=tolerations)])

    def _pending_admin(self) -> Obj:
        dev = self.rng.choice(self.devs)
        self.features.add("pending-admin")
        return self._claim("inspect", [self._request(dev, adminAccess=True)], admin=True)

    def _pending_constraint(self) -> Obj:
        """Two devices that must share an attribute value (e.g. the same PCIe root)."""
        a, b = self.rng.choice(self.devs), self.rng.choice(self.devs)
        shared = sorted(set(a.attrs) & set(b.attrs))
        requests = [self._request(a, name="first"), self._request(b, name="second")]
        claim = self._claim("together", requests)
        if shared:
            attr = self.rng.choice(shared)
            qualified = attr if "/" in attr else f"{a.driver}/{attr}"
            kind = "matchAttribute" if self._chance(0.7) else "distinctAttribute"
            constraint = {"requests": ["first", "second"], kind: qualified}
            claim["spec"]["devices"]["constraints"] = [constraint]
            self.features.add("pending-constraint")
        return claim


# --- device kinds --------------------------------------------------------------------------


def _gpu(rng: random.Random, index: int) -> tuple[dict[str, Any], dict[str, str]]:
    model, memory = rng.choice(_GPU_MODELS)
    attrs: dict[str, Any] = {
        "type": "gpu",
        "index": index,
        "model": model,
        # Two devices may carry the same uuid: drivers do publish that.
        "uuid": f"GPU-{rng.randrange(4):08x}-0000-4000-8000-{index:012x}",
        "driverVersion": _Version(rng.choice(("550.54.15", "560.35.3", "570.0.0-rc.1"))),
    }
    if rng.random() < 0.5:
        attrs["migCapable"] = rng.random() < 0.5
    return attrs, {"memory": memory}


def _nic(rng: random.Random, index: int) -> tuple[dict[str, Any], dict[str, str]]:
    attrs: dict[str, Any] = {
        "ifName": f"eth{index}",
        "rdma": rng.random() < 0.5,
        "model": rng.choice(("cx7", "e810")),
    }
    if rng.random() < 0.6:
        attrs["pciAddress"] = f"0000:{index + 16:02x}:00.0"
    return attrs, {}


def _accel(rng: random.Random, index: int) -> tuple[dict[str, Any], dict[str, str]]:
    attrs: dict[str, Any] = {"type": "accel", "model": "accel-x1", "index": index}
    if rng.random() < 0.6:
        attrs["healthy"] = rng.random() < 0.8
    caps = {"cores": rng.choice(("8", "16"))}
    if rng.random() < 0.3:
        caps["scratch"] = "0"
    return attrs, caps


def _fpga(rng: random.Random, index: int) -> tuple[dict[str, Any], dict[str, str]]:
    attrs: dict[str, Any] = {
        "board": rng.choice(("u250", "u55c")),
        "bitstream": _Version(rng.choice(("1.2.0", "2.0.0", "2.1.0-beta.1"))),
        "index": index,
    }
    return attrs, {"luts": rng.choice(("1k", "1728k", "284208Mi"))}


_KIND_BUILDERS: dict[str, Callable[[random.Random, int], tuple[dict[str, Any], dict[str, str]]]] = {
    "gpu": _gpu,
    "nic": _nic,
    "accel": _accel,
    "fpga": _fpga,
}
_EFFECTS = ("NoSchedule", "NoExecute", "None")
_PLACEMENTS = ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")


# --- helpers -------------------------------------------------------------------------------


def _no_policy(value: int) -> _Policy:
    """Without a policy a share that asks for nothing takes the whole capacity."""
    return _Policy("none", None, [value])


def _unit_of(text: str) -> str:
    return next((u for u in sorted(_SUFFIXES, key=len, reverse=True) if text.endswith(u)), "")


def _in(key: str, value: str) -> Obj:
    return {"key": key, "operator": "In", "values": [value]}


def _dns(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def _counter_map(values: dict[str, int], unit: str) -> Obj:
    out: Obj = {}
    for name, value in values.items():
        out[name] = {"value": _fmt(value, unit) if name == "memory" or unit == "G" else str(value)}
    return out


def _device_class(name: str, exprs: list[str]) -> Obj:
    spec: Obj = {}
    if exprs:
        spec["selectors"] = [{"cel": {"expression": e}} for e in exprs]
    return {
        "apiVersion": RESOURCE_V1,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def _alloc_selector_of(slc: Obj, device: Obj) -> Obj | None:
    """The node selector an allocation of ``device`` gets, as the scheduler writes it."""
    for holder in (device, slc["spec"]):
        if "nodeName" in holder:
            return _selector(_name_term(holder["nodeName"]))
        if "nodeSelector" in holder:
            selector: Obj = copy.deepcopy(holder["nodeSelector"])
            return selector
        if "allNodes" in holder:
            return None
    return None


def _merge_selectors(selectors: Iterable[Obj | None]) -> Obj | None:
    """The allocation's node selector: the first device's (the others' are alike or absent)."""
    for sel in selectors:
        if sel is not None:
            return copy.deepcopy(sel)
    return None


def _exceeds(
    a: dict[str, dict[str, int]], b: dict[str, dict[str, int]], sets: dict[str, dict[str, int]]
) -> bool:
    """Whether devices a and b together consume more of some counter than the pool has."""
    for set_name, counters in a.items():
        for counter, amount in counters.items():
            other = b.get(set_name, {}).get(counter)
            total = sets.get(set_name, {}).get(counter)
            if other is not None and total is not None and amount + other > total:
                return True
    return False


def _compare(expr: str, value: Obj, rng: random.Random) -> str:
    """A CEL comparison of ``expr`` (an attribute) with a value of its own type."""
    if "bool" in value:
        return f"{expr} == {str(value['bool']).lower()}"
    if "int" in value:
        return f"{expr} {rng.choice(('==', '<=', '>'))} {value['int']}"
    if "version" in value:
        op = rng.choice((">=", "<=", "=="))
        return f"{expr}.compareTo(semver('{value['version']}')) {op} 0"
    return f"{expr} == '{value['string']}'"


def _rule_matches(selector: Obj, dev: _Dev) -> bool:
    return bool(
        selector.get("driver", dev.driver) == dev.driver
        and selector.get("pool", dev.pool) == dev.pool
        and selector.get("device", dev.name) == dev.name
    )


# --- features read back from the objects ---------------------------------------------------


def _observed_features(objects: list[Obj], nodes: list[_Node]) -> set[str]:
    """Structural features, read from the final objects so that they cannot drift."""
    found: set[str] = set()
    slices = [o for o in objects if o["kind"] == "ResourceSlice"]
    if len({s["spec"]["driver"] for s in slices}) >= 2:
        found.add("multi-driver")
    pools: dict[tuple[str, str], list[Obj]] = {}
    for slc in slices:
        pools.setdefault((slc["spec"]["driver"], slc["spec"]["pool"]["name"]), []).append(slc)
        found |= _slice_features(slc)
    for group in pools.values():
        found |= _pool_features(group, nodes)
    if _unmatched_nodes(slices, nodes):
        found.add("node-unmatched")
    if any(_selects_no_node(slc, nodes) for slc in slices):
        found.add("selector-no-node")
    return found


def _selects_no_node(slc: Obj, nodes: list[_Node]) -> bool:
    for holder in [slc["spec"], *slc["spec"].get("devices", [])]:
        terms = holder.get("nodeSelector", {}).get("nodeSelectorTerms")
        if terms and not any(term_matches(t, n.name, n.labels) for t in terms for n in nodes):
            return True
    return False


def _view_features(group: list[Obj], nodes: list[_Node]) -> set[str]:
    """Whether nodes see the pool at different generations or slice counts (each node
    gathers only the slices that reach it)."""
    seen: set[tuple[int, frozenset[int]]] = set()
    for node in nodes:
        reaching = [s for s in group if node.name in _reach(s, nodes)]
        if not reaching:
            continue
        top = max(_generation(s) for s in reaching)
        counts = frozenset(
            s["spec"]["pool"]["resourceSliceCount"] for s in reaching if _generation(s) == top
        )
        seen.add((top, counts))
    found: set[str] = set()
    if len({g for g, _ in seen}) > 1:
        found.add("views-differ-generation")
    if len({c for _, c in seen}) > 1:
        found.add("views-differ-count")
    return found


_SLICE_PLACEMENT_FEATURES = {
    "nodeName": "slice-node-name",
    "nodeSelector": "slice-node-selector",
    "allNodes": "slice-all-nodes",
    "perDeviceNodeSelection": "slice-per-device-node",
}
_DEVICE_PLACEMENT_FEATURES = {
    "nodeName": "device-node-name",
    "nodeSelector": "device-node-selector",
    "allNodes": "device-all-nodes",
}
_ODD_QUANTITIES = {"1k", "0", "284208Mi"}


def _slice_features(slc: Obj) -> set[str]:
    spec = slc["spec"]
    found = {f for key, f in _SLICE_PLACEMENT_FEATURES.items() if key in spec}
    pool = spec["pool"]
    if "generation" not in pool:
        found.add("generation-absent")
    elif pool["generation"] == 0:
        found.add("generation-zero")
    for counter_set in spec.get("sharedCounters", []):
        found.add("shared-counters")
        values = {c["value"] for c in counter_set["counters"].values()}
        if "0" in values:
            found.add("zero-counter")
        if values & _ODD_QUANTITIES:
            found.add("odd-quantity")
    for dev in spec.get("devices", []):
        found |= _device_features(dev)
    return found


def _device_features(dev: Obj) -> set[str]:
    found = {f for key, f in _DEVICE_PLACEMENT_FEATURES.items() if key in dev}
    caps = dev.get("capacity", {})
    if {c["value"] for c in caps.values()} & _ODD_QUANTITIES:
        found.add("odd-quantity")
    if any("/" in a for a in dev.get("attributes", {})):
        found.add("foreign-attribute")
    if len(dev.get("consumesCounters", [])) >= 2:
        found.add("multi-counter-set-device")
    for taint in dev.get("taints", []):
        found.add(f"taint-{taint['effect'].lower()}")
    if dev.get("allowMultipleAllocations"):
        found.add("shareable-capacity" if caps else "shareable-no-capacity")
        for cap in caps.values():
            policy = cap.get("requestPolicy")
            if policy is None:
                found.add("shareable-no-policy")
            elif "validRange" in policy:
                found.add("policy-range")
            elif "validValues" in policy:
                found.add("policy-values")
            else:
                found.add("policy-default")
    return found


def _generation(slc: Obj) -> int:
    generation: int = slc["spec"]["pool"].get("generation", 0)
    return generation


def _pool_features(group: list[Obj], nodes: list[_Node]) -> set[str]:
    found: set[str] = set()
    top = max(_generation(s) for s in group)
    current = [s for s in group if _generation(s) == top]
    if len(current) < len(group):
        found.add("stale-generation")
    if len(current) >= 2:
        found.add("multi-slice-pool")
    counts = {s["spec"]["pool"]["resourceSliceCount"] for s in current}
    if len(counts) > 1:
        found.add("slice-count-disagree")
    if len(current) < min(counts):
        found.add("incomplete-pool")
    if all(not s["spec"].get("devices") and not s["spec"].get("sharedCounters") for s in group):
        found.add("empty-pool")
    found |= _duplicate_features(current, nodes)
    found |= _view_features(group, nodes)
    return found


def _reach(slc: Obj, nodes: list[_Node]) -> set[str]:
    """The nodes a slice's devices are reachable from (per-device slices: any of them)."""
    spec = slc["spec"]
    if "nodeName" in spec:
        return {spec["nodeName"]}
    if "nodeSelector" in spec:
        terms = spec["nodeSelector"]["nodeSelectorTerms"]
        return {n.name for n in nodes if any(term_matches(t, n.name, n.labels) for t in terms)}
    return {n.name for n in nodes}


def _duplicate_features(current: list[Obj], nodes: list[_Node]) -> set[str]:
    found: set[str] = set()
    for i, a in enumerate(current):
        names_a = {d["name"] for d in a["spec"].get("devices", [])}
        if len(names_a) < len(a["spec"].get("devices", [])):
            found.add("dup-device-node")
        for b in current[i + 1 :]:
            if not names_a & {d["name"] for d in b["spec"].get("devices", [])}:
                continue
            if _reach(a, nodes) & _reach(b, nodes):
                found.add("dup-device-node")
            else:
                found.add("dup-device-across-nodes")
    return found


def _unmatched_nodes(slices: list[Obj], nodes: list[_Node]) -> list[str]:
    """Nodes that no nodeName names and no node selector (slice or device) selects."""
    named: set[str] = set()
    terms: list[Obj] = []
    for slc in slices:
        for holder in [slc["spec"], *slc["spec"].get("devices", [])]:
            if "nodeName" in holder:
                named.add(holder["nodeName"])
            terms.extend(holder.get("nodeSelector", {}).get("nodeSelectorTerms", []))
    return [
        n.name
        for n in nodes
        if n.name not in named and not any(term_matches(t, n.name, n.labels) for t in terms)
    ]
