"""Small worlds, one rule each, for list-typed and derived attributes, with every
profile's answer.

Each case is a node with a few devices and one pending claim, and what the allocator of
each verified profile (tests/fidelity/test_profiles.py VERIFIED) answers: "yes", "no", or
"error" (the scheduler aborts the attempt). The worlds are not all ones the profile's API
server would hold — a 1.35 cluster holds no list attribute — because the rule is what the
allocator does with what it is given (a slice written while a gate was on, a scheduler
whose gates differ from the API server's). tests/unit/test_explain_lists.py holds draview
to these answers; tests/fidelity/test_list_cases.py asks each release's allocator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
DRIVER = "gpu.example.com"
PROFILES = (
    "1.34-defaults",
    "1.34-all-gates",
    "1.35-defaults",
    "1.35-all-gates",
    "1.36-defaults",
    "1.36-all-gates",
    "1.37-defaults",
    "1.37-all-gates",
)


@dataclass(frozen=True)
class ListCase:
    name: str
    why: str
    devices: tuple[Obj, ...]  # attributes of each device, in slice order
    claim: Obj  # spec.devices
    answers: dict[str, str]  # profile -> "yes", "no" or "error"
    selectors: bool = False  # the class selects by CEL (else it has no selector at all)

    def objects(self) -> list[Obj]:
        expr = [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]
        devices = [{"name": f"dev-{i}", "attributes": a} for i, a in enumerate(self.devices)]
        return [
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a", "labels": {}}},
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": "gpu"},
                "spec": {"selectors": expr} if self.selectors else {},
            },
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": "node-a-gpu", "uid": "uid-slice"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": "node-a",
                    "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                },
            },
        ]

    def pending(self) -> Obj:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": self.name, "namespace": "default", "uid": f"uid-{self.name}"},
            "spec": {"devices": self.claim},
        }


def _all(answer: str, **others: str) -> dict[str, str]:
    """The same answer for every profile but those named (_1_37_all_gates=...)."""
    out = dict.fromkeys(PROFILES, answer)
    out.update({k[1:].replace("_", ".", 1).replace("_", "-"): v for k, v in others.items()})
    return out


def _request(count: int = 1, derived: list[Obj] | None = None, **extra: Any) -> Obj:
    body: Obj = {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": count}
    if derived:
        body["derivedAttributes"] = derived
    return {"name": "req", "exactly": {**body, **extra}}


def _match(count: int, attr: str = f"{DRIVER}/numa", **kw: Any) -> Obj:
    return {"requests": [_request(count, **kw)], "constraints": [{"matchAttribute": attr}]}


def _distinct(count: int, attr: str = f"{DRIVER}/numa", **kw: Any) -> Obj:
    return {"requests": [_request(count, **kw)], "constraints": [{"distinctAttribute": attr}]}


def ints(*v: int) -> Obj:
    return {"ints": list(v)}


def one(v: Any) -> Obj:
    return {"int": v} if isinstance(v, int) else {"string": v}


def _derived(expression: str, name: str = "derived.example.com/x") -> list[Obj]:
    return [{"name": name, "expression": expression}]


A = f"device.attributes['{DRIVER}']"
CASES: tuple[ListCase, ...] = (
    ListCase(
        "match-intersects",
        "with ListTypeAttributes matchAttribute keeps the values both lists hold",
        ({"numa": ints(0, 1)}, {"numa": ints(1, 2)}),
        _match(2),
        _all("no", _1_37_all_gates="yes"),
    ),
    ListCase(
        "match-scalar-is-a-set-of-one",
        "a single value matches a list that holds it, with ListTypeAttributes only",
        ({"numa": one(1)}, {"numa": ints(1, 2)}),
        _match(2),
        _all("no", _1_37_all_gates="yes"),
    ),
    ListCase(
        "match-kinds-differ",
        "ints and strings never share a value",
        ({"numa": ints(1)}, {"numa": {"strings": ["1"]}}),
        _match(2),
        _all("no"),
    ),
    ListCase(
        "match-a-list-alone",
        "the first device may hold anything, a list too",
        ({"numa": ints(0, 1)},),
        _match(1),
        _all("yes"),
    ),
    ListCase(
        "distinct-overlapping-lists",
        "with ListTypeAttributes the sets must be disjoint; else a single value never "
        "equals a list",
        ({"numa": ints(0, 1)}, {"numa": ints(1, 2)}, {"numa": one(1)}),
        _distinct(2),
        _all("yes", _1_34_defaults="error", _1_35_defaults="error", _1_37_all_gates="no"),
    ),
    ListCase(
        "distinct-disjoint-lists",
        "disjoint lists are distinct with ListTypeAttributes; else a second list fails",
        ({"numa": ints(0, 1)}, {"numa": ints(2, 3)}),
        _distinct(2),
        _all("no", _1_34_defaults="error", _1_35_defaults="error", _1_37_all_gates="yes"),
    ),
    ListCase(
        "distinct-every-device",
        "until 1.36 a device is compared with the last of its request only: A, B, A",
        ({"clique": one("a")}, {"clique": one("b")}, {"clique": one("a")}),
        _distinct(3, f"{DRIVER}/clique"),
        _all(
            "yes",
            _1_34_defaults="error",
            _1_35_defaults="error",
            _1_37_defaults="no",
            _1_37_all_gates="no",
        ),
    ),
    ListCase(
        "derived-shadows-an-attribute",
        "a derived attribute takes the place of the published one of its name",
        ({"model": one("H100")}, {"model": one("h100")}),
        _match(
            2, f"{DRIVER}/model", derived=_derived(f"{A}.model.lowerAscii()", f"{DRIVER}/model")
        ),
        _all("no", _1_37_defaults="error", _1_37_all_gates="yes"),
    ),
    ListCase(
        "derived-fails",
        "a derived attribute that cannot be evaluated aborts the attempt",
        ({"model": one("H100")},),
        _match(1, "derived.example.com/x", derived=_derived(f"{A}.missing")),
        _all("no", _1_37_defaults="error", _1_37_all_gates="error"),
    ),
    ListCase(
        "derived-list",
        "a derived list is compared as a set",
        ({"numa": ints(0, 1)}, {"numa": ints(1)}),
        _match(2, "derived.example.com/x", derived=_derived(f"{A}.numa")),
        _all("no", _1_37_defaults="error", _1_37_all_gates="yes"),
    ),
    ListCase(
        "derived-empty-list",
        "an empty derived list is no value: even the first device fails",
        ({"numa": ints(0, 1)},),
        _match(1, "derived.example.com/x", derived=_derived("[]")),
        _all("no", _1_37_defaults="error"),
    ),
    ListCase(
        "cel-list-unreadable",
        "a selector on a device with a list attribute fails where CEL cannot read lists",
        ({"numa": ints(0, 1)},),
        {"requests": [_request(1)]},
        _all("error", _1_36_all_gates="yes", _1_37_defaults="yes", _1_37_all_gates="yes"),
        selectors=True,
    ),
    ListCase(
        "cel-includes",
        "includes() on a list; 1.34 and 1.35 do not know it",
        ({"numa": ints(0, 1)},),
        {"requests": [_request(1, selectors=[{"cel": {"expression": f"{A}.numa.includes(1)"}}])]},
        _all("error", _1_36_all_gates="yes", _1_37_defaults="yes", _1_37_all_gates="yes"),
    ),
    ListCase(
        "cel-other-type-is-unequal",
        "cel-go compares values of different types as unequal, not as an error",
        ({"model": one("H100")},),
        {"requests": [_request(1, selectors=[{"cel": {"expression": f"{A}.model == 1"}}])]},
        _all("no"),
    ),
)
