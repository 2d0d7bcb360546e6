"""CEL in the Kubernetes DRA environment (the cases in FACTS.md)."""

from __future__ import annotations

import pytest

from draview.api.slices import Device
from draview.cel import CelCompileError, CelEngine, CelRuntimeError, DeviceInput
from draview.cel.device import UnsupportedAttribute, device_activation

DRIVER = "gpu.example.com"


@pytest.fixture
def cel() -> CelEngine:
    return CelEngine()


def gpu(**attrs: object) -> DeviceInput:
    dev = Device.model_validate(
        {
            "name": "gpu-0",
            "attributes": {
                "model": {"string": "H100"},
                "driverVersion": {"version": "12.2.0-rc.1"},
                "index": {"int": 0},
                "nvlink.example.com/clique": {"string": "c1"},
                **attrs,
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
    )
    return DeviceInput(DRIVER, dev)


@pytest.mark.parametrize(
    "expr",
    [
        "device.driver == 'gpu.example.com'",
        "device.attributes['gpu.example.com'].model == 'H100'",
        "device.attributes['gpu.example.com'].index == 0",
        "device.attributes['nvlink.example.com'].clique == 'c1'",
        "'model' in device.attributes['gpu.example.com']",
        "has(device.attributes['gpu.example.com'].model)",
        "device.capacity['gpu.example.com'].memory.isGreaterThan(quantity('79Gi'))",
        "device.capacity['gpu.example.com'].memory.compareTo(quantity('80Gi')) == 0",
        "device.attributes['gpu.example.com'].driverVersion.isLessThan(semver('12.2.0'))",
        "device.attributes['gpu.example.com'].model.lowerAscii() == 'h100'",
        "device.attributes['gpu.example.com'].model.startsWith('H1')",
        "device.attributes['gpu.example.com'].model.matches('^H[0-9]+$')",
        "device.attributes['gpu.example.com'].model in ['A100', 'H100']",
        "!device.allowMultipleAllocations",
    ],
)
def test_matches(cel: CelEngine, expr: str) -> None:
    assert cel.evaluate(expr, gpu()) is True


def test_unknown_domain_is_an_empty_map(cel: CelEngine) -> None:
    assert cel.evaluate("device.attributes['other.io'].size() == 0", gpu()) is True
    assert cel.evaluate("'model' in device.attributes['other.io']", gpu()) is False
    assert cel.evaluate("has(device.attributes['other.io'].model)", gpu()) is False


def test_missing_key_is_a_runtime_error(cel: CelEngine) -> None:
    result = cel.evaluate("device.attributes['gpu.example.com'].memory == 'x'", gpu())
    assert isinstance(result, CelRuntimeError)
    assert "memory" in str(result)
    # An unknown domain is empty, so reading a key from it fails too.
    missing = cel.evaluate("device.attributes['x.io'].model == 'a'", gpu())
    assert isinstance(missing, CelRuntimeError)
    # Short-circuit evaluation avoids the error, as in CEL.
    assert cel.evaluate("true || device.attributes['x.io'].model == 'a'", gpu()) is True


@pytest.mark.parametrize(
    ("a", "b", "order"),
    [("24Gi", "25G", 1), ("25G", "24G", 1), ("24G", "24Gi", -1), ("1Gi", "1024Mi", 0)],
)
def test_quantities_compare_across_units(cel: CelEngine, a: str, b: str, order: int) -> None:
    expr = f"quantity('{a}').compareTo(quantity('{b}')) == {order}"
    assert cel.evaluate(expr, gpu()) is True
    gt = cel.evaluate(f"quantity('{a}').isGreaterThan(quantity('{b}'))", gpu())
    lt = cel.evaluate(f"quantity('{a}').isLessThan(quantity('{b}'))", gpu())
    assert (gt, lt) == (order > 0, order < 0)


@pytest.mark.parametrize(
    "expr",
    [
        "quantity('1Gi').add(quantity('1Gi')) == quantity('2Gi')",
        "quantity('1Gi').sub(1).asInteger() == 1073741823",
        "quantity('1Gi').add(1) == quantity('1073741825')",
        "quantity('1500m').asApproximateFloat() == 1.5",
        "quantity('1Gi') == quantity('1024Mi')",
        "isQuantity('10Gi') && !isQuantity('10 Gi')",
    ],
)
def test_quantity_methods(cel: CelEngine, expr: str) -> None:
    assert cel.evaluate(expr, gpu()) is True


def test_quantity_errors(cel: CelEngine) -> None:
    assert isinstance(cel.evaluate("quantity('1500m').asInteger() == 1", gpu()), CelRuntimeError)
    assert isinstance(cel.evaluate("quantity('bogus') == quantity('1')", gpu()), CelRuntimeError)


@pytest.mark.parametrize(
    ("a", "b", "order"),
    [
        ("12.2.0-rc.1", "12.2.0", -1),
        ("12.2.0-rc.1", "12.2.0-rc.2", -1),
        ("1.0.0-alpha", "1.0.0-alpha.1", -1),
        ("1.0.0-alpha.beta", "1.0.0-beta", -1),
        ("1.0.0-2", "1.0.0-11", -1),
        ("1.0.0-11", "1.0.0-rc", -1),
        ("1.10.0", "1.9.9", 1),
        ("1.0.0+build.1", "1.0.0", 0),
    ],
)
def test_semver_ordering(cel: CelEngine, a: str, b: str, order: int) -> None:
    assert cel.evaluate(f"semver('{a}').compareTo(semver('{b}')) == {order}", gpu()) is True


def test_semver_parts_and_validation(cel: CelEngine) -> None:
    expr = "semver('1.2.3').major() == 1 && semver('1.2.3').minor() == 2"
    assert cel.evaluate(expr + " && semver('1.2.3').patch() == 3", gpu()) is True
    assert cel.evaluate("isSemver('1.2.3') && !isSemver('1.2')", gpu()) is True
    assert isinstance(cel.evaluate("semver('v1') == semver('1.0.0')", gpu()), CelRuntimeError)


@pytest.mark.parametrize(
    "expr",
    [
        "'a,b,c'.split(',') == ['a', 'b', 'c']",
        "'a,b,c'.split(',', 2) == ['a', 'b,c']",
        "'ABC'.lowerAscii() == 'abc' && 'abc'.upperAscii() == 'ABC'",
        "'abcabc'.indexOf('c') == 2 && 'abcabc'.lastIndexOf('c') == 5",
        "'hello'.substring(1, 3) == 'el' && ' x '.trim() == 'x'",
        "'a-b'.replace('-', '_') == 'a_b'",
        "['a', 'b'].join('-') == 'a-b'",
        "'gpu.example.com'.endsWith('.com') && 'gpu.example.com'.contains('example')",
        "[1, 2, 3].isSorted() && [1, 2, 3].sum() == 6 && [3, 1].min() == 1",
        "'abc123'.find('[0-9]+') == '123'",
    ],
)
def test_string_and_list_extensions(cel: CelEngine, expr: str) -> None:
    assert cel.evaluate(expr, gpu()) is True


@pytest.mark.parametrize("expr", ["1 +", "device.driver.bogus()", "nosuch('x')", "device.("])
def test_compile_errors(cel: CelEngine, expr: str) -> None:
    with pytest.raises(CelCompileError):
        cel.compile(expr)


def test_non_bool_result_is_an_error(cel: CelEngine) -> None:
    assert isinstance(cel.evaluate("device.driver", gpu()), CelRuntimeError)


def test_results_are_cached_per_device_key(cel: CelEngine) -> None:
    expr = "device.attributes['gpu.example.com'].model == 'H100'"
    for _ in range(3):
        assert cel.evaluate(expr, gpu(), key=("pool", 1, "gpu-0")) is True
    assert cel.evaluations == 1
    # A new pool generation: the answer of the same model stands (cel/reads.py), another
    # model is evaluated.
    assert cel.evaluate(expr, gpu(), key=("pool", 2, "gpu-0")) is True
    assert cel.evaluations == 1
    assert cel.evaluate(expr, gpu(model={"string": "A100"}), key=("pool", 3, "gpu-0")) is False
    assert cel.evaluations == 2
    assert cel.compile(expr) is cel.compile(expr)


def test_a_selector_of_the_driver_alone_is_evaluated_once_per_driver(cel: CelEngine) -> None:
    expr = "device.driver == 'gpu.example.com' || device.driver.startsWith('x')"
    for i in range(5):
        assert cel.evaluate(expr, gpu(index={"int": i}), key=("pool", 1, f"gpu-{i}")) is True
    assert cel.evaluations == 1
    other = DeviceInput("other.example.com", gpu().device)
    assert cel.evaluate(expr, other, key=("pool", 1, "other")) is False
    assert cel.evaluations == 2


@pytest.mark.parametrize(
    "expr",
    [
        "device.driver == 'gpu.example.com'",
        "true",
        # A macro variable named device: not the device, evaluated in full.
        "['a'].exists(device, device == 'a') && device.driver == 'gpu.example.com'",
        "device.attributes['gpu.example.com'].model == 'H100'",
    ],
)
def test_a_device_whose_attributes_cel_cannot_hold_fails_every_selector(
    cel: CelEngine, expr: str
) -> None:
    """As the scheduler converts every attribute before it evaluates anything, whatever
    the selector reads: the driver-only shortcut gives the same error."""
    broken = gpu(driverVersion={"version": "not-a-semver"})
    with pytest.raises(UnsupportedAttribute) as built:
        device_activation(broken)  # what evaluating in full meets first
    fast = cel.evaluate(expr, broken, key=("pool", 1, "gpu-0"))
    assert isinstance(fast, CelRuntimeError)
    assert str(fast) == str(built.value)
    assert cel.evaluate(expr, gpu(), key=("pool", 1, "gpu-1")) is True


def test_matches_all_stops_at_first_failure(cel: CelEngine) -> None:
    exprs = ("device.driver == 'other'", "device.attributes['x.io'].y == 1")
    assert cel.matches_all(exprs, gpu()) is False
    assert isinstance(cel.matches_all(tuple(reversed(exprs)), gpu()), CelRuntimeError)
