"""Compiled selectors (cel/compiled.py) answer exactly as celpy's interpreter does.

Every expression of a corpus (the examples, the fidelity generator, the CEL tests'
shapes, and cases written to hit each error path) is evaluated on every device of a
set with the compiled closures and with celpy's walk, and the answers compared: the
same bool, or the same runtime error with the same message; derived values alike.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from draview.api.fastslice import slice_from_object
from draview.api.slices import Device
from draview.api.world import iter_objects
from draview.cel import CelCompileError, CelEngine, DeviceInput
from draview.cel.device import (
    LISTS_ABSENT,
    LISTS_EXPOSED,
    UnsupportedAttribute,
    device_activation,
)

ROOT = Path(__file__).resolve().parents[2]
DRIVER = "gpu.example.com"

# Each line aims at one path of celpy's evaluator: operators and their overload and
# overflow errors, missing keys and members, methods on the wrong type, the functions
# of the Kubernetes library, literals of every kind, lists, ternaries.
WRITTEN = [
    "device.driver == 'gpu.example.com'",
    "device.driver != 'gpu.example.com' || device.driver == 'x'",
    "device.attributes['gpu.example.com'].model == 'H100' && true",
    "device.attributes['gpu.example.com'].missing == 'H100'",
    "device.attributes['nope.io'].model == 'H100'",
    "device.attributes['gpu.example.com'].missing == 'H100' || true",
    "true || device.attributes['gpu.example.com'].missing == 'H100'",
    "false && device.attributes['gpu.example.com'].missing",
    "device.attributes['gpu.example.com'].missing && false",
    "device.attributes['gpu.example.com'].index + 1 == 1",
    "device.attributes['gpu.example.com'].index - 1 < 0",
    "device.attributes['gpu.example.com'].index * 3 >= 0",
    "device.attributes['gpu.example.com'].index / 0 == 1",
    "device.attributes['gpu.example.com'].index % 0 == 1",
    "9223372036854775807 + device.attributes['gpu.example.com'].index + 1 > 0",
    "-9223372036854775808 - 1 < 0",
    "-(device.attributes['gpu.example.com'].index) <= 0",
    "!(device.attributes['gpu.example.com'].index == 0)",
    "!device.attributes['gpu.example.com'].model",
    "-device.attributes['gpu.example.com'].model == 'x'",
    "device.attributes['gpu.example.com'].model + 1 == 'x'",
    "device.attributes['gpu.example.com'].model < 1",
    "device.attributes['gpu.example.com'].model > 'A'",
    "device.attributes['gpu.example.com'].index == 0u",
    "device.attributes['gpu.example.com'].index == 0.0",
    "device.attributes['gpu.example.com'].index < 1.5",
    "device.attributes['gpu.example.com'].model in ['A100', 'H100']",
    "device.attributes['gpu.example.com'].model in []",
    "'model' in device.attributes['gpu.example.com']",
    "'x' in device.attributes",
    "1 in device.attributes",
    "device.attributes['gpu.example.com']['model'] == 'H100'",
    "device.attributes['gpu.example.com'][0] == 'H100'",
    "[1, 2, 3][5] == 1",
    "[1, 2, 3][1] == 2",
    "[1, device.attributes['gpu.example.com'].missing][0] == 1",
    "device.driver.model == 'x'",
    "device.attributes['gpu.example.com'].model.startsWith('H1')",
    "device.attributes['gpu.example.com'].model.startsWith(1)",
    "device.attributes['gpu.example.com'].index.startsWith('H1')",
    "device.attributes['gpu.example.com'].model.lowerAscii() == 'h100'",
    "device.attributes['gpu.example.com'].model.matches('^H[0-9]+$')",
    "device.attributes['gpu.example.com'].model.matches('[')",
    "device.attributes['gpu.example.com'].model.size() == 4",
    "size(device.attributes['gpu.example.com'].model) == 4",
    "size(device.attributes['gpu.example.com']) > 0",
    "device.capacity['gpu.example.com'].memory.isGreaterThan(quantity('79Gi'))",
    "device.capacity['gpu.example.com'].memory.compareTo(quantity('80Gi')) == 0",
    "device.capacity['gpu.example.com'].memory.compareTo(quantity('bad')) == 0",
    "device.capacity['gpu.example.com'].memory.isGreaterThan(1)",
    "device.capacity['gpu.example.com'].memory.add(quantity('1Gi')).isGreaterThan("
    "quantity('80Gi'))",
    "quantity(device.attributes['gpu.example.com'].model).isInteger()",
    "isQuantity('1Gi') && !isQuantity('x')",
    "device.attributes['gpu.example.com'].driverVersion.isLessThan(semver('12.2.0'))",
    "device.attributes['gpu.example.com'].driverVersion.isLessThan(semver('x'))",
    "semver('1.2.3').major() == 1",
    "device.attributes['gpu.example.com'].index == 0 ? 'a' == 'a' : false",
    "device.attributes['gpu.example.com'].missing ? true : false",
    "device.attributes['gpu.example.com'].index ? true : false",
    "(device.attributes['gpu.example.com'].index == 0) == true",
    "device.allowMultipleAllocations == false",
    "!device.allowMultipleAllocations",
    "b'abc' == b'abc' && \"\\x41\" == 'A' && r'\\d' == '\\\\d' && '''x''' == 'x'",
    "null == null && 1u == 1u && 1.0 == 1.0 && 0x10 == 16",
    "device.attributes['gpu.example.com'].model == null",
    "int('12') == 12 && string(1) == '1' && double(1) == 1.0",
    "int('x') == 1",
    "device.attributes['gpu.example.com'].lst.exists(x, x == 1)",
    "has(device.attributes['gpu.example.com'].model)",
    "{'a': 1}['a'] == 1",
    "device.attributes['gpu.example.com'].lst.includes(1)",
    "device.attributes['gpu.example.com'].lst.size() == 2",
    "device.attributes['gpu.example.com'].lst[0] == 1",
    "device.attributes['gpu.example.com'].model",
    "device.attributes['gpu.example.com'].index",
    "device.attributes['gpu.example.com']",
]


def _expressions(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "expression" and isinstance(v, str):
                yield v
            else:
                yield from _expressions(v)
    elif isinstance(value, list):
        for v in value:
            yield from _expressions(v)


def _example_objects() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        out.extend(iter_objects(d for d in yaml.safe_load_all(path.read_text()) if d))
    return out


def _generated() -> list[dict[str, Any]]:
    from tests.fidelity.worldgen import generate

    return [o for seed in range(0, 400, 7) for o in generate(seed).objects]


def _devices(objects: list[dict[str, Any]], most: int) -> list[DeviceInput]:
    """Up to `most` devices that differ in what a selector sees: driver, attribute
    names and kinds, capacity names."""
    out: dict[Any, DeviceInput] = {}
    for obj in objects:
        if obj.get("kind") != "ResourceSlice":
            continue
        try:
            s = slice_from_object(json.loads(json.dumps(obj)))
        except Exception:
            continue
        for d in s.devices:
            kinds = tuple(sorted((n, type(v).__name__) for n, v in d.attributes.items()))
            out.setdefault((s.driver, kinds, tuple(sorted(d.capacity))), DeviceInput(s.driver, d))
    return list(out.values())[:most]


def _own() -> list[DeviceInput]:
    dev = Device.model_validate(
        {
            "name": "gpu-0",
            "attributes": {
                "model": {"string": "H100"},
                "driverVersion": {"version": "12.2.0-rc.1"},
                "index": {"int": 0},
                "lst": {"ints": [1, 2]},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
    )
    return [
        DeviceInput(DRIVER, dev),
        DeviceInput(DRIVER, dev, LISTS_ABSENT),
        DeviceInput("other.io", dev, LISTS_EXPOSED),
    ]


@pytest.fixture(scope="module")
def corpus() -> tuple[list[str], list[DeviceInput]]:
    examples = _example_objects()
    generated = _generated()
    exprs = list(dict.fromkeys([*WRITTEN, *_expressions(examples), *_expressions(generated)]))
    devices = _own() + _devices(examples, 25) + _devices(generated, 25)
    return exprs, devices


def _answers(engine: CelEngine, expr: str, activations: list[Any], fast: bool) -> list[str]:
    """The program's own result on each device: its value with its type, or what it
    raised, with every argument (the messages draview shows are made from them)."""
    try:
        program = engine.compile(expr)
    except CelCompileError as exc:
        return [f"compile: {exc}"]
    if not fast:
        program.fast = None  # type: ignore[attr-defined]
    out = []
    for activation in activations:
        try:
            value = program.evaluate({"device": activation})
            out.append(f"{type(value).__name__} {value!r}")
        except Exception as exc:  # every exception, compared by type and arguments
            out.append(f"raised {type(exc).__name__} {exc.args!r}")
    return out


def test_compiled_selectors_answer_as_celpy_does(
    corpus: tuple[list[str], list[DeviceInput]],
) -> None:
    exprs, devices = corpus
    assert len(exprs) > 100 and len(devices) > 40
    activations = []
    for d in devices:
        try:
            activations.append(device_activation(d))
        except UnsupportedAttribute:
            continue  # the engine fails every selector on it before evaluating any
    fast, slow = CelEngine(), CelEngine()
    compiled = 0
    for expr in exprs:
        want = _answers(slow, expr, activations, False)
        assert _answers(fast, expr, activations, True) == want, expr
        with contextlib.suppress(CelCompileError):
            compiled += fast.compile(expr).fast is not None  # type: ignore[attr-defined]
    # The fast path is what selectors take: most of the corpus, not a corner of it.
    assert compiled >= 0.8 * len(exprs), (compiled, len(exprs))


@pytest.mark.parametrize(
    "expr",
    [
        "device.attributes['gpu.example.com'].lst.exists(x, x == 1)",
        "has(device.attributes['gpu.example.com'].model)",
        "{'a': 1}['a'] == 1",
        "[[1]][0][0] == 1 && x == 1",
    ],
)
def test_macros_and_other_shapes_stay_with_celpy(expr: str) -> None:
    try:
        program = CelEngine().compile(expr)
    except CelCompileError:
        return
    assert program.fast is None  # type: ignore[attr-defined]


def test_common_selectors_are_compiled() -> None:
    engine = CelEngine()
    quantity = "device.capacity['gpu.example.com'].memory.compareTo(quantity('80Gi')) >= 0"
    for expr in [*WRITTEN[:3], quantity]:
        assert engine.compile(expr).fast is not None, expr  # type: ignore[attr-defined]
