"""List-typed attributes and derived attributes, drawn into generated worlds.

DRAListTypeAttributes (1.36+, alpha) lets a device attribute hold a list
(`{ints: [0, 1]}`), which CEL sees as a list and constraints compare as sets where the
allocator knows them; DRADerivedAttributes (1.37, alpha) lets a request compute a virtual
attribute per device that its claim's constraints read (`derivedAttributes`).

This adds both to a world that `worldgen._Builder` has finished, drawing from a stream
of its own (`random.Random(f"{seed}/list-attrs")`): every object of a seed stays what it
was, apart from the attributes added to devices and the pending claims (and a DeviceClass
per driver they may need) appended. What a profile's API server makes of them (it refuses
list attributes and list-using selectors without the gate, and drops derivedAttributes)
is tests/fidelity/apiserver.py's business.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .worldgen import World

Obj = dict[str, Any]

LIST_FEATURES: tuple[str, ...] = (
    "list-attribute",
    "list-attribute-mixed",
    "list-attribute-shared-domain",
    "pending-list-cel",
    "pending-list-match",
    "pending-list-distinct",
    "pending-distinct-many",
    "pending-derived",
    "pending-derived-list",
    "pending-derived-shadow",
    "pending-derived-error",
    "pending-derived-subrequest",
)

TOPOLOGY = "topology.example.com"  # a domain devices of every driver publish in
NUMA = f"{TOPOLOGY}/numaNodes"
MAX_ATTRS_AND_CAPS = 28  # as worldgen: the harness adds two, the API allows 32
MAX_VALUES = 44  # attribute values per device: the API allows 48, the harness adds two

# The list attribute each driver publishes in its own domain: (name, kind, values).
_OWN: dict[str, tuple[str, str, tuple[Any, ...]]] = {
    "gpu.example.com": ("links", "strings", ("nvlink-0", "nvlink-1", "nvlink-2", "nvlink-3")),
    "nic.example.com": ("vlans", "ints", (10, 20, 30, 40)),
    "accel.example.com": ("engines", "strings", ("fft", "gemm", "conv")),
    "fpga.example.com": ("shells", "versions", ("1.0.0", "1.1.0", "2.0.0-rc.1")),
}


def _value(kind: str, v: Any) -> Obj:
    return {kind: v}


@dataclass
class _Lists:
    seed: int
    objects: list[Obj]
    pending: list[Obj]
    rng: random.Random = field(init=False)
    features: set[str] = field(default_factory=set)
    # driver -> (attribute name as a constraint writes it, CEL domain, ident, kind, list only)
    published: dict[str, list[tuple[str, str, str, str, bool]]] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.rng = random.Random(f"{self.seed}/list-attrs")
        self.names = {o["metadata"]["name"] for o in self.objects if "metadata" in o}
        self.names |= {c["metadata"]["name"] for c in self.pending}

    def _chance(self, p: float) -> bool:
        return self.rng.random() < p

    # --- devices ---------------------------------------------------------------------------

    def add_attributes(self) -> None:
        if not self._chance(0.75):
            return
        seen: set[int] = set()
        numa_mixed = self._chance(0.4)
        own = {d for d in _OWN if self._chance(0.7)}
        for slc in (o for o in self.objects if o.get("kind") == "ResourceSlice"):
            driver = slc["spec"]["driver"]
            for dev in slc["spec"].get("devices") or ():
                if id(dev) in seen:
                    continue  # a body two slices share gets its attributes once
                seen.add(id(dev))
                if self._chance(0.7):
                    self._numa(driver, dev, numa_mixed)
                if driver in own and self._chance(0.6):
                    self._own(driver, dev)

    def _room(self, dev: Obj, values: int) -> bool:
        attrs = dev.get("attributes", {})
        used = sum(len(next(iter(v.values()))) if _is_list(v) else 1 for v in attrs.values())
        size = len(attrs) + len(dev.get("capacity", {}))
        return size + 1 <= MAX_ATTRS_AND_CAPS and used + values <= MAX_VALUES

    def _numa(self, driver: str, dev: Obj, mixed: bool) -> None:
        """NUMA nodes in a domain every driver shares: a GPU and a NIC can be matched."""
        nodes = sorted(self.rng.sample(range(4), self.rng.choice((1, 1, 2, 2, 3))))
        value = _value("ints", nodes)
        if mixed and len(nodes) == 1 and self._chance(0.5):
            value = _value("int", nodes[0])  # the same name, a single value
            self.features.add("list-attribute-mixed")
        if not self._room(dev, len(nodes)):
            return
        dev.setdefault("attributes", {})[NUMA] = value
        self._publish(driver, NUMA, TOPOLOGY, "numaNodes", "ints", not mixed)
        self.features.update(("list-attribute", "list-attribute-shared-domain"))

    def _own(self, driver: str, dev: Obj) -> None:
        name, kind, pool = _OWN[driver]
        values = sorted(self.rng.sample(pool, self.rng.randint(1, min(3, len(pool)))))
        if not self._room(dev, len(values)):
            return
        dev.setdefault("attributes", {})[name] = _value(kind, values)
        self._publish(driver, f"{driver}/{name}", driver, name, kind, True)
        self.features.add("list-attribute")

    def _publish(
        self, driver: str, qualified: str, domain: str, ident: str, kind: str, only: bool
    ) -> None:
        entries = self.published.setdefault(driver, [])
        for i, (q, d, n, k, o) in enumerate(entries):
            if q == qualified:
                entries[i] = (q, d, n, k, o and only)
                return
        entries.append((qualified, domain, ident, kind, only))


def _is_list(value: Obj) -> bool:
    return len(value) == 1 and next(iter(value)) in ("strings", "ints", "bools", "versions")


def with_lists(world: World) -> World:
    """The world with list-typed attributes on some devices and pending claims that use
    them and derived attributes (see the module docstring)."""
    from .worldgen_claims import add_claims

    lists = _Lists(world.seed, world.objects, world.pending)
    lists.add_attributes()
    add_claims(lists)
    return replace(world, features=world.features | frozenset(lists.features))


def new_uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))
