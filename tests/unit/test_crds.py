"""The CRDs in deploy/crds/ declare exactly what the engine writes (DESIGN §5).

The API server silently prunes fields a structural schema does not declare, so a field
missing here would vanish from every object without an error. These tests check, without
a cluster, that every object `draview analyze` produces for examples/ validates against
its CRD and loses nothing, that every field of the status TypedDicts is declared with the
right type, and that the CRDs are structural with printer columns and selectable fields
pointing at declared fields. A small validator for the OpenAPI subset the CRDs use keeps
jsonschema out of the dependencies.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, NotRequired, get_args, get_origin, get_type_hints, is_typeddict

import pytest
import yaml

from draview.api import status as api
from draview.api.world import build_world
from draview.cli.inputs import read_sources
from draview.engine.budget import TRUNCATED_FIELD, fit_object, object_bytes
from draview.engine.model import EngineOptions
from draview.engine.world import world_objects

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "deploy" / "crds"
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
KINDS = dict(api.PLURALS)  # the pools' status objects
# Every CRD: the pools' kinds and the capacity probes'.
ALL_KINDS = {**KINDS, api.CAPACITY_PROBE_KIND: api.CAPACITY_PROBE_PLURAL}
TYPED = {
    api.SLICE_STATUS_KIND: (api.SliceStatusSpec, api.SliceStatusBody),
    api.POOL_STATUS_KIND: (api.PoolStatusSpec, api.PoolStatusBody),
}
PY_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def _load(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as fh:
        doc: dict[str, Any] = yaml.safe_load(fh)
    return doc


CRDS = {
    kind: _load(CRD_DIR / f"{api.API_GROUP}_{plural}.yaml") for kind, plural in ALL_KINDS.items()
}


def _version(kind: str) -> dict[str, Any]:
    (v,) = CRDS[kind]["spec"]["versions"]
    return dict(v)


def _schema(kind: str) -> dict[str, Any]:
    return dict(_version(kind)["schema"]["openAPIV3Schema"])


# --- a validator for the OpenAPI subset the CRDs use ---------------------------------------


def validate(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Errors of `value` against `schema`, pruning included: an undeclared key is an error."""
    where = path or "<root>"
    want = schema.get("type")
    if want is not None:
        ok = isinstance(value, PY_TYPES[want])
        if isinstance(value, bool) and want in ("integer", "number"):
            ok = False
        if not ok:
            return [f"{where}: {type(value).__name__} {value!r} is not {want}"]
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} not in {schema['enum']}")
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{where}: {value} < minimum {schema['minimum']}")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(f"{where}: longer than {schema['maxLength']}")
    if isinstance(value, dict):
        if path == ".metadata":
            return errors  # the API server validates ObjectMeta itself
        errors += [f"{where}: missing {k}" for k in schema.get("required", ()) if k not in value]
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if key in props:
                errors += validate(item, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                errors += validate(item, extra, f"{path}.{key}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                errors.append(f"{where}: {key} is not declared and would be pruned")
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{where}: more than {schema['maxItems']} items")
        for i, item in enumerate(value):
            errors += validate(item, schema["items"], f"{path}[{i}]")
        list_type = schema.get("x-kubernetes-list-type", "atomic")
        if list_type == "map":
            keys = schema["x-kubernetes-list-map-keys"]
            seen = [tuple(item.get(k) for k in keys) for item in value if isinstance(item, dict)]
            if len(set(seen)) != len(seen):
                errors.append(f"{where}: duplicate list-map keys {keys}: {seen}")
        elif list_type == "set" and len(set(value)) != len(value):
            errors.append(f"{where}: duplicate items in a set")
    return errors


def resolve(schema: dict[str, Any], json_path: str) -> dict[str, Any]:
    """The schema node a kubectl JSONPath like `.a.b[?(@.type=="X")].c` points at."""
    node = schema
    for part in re.findall(r"\.(\w+)|\[\?\(@\.(\w+)==\"[^\"]*\"\)\]", json_path):
        field, filter_field = part
        if filter_field:
            assert node["type"] == "array", f"{json_path}: filter on a non-list"
            node = node["items"]
            assert filter_field in node["properties"], f"{json_path}: filter on undeclared field"
        else:
            assert field in node.get("properties", {}), f"{json_path}: {field} is not declared"
            node = node["properties"][field]
    return node


def schema_nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, Any]]:
    yield path or "<root>", schema
    for key, sub in schema.get("properties", {}).items():
        yield from schema_nodes(sub, f"{path}.{key}")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from schema_nodes(schema["additionalProperties"], f"{path}.*")
    if "items" in schema:
        yield from schema_nodes(schema["items"], f"{path}[]")


# --- engine output against the CRDs ---------------------------------------------------------


def _analyze(path: Path, **options: Any) -> list[dict[str, Any]]:
    objects = read_sources([str(path)])  # every example must load: an error fails the test
    opts = EngineOptions(partition_attributes=("gpu.example.com/profile",), **options)
    return world_objects(build_world(objects), opts)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_analyzed_object_validates_and_loses_nothing(example: Path) -> None:
    objects = _analyze(example)
    assert objects, f"{example.name} gives no objects"
    for obj in objects:
        assert obj["apiVersion"] == api.API_VERSION
        errors = validate(obj, _schema(obj["kind"]))
        assert not errors, f"{obj['kind']} {obj['metadata']['name']}: " + "\n".join(errors)


def test_capped_allocation_lists_still_validate() -> None:
    nic = ROOT / "examples" / "shareable-nic.yaml"
    for obj in _analyze(nic, max_listed_allocations=1):
        assert not validate(obj, _schema(obj["kind"]))


def test_objects_cut_to_the_byte_budget_still_validate() -> None:
    nic = ROOT / "examples" / "shareable-nic.yaml"
    cut = 0
    for obj in _analyze(nic):
        fitted = fit_object(obj, object_bytes(obj) - 1)
        cut += any(d.get(TRUNCATED_FIELD) for d in fitted["status"].get("devices", ()))
        assert not validate(fitted, _schema(obj["kind"]))
    assert cut


def _check_type(hint: Any, schema: dict[str, Any], path: str) -> None:
    """`schema` declares the Python type `hint` of a status TypedDict, field by field."""
    origin = get_origin(hint)
    if is_typeddict(hint):
        assert schema["type"] == "object", path
        # __required_keys__ misses NotRequired under `from __future__ import annotations`.
        extras = get_type_hints(hint, include_extras=True)
        required = {k for k, h in extras.items() if get_origin(h) is not NotRequired}
        hints = get_type_hints(hint)
        assert set(schema["properties"]) == set(hints), f"{path}: properties differ"
        assert set(schema.get("required", ())) == required, f"{path}: required differs"
        for key, sub in hints.items():
            _check_type(sub, schema["properties"][key], f"{path}.{key}")
    elif origin is Literal:
        assert schema["type"] == "string" and schema["enum"] == list(get_args(hint)), path
    elif origin is list:
        assert schema["type"] == "array", path
        _check_type(get_args(hint)[0], schema["items"], f"{path}[]")
    elif origin is dict:
        assert schema["type"] == "object" and "properties" not in schema, path
        _check_type(get_args(hint)[1], schema["additionalProperties"], f"{path}.*")
    else:
        names = {str: "string", int: "integer", bool: "boolean"}
        assert hint in names, f"{path}: no schema type for {hint}"
        assert schema["type"] == names[hint], f"{path}: {schema['type']} for {hint.__name__}"


@pytest.mark.parametrize("kind", sorted(TYPED))
def test_every_typed_status_field_is_declared(kind: str) -> None:
    """Covers optional fields the examples may not show (lastTransitionTime, adminAccess)."""
    spec, status = TYPED[kind]
    props = _schema(kind)["properties"]
    _check_type(spec, props["spec"], ".spec")
    _check_type(status, props["status"], ".status")


def test_every_capacity_probe_status_field_is_declared() -> None:
    from draview.explain.probes import ProbeStatus

    _check_type(ProbeStatus, _schema(api.CAPACITY_PROBE_KIND)["properties"]["status"], ".status")


def test_a_capacity_probe_validates_and_loses_nothing() -> None:
    from draview.api.probes import ProbeSpec, workload_of
    from draview.explain.fit import fit
    from draview.explain.probes import answer

    world = build_world(read_sources([str(ROOT / "examples" / "gpus.yaml")]))
    claim = {
        "devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.example.com"}}]}
    }
    spec = ProbeSpec("one-gpu", "draview/probes:probes.yaml", claim=claim, min_copies=2)
    got = answer(fit(world, workload_of(spec, None)), "Kubernetes 1.37, default gates", 3)
    obj = {
        "apiVersion": api.API_VERSION,
        "kind": api.CAPACITY_PROBE_KIND,
        "metadata": {"name": "one-gpu"},
        "spec": spec.spec(),
        "status": dict(got.status),
    }
    assert got.status["nodes"], "the example has nodes that take a copy"
    assert validate(obj, _schema(api.CAPACITY_PROBE_KIND)) == []


def test_device_state_reasons_are_every_reason_the_engine_gives() -> None:
    from draview.engine.aborts import ABORTS, MAY_ABORT
    from draview.engine.verdict import RANKS

    device = _schema(api.SLICE_STATUS_KIND)["properties"]["status"]["properties"]["devices"]
    reasons = device["items"]["properties"]["stateReason"]["enum"]
    # InUse always shows as state Allocated; InconsistentSliceCount is no refusal of its
    # own but what a device gets when the slice order decides; 1.34's invalid pools
    # refuse devices of every pool after each pool's own judgement (engine/aborts.py).
    extra = {"InconsistentSliceCount", ABORTS, MAY_ABORT}
    assert set(reasons) == (set(RANKS) - {"InUse"}) | extra


def test_validator_reports_pruned_and_mistyped_fields() -> None:
    schema = _schema(api.POOL_STATUS_KIND)
    bad = {"spec": {"driver": "d", "pool": "p", "extra": 1}, "status": {"generation": "1"}}
    errors = "\n".join(validate(bad, schema))
    assert ".spec: extra is not declared" in errors
    assert ".status.generation: str" in errors
    assert ".status: missing summary" in errors


# --- the CRDs themselves --------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(ALL_KINDS))
def test_crd_identity(kind: str) -> None:
    crd = CRDS[kind]
    plural = ALL_KINDS[kind]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == f"{plural}.{api.API_GROUP}"
    spec = crd["spec"]
    assert spec["group"] == api.API_GROUP
    assert spec["scope"] == "Cluster"
    names = spec["names"]
    assert names["kind"] == kind
    assert names["plural"] == plural
    assert names["singular"] == kind.lower()
    assert names["listKind"] == f"{kind}List"
    assert set(names["categories"]) == {"draview", "dra"}
    version = _version(kind)
    assert version["name"] == api.CRD_VERSION
    assert f"{api.API_GROUP}/{version['name']}" == api.API_VERSION
    assert version["served"] is True and version["storage"] is True
    assert version["subresources"] == {"status": {}}


def _literals(path: Path) -> Iterator[tuple[int, str]]:
    """The string constants of a module that are values, not docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.lineno, node.value


def test_the_crd_identity_is_written_in_api_status_only() -> None:
    # A second spelling of the group, version or a plural would drift from the CRDs the
    # day one of them changes; every other module reads them from api/status.py.
    exact = {api.API_GROUP, api.CRD_VERSION, api.API_VERSION}
    package = ROOT / "operator" / "draview"
    found = [
        f"{path.relative_to(package)}:{line}: {text!r}"
        for path in sorted(package.rglob("*.py"))
        if path != package / "api" / "status.py"
        for line, text in _literals(path)
        if text in exact or any(p in text for p in ALL_KINDS.values())
        # The explain API's group (explain.draview.io) has a version of its own.
        if not (path == package / "api" / "explanations.py" and text == api.CRD_VERSION)
    ]
    assert found == []


def test_short_names() -> None:
    short = {kind: crd["spec"]["names"]["shortNames"] for kind, crd in CRDS.items()}
    assert short == {
        api.SLICE_STATUS_KIND: ["rsst"],
        api.POOL_STATUS_KIND: ["rpst"],
        api.CAPACITY_PROBE_KIND: ["cprobe"],
    }


def test_kustomization_lists_exactly_the_crds() -> None:
    kustomization = _load(CRD_DIR / "kustomization.yaml")
    files = sorted(p.name for p in CRD_DIR.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(kustomization["resources"]) == files
    assert len(files) == len(CRDS)


@pytest.mark.parametrize("kind", sorted(ALL_KINDS))
def test_schema_is_structural(kind: str) -> None:
    for path, node in schema_nodes(_schema(kind)):
        if not (
            node.get("x-kubernetes-preserve-unknown-fields")
            or node.get("x-kubernetes-int-or-string")
        ):
            assert node.get("type") in PY_TYPES, f"{path}: no type"
        assert not ("properties" in node and "additionalProperties" in node), path
        for value in node.get("enum", ()):
            assert not validate(value, {"type": node["type"]}), f"{path}: enum {value!r}"
        list_type = node.get("x-kubernetes-list-type")
        if list_type is not None:
            assert node["type"] == "array" and list_type in ("atomic", "set", "map"), path
        if list_type == "map":
            items = node["items"]
            for key in node["x-kubernetes-list-map-keys"]:
                assert key in items["required"], f"{path}: map key {key} must be required"
                assert items["properties"][key]["type"] in ("string", "integer"), path
        if node.get("type") == "array":
            assert list_type is not None, f"{path}: say how lists merge"
    metadata = _schema(kind)["properties"]["metadata"]
    assert metadata == {"type": "object"}, "ObjectMeta is the API server's"


@pytest.mark.parametrize("kind", sorted(ALL_KINDS))
def test_printer_columns_point_at_declared_fields(kind: str) -> None:
    columns = _version(kind)["additionalPrinterColumns"]
    names = [c["name"] for c in columns]
    if kind == api.CAPACITY_PROBE_KIND:
        assert {"Copies", "Max", "Bounded", "Blocker", "Age"} <= set(names)
    else:
        for want in ("Driver", "Pool", "Node", "Total", "Allocated", "Available", "Unavailable"):
            assert want in names
        assert {"Complete", "Valid", "Age"} <= set(names)
    schema = _schema(kind)
    for column in columns:
        path = column["jsonPath"]
        if path == ".metadata.creationTimestamp":
            assert column["type"] == "date"
            continue
        node = resolve(schema, path)
        assert node["type"] == column["type"], f"{column['name']}: {node['type']}"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_selectable_fields_are_declared_strings(kind: str) -> None:
    selectable = [f["jsonPath"] for f in _version(kind)["selectableFields"]]
    assert selectable == [".spec.driver", ".spec.pool", ".spec.nodeName"]
    for path in selectable:
        assert resolve(_schema(kind), path)["type"] == "string"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_immutability_rules_have_bounded_cost(kind: str) -> None:
    """CEL cost is estimated from maxLength; unbounded strings could exceed the budget."""
    ruled = [(p, n) for p, n in schema_nodes(_schema(kind)) if "x-kubernetes-validations" in n]
    assert ruled, "spec identity fields are immutable"
    for path, node in ruled:
        assert path.startswith(".spec"), f"{path}: rules only guard the spec"
        for sub_path, sub in schema_nodes(node, path):
            if sub.get("type") == "string":
                assert "maxLength" in sub, f"{sub_path}: no maxLength"
