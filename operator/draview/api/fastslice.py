"""A fast reader for ResourceSlices in the shape the API server serves nearly always.

Validating every device through pydantic costs more than decoding the JSON it came
from, and every device then carries its own copy of values that thousands of devices
share (a product name, a 40Gi capacity, the counters a MIG placement consumes). This
reader handles the plain v1/v1beta2 shape by hand and shares equal values through an
`Interner` (capacity maps with request policies, counters and whole consumesCounters
lists included); anything else (v1beta1 `basic`, mixins, the composite draft, a value
of an unexpected type) returns None and goes through the pydantic
models, which stay the single source of coercions and error messages. For input it
accepts, it builds objects equal to what the models build (tests/unit check both ways).
"""

from __future__ import annotations

import json
import marshal
from typing import Any

from draview.api.attrvalues import LISTS, PLAIN, PlainAttributes
from draview.api.common import in_int64, is_optional, to_capacity
from draview.api.construct import construct
from draview.api.slices import (
    Capacity,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceTwin,
    Mixins,
    PoolRef,
    ResourceSlice,
    binding_of,
)

# Keys a plain device may carry. The binding failure conditions do not change what
# draview computes; the models ignore them as well.
_DEVICE_KEYS = frozenset(
    {
        "name",
        "attributes",
        "capacity",
        "consumesCounters",
        "allowMultipleAllocations",
        "nodeName",
        "allNodes",
        "bindsToNode",
        "bindingConditions",
        "bindingFailureConditions",
    }
)
_NO_MIXINS = Mixins()


class Interner:
    """Shares equal immutable values between the objects one reader builds.

    The maps it hands out are shared: the engine never mutates what it reads. A
    long-lived reader (the operator) calls `clear` now and then so that values of
    deleted devices do not accumulate.
    """

    __slots__ = (
        "attributes",
        "capacities",
        "consumptions",
        "counters",
        "last",
        "policies",
        "sets",
        "strings",
        "written",
    )

    def __init__(self) -> None:
        self.strings: dict[str, str] = {}
        self.attributes: dict[tuple[str, type, Any], dict[str, Any]] = {}
        self.counters: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        self.capacities: dict[tuple[tuple[str, str], ...], dict[str, Capacity]] = {}
        # (counter set, id of an interned counters map) per entry -> the consumption list
        self.consumptions: dict[tuple[tuple[str, int], ...], tuple[CounterConsumption, ...]] = {}
        self.policies: dict[str, dict[str, Capacity]] = {}  # capacity maps with policies
        self.sets: dict[tuple[str, int], CounterSet] = {}  # (name, id of interned counters)
        # A device's capacity map or consumesCounters list already read, by its kind and
        # its value as marshal writes it (see _written).
        self.written: dict[tuple[str, bytes], Any] = {}
        # (kind, device name) -> (raw value, what was read from it): the device of that
        # name on the previous node, compared with == before anything is encoded (see
        # _same_as_last). Bounded: names unique per node would only fill it.
        self.last: dict[tuple[str, str], tuple[Any, Any]] = {}

    def clear(self) -> None:
        for table in self._tables():
            table.clear()

    def __len__(self) -> int:
        return sum(len(t) for t in self._tables())

    def _tables(self) -> tuple[dict[Any, Any], ...]:
        return (
            self.strings,
            self.attributes,
            self.counters,
            self.capacities,
            self.consumptions,
            self.policies,
            self.sets,
            self.written,
            self.last,
        )

    def string(self, s: str) -> str:
        return self.strings.setdefault(s, s)


_LAST_MAX = 4096


def _same_as_last(kind: str, name: str, raw: Any, cache: Interner) -> Any:
    """What was read for the device of this name last time, when its raw value then
    equals this one; None otherwise. Device names repeat on every node of a kind (gpu-0,
    gpu-0-mig-1g-5gb-0), and comparing two decoded values is cheaper than encoding one
    for the `written` key. Only values read through the text-only paths are remembered,
    and a text equals nothing but an equal text, so == here means the same value (the
    1 == True of numbers cannot arise)."""
    last = cache.last.get((kind, name))
    if last is not None and last[0] == raw:
        return last[1]
    return None


def _remember(kind: str, name: str, raw: Any, found: Any, cache: Interner) -> None:
    if len(cache.last) < _LAST_MAX or (kind, name) in cache.last:
        cache.last[(kind, name)] = (raw, found)


def _written(kind: str, raw: Any) -> tuple[str, bytes] | None:
    """A key for a raw value that shares what was read from an equal one: marshal's
    bytes, which load back as the value itself with every type kept (a bool is no int),
    so equal keys mean equal values (equal values may be written differently, which
    only misses). One C call instead of walking the value; None when marshal cannot
    write it (a YAML timestamp)."""
    try:
        return (kind, marshal.dumps(raw))
    except ValueError:
        return None


def _counter_map(raw: Any, cache: Interner) -> dict[str, str] | None:
    """{name: {value: q}} as a shared {name: q}; None for any other shape.

    Extra keys beside `value` change nothing (the models read `value` only)."""
    try:
        key = tuple([(name, q["value"]) for name, q in raw.items()])
        found = cache.counters.get(key)
    except (AttributeError, TypeError, KeyError):
        return None  # not a map, an entry without value, or an unhashable value
    if found is None:
        # Only maps whose every name and value is text enter the table (YAML can key a
        # map by 1 or true, which the models turn into "1" and "True"), so a hit needs
        # no check.
        if not all(type(n) is str and type(q) is str for n, q in key):
            return None
        found = cache.counters[key] = dict(key)
    return found


def _capacity_map(raw: Any, cache: Interner) -> dict[str, Capacity] | None:
    """{name: {value: q}} as shared Capacity models; a requestPolicy goes to the models."""
    written = _written("capacity", raw)
    found = cache.written.get(written) if written is not None else None
    if found is None:
        found = _read_capacity_map(raw, cache)
        if found is not None and written is not None:
            cache.written[written] = found
    return found


def _read_capacity_map(raw: Any, cache: Interner) -> dict[str, Capacity] | None:
    try:
        key = tuple([(name, q["value"]) for name, q in raw.items() if len(q) == 1])
        found = cache.capacities.get(key)
    except (AttributeError, TypeError, KeyError):
        return None
    if len(key) != len(raw):
        return _policy_map(raw, cache)
    if found is None:
        if not all(type(n) is str and type(q) is str for n, q in key):
            return None  # as for counters: text only
        found = cache.capacities[key] = {
            name: construct(Capacity, {"value": value}) for name, value in key
        }
    return found


def _policy_map(raw: dict[str, Any], cache: Interner) -> dict[str, Capacity] | None:
    """A capacity map with request policies (shareable devices), shared by its JSON text
    and built by the models' own coercion (to_capacity), so both readers agree."""
    if not all(type(q) is dict and "value" in q and q.keys() <= _POLICY_KEYS for q in raw.values()):
        return None
    try:
        key = json.dumps(raw, sort_keys=True)
    except (TypeError, ValueError):
        return None  # a value JSON cannot hold: the models say what is wrong
    found = cache.policies.get(key)
    if found is None:
        entries = to_capacity(raw).items()
        found = cache.policies[key] = {n: Capacity.model_validate(e) for n, e in entries}
    return found


_POLICY_KEYS = frozenset({"value", "requestPolicy"})


# A scalar's type -> the one kind CEL takes it as it is (attrvalues.PLAIN, turned round).
_KIND: dict[type, str] = {t: kind for kind, t in PLAIN.items()}


def _attributes(raw: Any, cache: Interner) -> dict[str, Any] | None:
    if type(raw) is not dict:
        return None
    out: dict[str, Any] = PlainAttributes()
    plain = True
    table = cache.attributes
    strings = cache.strings
    kind_of = _KIND.get
    for name, value in raw.items():
        if type(name) is not str:
            return None  # a YAML key such as 1 or true: the models refuse it
        if type(value) is dict and len(value) == 1:
            ((kind, v),) = value.items()
            kept = type(v)
            plain_kind = kind_of(kept)
            if plain_kind is not None:
                value = table.setdefault((kind, kept, v), value)
                if kind != plain_kind:
                    plain = False  # a version, or a kind its value does not have
            else:
                plain = False
                if kept is list:
                    key = _list_key(kind, v)
                    if key is not None:
                        value = table.setdefault(key, value)
        else:
            plain = False
        out[strings.setdefault(name, name)] = value
    return out if plain else dict(out)


def _list_key(kind: str, values: list[Any]) -> tuple[str, type, Any] | None:
    """A list attribute ({strings: [...]}) is shared like a scalar one, by its values:
    a NUMA or PCIe-root list repeats on every device of a node. Only a list whose
    elements all have its kind's type (a bool is no int), so equal keys mean equal lists."""
    element = LISTS.get(kind)
    if element is None or not values or not all(type(x) is element for x in values):
        return None
    return (kind, list, tuple(values))


def _consumptions(raw: Any, cache: Interner) -> tuple[CounterConsumption, ...] | None:
    """A device's consumesCounters, shared whole: the placements of a thousand MIG nodes
    debit the same few dozen lists (by counter set name and counters)."""
    written = _written("consumes", raw)
    found = cache.written.get(written) if written is not None else None
    if found is None:
        found = _read_consumptions(raw, cache)
        if found is not None and written is not None:
            cache.written[written] = found
    return found


def _read_consumptions(raw: Any, cache: Interner) -> tuple[CounterConsumption, ...] | None:
    if type(raw) is not list:
        return None
    parts: list[tuple[str, dict[str, str]]] = []
    for c in raw:
        if type(c) is not dict or c.keys() - {"counterSet", "counters"}:
            return None
        counter_set = c.get("counterSet", "")
        counters = _counter_map(c.get("counters", {}), cache)
        if type(counter_set) is not str or counters is None:
            return None
        parts.append((counter_set, counters))
    # An interned map's id stands for it: `counters` holds every map it handed out
    # until both tables are cleared together.
    key = tuple([(name, id(m)) for name, m in parts])
    found = cache.consumptions.get(key)
    if found is None:
        found = cache.consumptions[key] = tuple(
            construct(CounterConsumption, {"counters": m, "counter_set": cache.string(name)})
            for name, m in parts
        )
    return found


def _device(raw: Any, cache: Interner) -> Device | None:
    if type(raw) is not dict or not raw.keys() <= _DEVICE_KEYS:
        return None
    name = raw.get("name")
    if type(name) is not str:
        return None
    attributes = _attributes(raw.get("attributes", {}), cache)
    raw_capacity = raw.get("capacity", {})
    capacity = _same_as_last("capacity", name, raw_capacity, cache)
    if capacity is None:
        capacity = _capacity_map(raw_capacity, cache)
        if capacity is not None and all(len(q) == 1 for q in raw_capacity.values()):
            # Read as text only (a request policy may hold numbers and bools).
            _remember("capacity", name, raw_capacity, capacity, cache)
    multiple = raw.get("allowMultipleAllocations", False)
    node_name = raw.get("nodeName")
    all_nodes = raw.get("allNodes", False)
    if (
        attributes is None
        or capacity is None
        or type(multiple) is not bool
        or type(all_nodes) is not bool
        or not is_optional(node_name, str)
    ):
        return None
    consumes: tuple[CounterConsumption, ...] | None = ()
    raw_consumes = raw.get("consumesCounters")
    if raw_consumes:
        consumes = _same_as_last("consumes", name, raw_consumes, cache)
        if consumes is None:
            consumes = _consumptions(raw_consumes, cache)
            if consumes is not None:
                _remember("consumes", name, raw_consumes, consumes, cache)
    if consumes is None:
        return None
    conditions = _strings(raw.get("bindingConditions"), cache)
    binds = raw.get("bindsToNode", False)
    if conditions is None or type(binds) is not bool:
        return None
    built: Device = DeviceTwin(
        cache.strings.setdefault(name, name),
        attributes,
        capacity,
        consumes,
        (),
        multiple,
        node_name,
        None,
        all_nodes,
        binding=binding_of(conditions, binds),
    )
    built.__class__ = Device  # filled: now the frozen Device (see slices.DeviceTwin)
    return built


def _strings(raw: Any, cache: Interner) -> tuple[str, ...] | None:
    """A list of names, shared; None (the models decide) for anything but strings."""
    if not raw:
        return ()
    if type(raw) is not list or not all(type(s) is str for s in raw):
        return None
    return tuple(cache.string(s) for s in raw)


def _counter_set(raw: Any, cache: Interner) -> CounterSet | None:
    if type(raw) is not dict or raw.keys() - {"name", "counters"}:
        return None
    name = raw.get("name")
    counters = _counter_map(raw.get("counters", {}), cache)
    if type(name) is not str or counters is None:
        return None
    # Shared: a thousand MIG nodes publish the same sets (name, interned counters).
    key = (name, id(counters))
    found = cache.sets.get(key)
    if found is None:
        found = cache.sets[key] = CounterSet(cache.string(name), counters)
    return found


# Spec fields the fast reader understands; any other key (mixins, deviceMixins, a
# slice-wide nodeSelector) sends the slice to the models.
_SPEC_KEYS = frozenset(
    {
        "driver",
        "pool",
        "nodeName",
        "allNodes",
        "perDeviceNodeSelection",
        "devices",
        "sharedCounters",
        "skipNodeOperations",
    }
)


def read_slice(obj: dict[str, Any], cache: Interner) -> ResourceSlice | None:
    """The slice, or None when it is not in the plain shape (the caller validates it)."""
    meta = obj.get("metadata")
    spec = obj.get("spec")
    if type(meta) is not dict or type(spec) is not dict or spec.keys() - _SPEC_KEYS:
        return None
    pool = _pool(spec.get("pool"))
    placement = _placement(spec)
    generation = meta.get("generation") or 0
    if pool is None or placement is None or not in_int64(generation):
        return None
    driver = spec.get("driver")
    raw_devices = spec.get("devices") or []
    raw_sets = spec.get("sharedCounters") or []
    if type(driver) is not str or type(raw_devices) is not list or type(raw_sets) is not list:
        return None
    devices = [_device(d, cache) for d in raw_devices]
    sets = [_counter_set(c, cache) for c in raw_sets]
    skips = _strings(spec.get("skipNodeOperations"), cache)
    if None in devices or None in sets or skips is None:
        return None
    name = meta.get("name") or ""
    uid = meta.get("uid") or ""
    api_version = obj.get("apiVersion") or "resource.k8s.io/v1"
    if type(name) is not str or type(uid) is not str or type(api_version) is not str:
        return None
    return ResourceSlice(
        name,
        cache.string(driver),
        pool,
        uid,
        generation,
        cache.string(api_version),
        placement["node_name"],
        None,
        placement["all_nodes"],
        placement["per_device_node_selection"],
        None,
        tuple(devices),  # type: ignore[arg-type]  # no None left
        tuple(sets),  # type: ignore[arg-type]
        _NO_MIXINS,
        skips,
    )


def _pool(pool: Any) -> PoolRef | None:
    if type(pool) is not dict or pool.keys() - {"name", "generation", "resourceSliceCount"}:
        return None
    name = pool.get("name")
    generation = pool.get("generation", 0)
    count = pool.get("resourceSliceCount", 1)
    if type(name) is not str or not in_int64(generation) or not in_int64(count, low=1):
        return None
    return PoolRef(name, generation, count)


def _placement(spec: dict[str, Any]) -> dict[str, Any] | None:
    """nodeName, allNodes and perDeviceNodeSelection (a nodeSelector takes the models)."""
    node_name = spec.get("nodeName")
    all_nodes = spec.get("allNodes", False)
    per_device = spec.get("perDeviceNodeSelection", False)
    if not is_optional(node_name, str) or type(all_nodes) is not bool:
        return None
    if type(per_device) is not bool:
        return None
    return {
        "node_name": node_name,
        "all_nodes": all_nodes,
        "per_device_node_selection": per_device,
    }


def slice_from_object(obj: dict[str, Any], cache: Interner | None = None) -> ResourceSlice:
    """A ResourceSlice of any served shape: the fast reader first, the models otherwise.

    Raises what `ResourceSlice.from_object` raises for an unreadable object.
    """
    fast = read_slice(obj, cache if cache is not None else Interner())
    return fast if fast is not None else ResourceSlice.from_object(obj)
