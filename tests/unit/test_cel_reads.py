"""Selectors that read fixed paths of a device are evaluated once per distinct value of
those paths (cel/reads.py): the same answers as evaluating every device on its own, and
a fleet that differs only in what a selector does not read costs one evaluation."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from test_cel_compiled import corpus  # noqa: F401  (the fixture)

from draview.api.attrvalues import PlainAttributes
from draview.api.slices import Device
from draview.cel import CelCompileError, CelEngine, CelRuntimeError, DeviceInput
from draview.cel.device import LISTS_ABSENT, LISTS_EXPOSED, LISTS_REFUSED
from draview.cel.reads import _attribute, _by_domain, content_key, keyer, plain_keyer

DRIVER = "gpu.example.com"


def _compile(expr: str) -> Any:
    engine = CelEngine()
    engine.compile(expr)
    return engine._reads[expr]


@pytest.mark.parametrize(
    ("expr", "paths"),
    [
        ("device.driver == 'x'", {("driver",)}),
        (
            "device.driver == 'x' && 'type' in device.attributes['d.io'] && "
            "device.attributes['d.io'].type == 'mig'",
            {("driver",), ("attributes", "d.io", "type")},
        ),
        ("device.attributes[\"d.io\"]['a'] > 1", {("attributes", "d.io", "a")}),
        ("has(device.attributes['d.io'].a)", {("attributes", "d.io", "a")}),
        ("device.attributes['d.io'].a.b == 1", {("attributes", "d.io", "a")}),
        (
            "device.capacity['d.io'].memory.compareTo(quantity('1Gi')) >= 0",
            {("capacity", "d.io", "memory")},
        ),
        ("device.allowMultipleAllocations", {("allowMultipleAllocations",)}),
        ("device.attributes['d.io'].exists(x, x == 'a')", {("attributes", "d.io")}),
        ("size(device.attributes['d.io']) > 1", {("attributes", "d.io")}),
        ("'a' in device.attributes['d\\x2eio']", None),  # not a plain literal: every device
        ("device.attributes[device.driver].a == 1", None),  # a name chosen at run time
        ("device.attributes.exists(d, d == 'x')", None),  # the map of every domain
        ("device == device", None),
        ("device.nothing == 1", None),
        ("true", set()),
    ],
)
def test_the_paths_a_selector_reads(expr: str, paths: set[tuple[str, ...]] | None) -> None:
    found = _compile(expr)
    assert (None if found is None else set(found)) == paths


def _fleet(n: int, **extra: Any) -> list[DeviceInput]:
    """n GPUs alike but for a serial number in the driver's own domain."""
    out = []
    for i in range(n):
        attributes = {"model": {"string": "H100"}, "serial": {"string": f"S{i:04}"}, **extra}
        dev = Device.model_validate({"name": f"gpu-{i}", "attributes": attributes})
        out.append(DeviceInput(DRIVER, dev))
    return out


@pytest.mark.parametrize(
    ("expr", "evaluations"),
    [
        (f"device.attributes['{DRIVER}'].model == 'H100'", 1),
        (f"'model' in device.attributes['{DRIVER}'] && device.driver == '{DRIVER}'", 1),
        (f"device.attributes['{DRIVER}'].serial == 'S0003'", 40),
        (f"device.attributes['{DRIVER}'].exists(n, n == 'model')", 40),  # the whole domain
        ("device.attributes[device.driver].model == 'H100'", 40),  # evaluated per device
    ],
)
def test_a_fleet_is_evaluated_once_per_value_the_selector_reads(
    expr: str, evaluations: int
) -> None:
    engine = CelEngine()
    fleet = _fleet(40)
    answers = [engine.evaluate(expr, d, ("pool", d.device.name)) for d in fleet]
    assert engine.evaluations == evaluations
    alone = CelEngine()
    assert answers == [alone.evaluate(expr, d) for d in fleet]  # no key: nothing shared


def test_an_attribute_cel_cannot_hold_still_fails_its_own_device() -> None:
    engine = CelEngine()
    expr = f"device.attributes['{DRIVER}'].model == 'H100'"
    good = _fleet(2)
    bad = _fleet(1, version={"version": "not-a-semver"})[0]
    listed = _fleet(1, lanes={"ints": [1, 2]})[0]
    assert engine.evaluate(expr, good[0], "a") is True
    found = engine.evaluate(expr, bad, "b")
    assert isinstance(found, CelRuntimeError) and "attribute version" in str(found)
    assert engine.evaluate(expr, good[1], "c") is True
    refused = DeviceInput(DRIVER, listed.device, LISTS_REFUSED)
    assert isinstance(engine.evaluate(expr, refused, "d"), CelRuntimeError)
    assert engine.evaluate(expr, listed, "e") is True  # lists exposed: it converts


def _variants(devices: list[DeviceInput]) -> list[DeviceInput]:
    """Each device as every list mode and another driver see it, and a twin with one
    more attribute in the driver's domain: equal on most paths, different on some."""
    out = []
    for d in devices:
        twin = replace(d.device, attributes={**d.device.attributes, "extra": {"int": 7}})
        for dev in (d.device, twin):
            for lists in (LISTS_EXPOSED, LISTS_REFUSED, LISTS_ABSENT):
                out.append(DeviceInput(d.driver, dev, lists))
        out.append(DeviceInput("other.io", d.device, LISTS_EXPOSED))
    return out


def _answer(engine: CelEngine, expr: str, d: DeviceInput, key: Any, matcher: bool = False) -> str:
    try:
        if matcher:  # one pass of its own for a device not met (CelEngine._evaluator)
            return repr(engine.matcher((expr,), d.lists)(d.driver, d.device, key))
        return repr(engine.evaluate(expr, d, key))
    except CelCompileError as exc:  # e.g. includes() where the profile has no lists
        return f"compile: {exc}"


@pytest.mark.parametrize("first", ["evaluate", "matcher"])
def test_shared_answers_are_each_devices_own(
    corpus: tuple[list[str], list[DeviceInput]],  # noqa: F811
    first: str,
) -> None:
    # Asked first through evaluate or a matcher, then the other: either fills the caches
    # the other finds, with each device's own answer.
    exprs, devices = corpus
    inputs = _variants(devices)
    shared = CelEngine(max_results=10_000_000)
    alone = CelEngine()  # asked without a device key: each device's own activation
    shared_paths = 0
    for expr in exprs:
        try:
            shared.compile(expr)
        except Exception:
            continue
        shared_paths += shared._reads[expr] is not None
        for i, d in enumerate(inputs):
            want = _answer(alone, expr, d, None)
            for matcher in (first == "matcher", first != "matcher"):
                got = _answer(shared, expr, d, ("device", i), matcher)
                assert got == want, (expr, d.lists, d.device, matcher)
    # Most selectors read fixed paths: the sharing is what they take.
    assert shared_paths >= 0.6 * len(exprs), (shared_paths, len(exprs))


@pytest.mark.parametrize(
    "attributes",
    [
        {"model": {"string": "a"}},
        {f"{DRIVER}/model": {"string": "b"}},
        {"model": {"string": "a"}, f"{DRIVER}/model": {"string": "b"}},  # the later wins
        {f"{DRIVER}/model": {"string": "b"}, "model": {"string": "a"}},
        {"/model": {"string": "c"}, "model": {"string": "a"}},
        {"other.io/model": {"string": "d"}},
        {"x/y/model": {"string": "e"}},
        {},
    ],
)
@pytest.mark.parametrize(
    "path",
    [
        ("attributes", DRIVER, "model"),
        ("attributes", "other.io", "model"),
        ("attributes", "x/y", "model"),
        ("attributes", "", "model"),
        ("attributes", DRIVER, "a/model"),
    ],
)
def test_one_attribute_is_read_as_grouping_by_domain_reads_it(
    attributes: dict[str, Any], path: tuple[str, ...]
) -> None:
    # content_key looks one attribute up by the names it may be written as; the values
    # it gives are those of grouping every attribute by domain, as the activation does.
    dev = Device.model_validate({"name": "d", "attributes": attributes})
    twice = sum(n in attributes for n in (f"{DRIVER}/model", "model", "/model")) > 1
    grouped = _by_domain(dev.attributes, DRIVER).get(path[1], {})
    want = _attribute(grouped.get(path[2]))
    assert content_key(frozenset({path}), DRIVER, dev, LISTS_EXPOSED) == (LISTS_EXPOSED, want)
    # The matcher's keyer, its plan looked at once, gives the same key with the driver too.
    paths = frozenset({path, ("driver",)})
    for lists in (LISTS_EXPOSED, LISTS_ABSENT):
        assert keyer(paths, DRIVER, lists)(dev) == content_key(paths, DRIVER, dev, lists)
        # The one-pass keyer gives the same key, or leaves a name written two ways to them,
        # whether or not the reader marked the attributes plain (then it looks names up).
        marked = replace(dev, attributes=PlainAttributes(dev.attributes))
        for one in (dev, marked):
            fast = plain_keyer(paths, DRIVER, lists)(one)
            if fast is None:
                assert twice
            else:
                assert fast == content_key(paths, DRIVER, dev, lists)


@pytest.mark.parametrize(
    "attributes",
    [
        {"model": {"version": "1.0.0"}},  # a version converts only when it parses
        {"model": {"strings": ["a"]}},
        {"model": {"string": 1}},
        {"model": {"string": "a", "int": 1}},
        {"model": None},
    ],
)
def test_the_one_pass_keyer_leaves_attributes_that_are_not_plain_to_the_check(
    attributes: dict[str, Any],
) -> None:
    dev = Device(name="d", attributes=attributes)  # as written, not validated
    paths = frozenset({("attributes", DRIVER, "other"), ("driver",)})
    assert plain_keyer(paths, DRIVER, LISTS_EXPOSED)(dev) is None


def test_the_one_pass_keyer_reads_only_what_keyer_plans_name_by_name() -> None:
    dev = Device.model_validate({"name": "d", "attributes": {"model": {"string": "a"}}})
    whole_domain = frozenset({("attributes", DRIVER)})
    assert plain_keyer(whole_domain, DRIVER, LISTS_EXPOSED)(dev) is None
