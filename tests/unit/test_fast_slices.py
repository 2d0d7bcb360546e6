"""The fast ResourceSlice reader builds exactly what the pydantic models build, or steps aside."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import device, rslice
from damage import ODD_VALUES, Edit, damaged, paths_of
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from draview.api.attrvalues import PLAIN, PlainAttributes
from draview.api.fastslice import Interner, read_slice, slice_from_object
from draview.api.slices import ResourceSlice, any_binding_conditions
from draview.api.world import iter_objects

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example_slices() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        for obj in iter_objects(docs):
            if obj.get("kind") == "ResourceSlice":
                out.append((f"{path.name}:{obj['metadata']['name']}", obj))
    return out


EXAMPLE_SLICES = _example_slices()


def _models(obj: dict[str, Any]) -> ResourceSlice | None:
    try:
        return ResourceSlice.from_object(obj)
    except (ValidationError, AttributeError, TypeError):
        return None


@pytest.mark.parametrize("obj", [o for _, o in EXAMPLE_SLICES], ids=[n for n, _ in EXAMPLE_SLICES])
def test_every_example_slice_reads_the_same_both_ways(obj: dict[str, Any]) -> None:
    fast = read_slice(copy.deepcopy(obj), Interner())
    if fast is not None:
        assert repr(fast) == repr(ResourceSlice.from_object(obj))


def test_plain_examples_take_the_fast_path() -> None:
    # The shapes a driver publishes through the v1 API must not pay for validation.
    plain = {n: o for n, o in EXAMPLE_SLICES if n.startswith(("gpus.yaml", "mig-a100.yaml"))}
    assert plain
    for name, obj in plain.items():
        assert read_slice(obj, Interner()) is not None, name


def test_equal_values_are_shared_between_devices_and_slices() -> None:
    cache = Interner()
    devs = [
        device(f"gpu-{i}", capacity={"memory": "80Gi"}, counters={"cs": {"mem": "1"}}, model="H100")
        for i in range(3)
    ]
    a = slice_from_object(rslice("a", devs), cache)
    b = slice_from_object(rslice("b", devs, pool="pool-b"), cache)
    first = a.devices[0]
    for other in (*a.devices[1:], *b.devices):
        assert other.capacity is first.capacity
        assert other.attributes["model"] is first.attributes["model"]
        assert other.consumes_counters[0].counters is first.consumes_counters[0].counters


def test_list_attributes_are_read_fast_and_shared() -> None:
    """A NUMA or PCIe-root list repeats on every device of a node: one copy is kept."""
    cache = Interner()
    attrs = {
        "numa": {"ints": [0, 1]},
        "roots": {"strings": ["pci0000:00", "pci0000:80"]},
        "odd": {"ints": [0, True]},  # a bool is no int: read, but not shared
    }
    objs = [rslice(n, [{"name": "d", "attributes": copy.deepcopy(attrs)}]) for n in "ab"]
    a, b = (read_slice(o, cache) for o in objs)
    assert a is not None and b is not None
    assert repr(a) == repr(ResourceSlice.from_object(objs[0]))
    assert b.devices[0].attributes["numa"] is a.devices[0].attributes["numa"]
    assert b.devices[0].attributes["roots"] is a.devices[0].attributes["roots"]
    assert b.devices[0].attributes["odd"] is not a.devices[0].attributes["odd"]


def test_request_policies_are_read_fast_and_shared() -> None:
    """Shareable devices: a capacity map with a request policy is built by the models'
    own coercion and shared by every device that publishes the same one."""
    policy = {"default": "10Gi", "validRange": {"min": "1Gi", "max": "80Gi", "step": "1Gi"}}
    memory = {"memory": {"value": "80Gi", "requestPolicy": policy}}
    bw = {"bw": {"value": "1G", "requestPolicy": {"validValues": ["1G", 2]}}}
    devs = [device(f"acc-{i}", capacity=memory) for i in range(2)] + [device("n", capacity=bw)]
    obj = rslice("p", devs)
    cache = Interner()
    fast = read_slice(obj, cache)
    assert fast is not None
    assert repr(fast) == repr(ResourceSlice.from_object(obj))
    assert fast.devices[0].capacity is fast.devices[1].capacity
    assert fast.devices[0].capacity["memory"].valid_step == "1Gi"
    assert fast.devices[2].capacity["bw"].valid_values == ("1G", "2")
    again = read_slice(rslice("q", devs, pool="other"), cache)
    assert again is not None and again.devices[0].capacity is fast.devices[0].capacity
    # A policy entry with a key the models do not know of, or no value: the models read it.
    for odd in ({"value": "1", "requestPolicy": {}, "x": 1}, {"requestPolicy": {}}):
        assert read_slice(rslice("o", [device("d", capacity={"c": odd})]), Interner()) is None


def test_unusual_shapes_go_to_the_models() -> None:
    taints = rslice("t", [device("d", taints=[{"key": "k", "effect": "NoSchedule"}])])
    beta = rslice("b", [{"name": "d", "basic": {}}], api_version="resource.k8s.io/v1beta1")
    mixins = rslice("m", [device("d")], mixins={"device": []})
    for obj in (taints, beta, mixins):
        assert read_slice(obj, Interner()) is None
        assert slice_from_object(obj) == ResourceSlice.from_object(obj)


# --- any damage to a plain slice: the fast reader either agrees or steps aside ----------

BASE = rslice(
    "s",
    [
        device("gpu-0", counters={"cs": {"mem": "4Gi"}}, capacity={"sm": "132"}, model="A", idx=0),
        device("gpu-1", shareable=True, model="A", idx=1),
    ],
    counter_sets={"cs": {"mem": "8Gi"}},
)
PATHS = [p for p in paths_of(BASE) if p]


@settings(max_examples=400)
@given(st.lists(st.tuples(st.sampled_from(PATHS), ODD_VALUES, st.booleans()), max_size=3))
def test_a_damaged_slice_reads_the_same_or_falls_back(edits: list[Edit]) -> None:
    obj = damaged(BASE, edits)
    fast = read_slice(copy.deepcopy(obj), Interner())
    if fast is not None:
        # repr, not ==: 1 == True, but a bool field must not come out as an int.
        assert repr(fast) == repr(_models(obj))
        for dev in fast.devices:
            assert (type(dev.attributes) is PlainAttributes) == _plain(dev.attributes)


def _plain(attributes: dict[str, Any]) -> bool:
    """Every attribute one value of a kind CEL takes as it is (as cel/device.py's check
    passes them one by one)."""
    for raw in attributes.values():
        if type(raw) is not dict or len(raw) != 1:
            return False
        ((kind, value),) = raw.items()
        if PLAIN.get(kind) is not type(value):
            return False
    return True


def test_attributes_are_marked_plain_only_when_every_one_is() -> None:
    plain = {"a": {"string": "x"}, "b": {"int": 1}, "c": {"bool": True}}
    odd = [{"version": "1.0.0"}, {"strings": ["x"]}, {"int": True}, {"string": 1}]
    fast = read_slice(rslice("m", [{"name": "d", "attributes": plain}]), Interner())
    assert fast is not None and type(fast.devices[0].attributes) is PlainAttributes
    for value in odd:
        obj = rslice("m", [{"name": "d", "attributes": {**plain, "z": value}}])
        fast = read_slice(obj, Interner())
        assert fast is not None, value
        assert type(fast.devices[0].attributes) is dict, value
        assert repr(fast) == repr(_models(obj))


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from(PATHS), ODD_VALUES, st.booleans()), max_size=3))
def test_a_damaged_slice_after_the_plain_one_reads_the_same(edits: list[Edit]) -> None:
    """The same device names on the next node: what the reader remembers of the plain
    slice's devices (Interner.last) must not stand in for a changed value."""
    cache = Interner()
    assert read_slice(copy.deepcopy(BASE), cache) is not None
    obj = damaged(BASE, edits)
    fast = read_slice(copy.deepcopy(obj), cache)
    if fast is not None:
        assert repr(fast) == repr(_models(obj))


def test_same_named_devices_with_request_policies_keep_their_types() -> None:
    """A device of the same name on the next node whose policy differs only as 1 from
    True (equal in Python) reads its own value: policy maps are never taken by ==."""
    cache = Interner()
    read = []
    for i, v in enumerate((1, True, 1.0, "1")):
        capacity = {"c": {"value": "1", "requestPolicy": {"validValues": [v]}}}
        obj = rslice(f"s-{i}", [device("d", capacity=capacity)], pool=f"p-{i}")
        fast = read_slice(obj, cache)
        assert fast is not None and repr(fast) == repr(ResourceSlice.from_object(obj))
        read.append(fast.devices[0].capacity["c"].valid_values)
    assert read == [("1",), ("True",), ("1",), ("1",)]


def test_same_named_devices_share_what_was_read_until_it_changes() -> None:
    cache = Interner()
    first = read_slice(rslice("a", [device("g", counters={"cs": {"m": "1"}})]), cache)
    same = read_slice(rslice("b", [device("g", counters={"cs": {"m": "1"}})], pool="q"), cache)
    other = read_slice(rslice("c", [device("g", counters={"cs": {"m": "2"}})], pool="r"), cache)
    assert first is not None and same is not None and other is not None
    assert same.devices[0].consumes_counters is first.devices[0].consumes_counters
    assert other.devices[0].consumes_counters[0].counters == {"m": "2"}


def test_fast_objects_carry_every_model_field_in_order() -> None:
    """The models are the one declaration of each shape: whatever field they gain, the
    fast reader's objects have it (at its default unless the reader reads it)."""
    from pydantic import BaseModel

    seen = 0

    def walk(obj: object) -> None:
        nonlocal seen
        if isinstance(obj, BaseModel):
            assert list(obj.__dict__) == list(type(obj).model_fields), type(obj).__name__
            seen += 1
            for value in obj.__dict__.values():
                walk(value)
        elif dataclasses.is_dataclass(obj):  # Device: slotted, every field always set
            for f in dataclasses.fields(obj):
                walk(getattr(obj, f.name))
        elif isinstance(obj, (list, tuple)):
            for item in obj:
                walk(item)
        elif isinstance(obj, dict):
            for item in obj.values():
                walk(item)

    for path in sorted(EXAMPLES.glob("*.yaml")):
        for obj in iter_objects(yaml.safe_load_all(path.read_text())):
            if obj.get("kind") == "ResourceSlice":
                fast = read_slice(obj, Interner())
                if fast is not None:
                    walk(fast)
    assert seen > 100


def test_values_read_once_are_shared_only_with_equal_values_of_equal_types() -> None:
    """Capacity maps and consumesCounters lists already read are found again by their
    marshalled bytes: 1, True and 1.0 are equal in Python but not in a slice."""
    policies = [{"validValues": [v]} for v in (1, True, 1.0, "1")]
    devs = [
        device(f"d-{i}", capacity={"c": {"value": "1", "requestPolicy": p}})
        for i, p in enumerate(policies)
    ]
    devs += [device(f"e-{i}", counters={"cs": {"mem": "1"}}) for i in range(2)]
    obj = rslice("m", devs, counter_sets={"cs": {"mem": "8"}})
    cache = Interner()
    fast = read_slice(obj, cache)
    assert fast is not None
    assert repr(fast) == repr(ResourceSlice.from_object(obj))
    values = [d.capacity["c"].valid_values for d in fast.devices[:4]]
    assert values == [("1",), ("True",), ("1",), ("1",)]
    assert fast.devices[4].consumes_counters is fast.devices[5].consumes_counters
    again = read_slice(rslice("n", devs, pool="other", counter_sets={"cs": {"mem": "8"}}), cache)
    assert again is not None and again.devices[0].capacity is fast.devices[0].capacity


def test_fast_devices_are_frozen_devices_with_every_slot_set() -> None:
    """Built as their mutable twin and then made Devices: nothing of the twin remains."""
    from draview.api.slices import Device, DeviceTwin

    assert DeviceTwin.__slots__ == Device.__slots__
    fast = read_slice(BASE, Interner())
    assert fast is not None and fast.devices
    for dev in fast.devices:
        assert type(dev) is Device
        assert [getattr(dev, n) for n in Device.names] == [
            getattr(dev, f.name) for f in dataclasses.fields(Device)
        ]
        with pytest.raises(dataclasses.FrozenInstanceError):
            dev.name = "changed"  # type: ignore[misc]


@pytest.mark.parametrize("key", [1, True, 1.5, None])
@pytest.mark.parametrize("where", ["attributes", "capacity", "counters", "counter set"])
def test_yaml_keys_that_are_not_text_go_to_the_models(key: Any, where: str) -> None:
    """YAML reads `1:` or `true:` as a key of another type; the models turn such names
    into text (capacities, counters) or refuse them (attributes): the fast reader steps
    aside rather than keep them as they are."""
    obj = copy.deepcopy(BASE)
    dev = obj["spec"]["devices"][0]
    if where == "attributes":
        dev["attributes"][key] = {"int": 1}
    elif where == "capacity":
        dev["capacity"][key] = {"value": "1"}
    elif where == "counters":
        dev["consumesCounters"][0]["counters"][key] = {"value": "1"}
    else:
        obj["spec"]["sharedCounters"][0]["counters"][key] = {"value": "1"}
    assert read_slice(obj, Interner()) is None
    models = _models(obj)
    if models is None:
        with pytest.raises(ValidationError):
            slice_from_object(obj)
    else:
        assert repr(slice_from_object(obj)) == repr(models)


def test_any_binding_conditions_needs_conditions_not_only_a_binding() -> None:
    plain = device("plain")
    binds_only = {**device("binds"), "bindsToNode": True}
    conditioned = {**device("cond"), "bindingConditions": ["ready"]}

    def devices(*raw: dict[str, Any]) -> tuple[Any, ...]:
        return slice_from_object(rslice("s", list(raw))).devices

    assert not any_binding_conditions(())
    assert not any_binding_conditions(devices(plain, plain))
    assert not any_binding_conditions(devices(plain, binds_only))
    assert any_binding_conditions(devices(plain, binds_only, conditioned))
