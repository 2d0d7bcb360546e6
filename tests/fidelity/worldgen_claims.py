"""Pending claims that use list-typed attributes and derived attributes (worldgen_lists).

Selectors that read a list attribute (`in`, includes(), exists(), size()), guarded or
not; matchAttribute and distinctAttribute on list attributes, within a request and
across two drivers; distinctAttribute over three devices (where 1.37 compares every
device and 1.36 one per request); and requests with derivedAttributes read by their
claim's constraints: lists passed through or filtered, scalars computed, a published
attribute shadowed, an expression that fails on some devices, firstAvailable
subrequests. Every expression compiles in the v1.37 API server's CEL environment with
both gates on (its validation of new expressions), checked against its library.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .worldgen_lists import _OWN, NUMA, TOPOLOGY, new_uid

if TYPE_CHECKING:
    from .worldgen_lists import _Lists

Obj = dict[str, Any]
RESOURCE_V1 = "resource.k8s.io/v1"
# (qualified name, CEL domain, ident, kind, list on every device that has it)
Entry = tuple[str, str, str, str, bool]


def add_claims(lists: _Lists) -> None:
    makers: list[Callable[[_Lists], Obj | None]] = [
        _list_cel,
        _list_cel,
        _list_match,
        _list_distinct,
        _distinct_many,
        _distinct_many,
        _derived_numa,
        _derived_parity,
        _derived_shadow,
        _derived_error,
        _derived_subrequests,
    ]
    drivers = sorted({o["spec"]["driver"] for o in _slices(lists)})
    if not drivers:
        return
    for _ in range(lists.rng.randint(2, 5)):
        claim = lists.rng.choice(makers)(lists)
        if claim is not None:
            lists.pending.append(claim)


# --- helpers ---------------------------------------------------------------------------


def _slices(lists: _Lists) -> list[Obj]:
    return [o for o in lists.objects if o.get("kind") == "ResourceSlice"]


def _class(lists: _Lists, driver: str) -> str:
    """The driver's DeviceClass as worldgen names it, added when no claim made it yet."""
    name = f"{driver.split('.')[0]}.example.com"
    if not any(
        o.get("kind") == "DeviceClass" and o["metadata"]["name"] == name for o in lists.objects
    ):
        lists.objects.append(
            {
                "apiVersion": RESOURCE_V1,
                "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]},
            }
        )
    return name


def _namespace(lists: _Lists) -> str:
    found = sorted(
        o["metadata"]["name"]
        for o in lists.objects
        if o.get("kind") == "Namespace" and not o["metadata"].get("labels")
    )
    if found:
        return lists.rng.choice(found)
    lists.objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-l"}})
    return "team-l"


def _claim(lists: _Lists, base: str, requests: list[Obj], constraints: list[Obj]) -> Obj:
    name, n = base, 1
    while name in lists.names:
        n += 1
        name = f"{base}-{n}"
    lists.names.add(name)
    devices: Obj = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {
        "apiVersion": RESOURCE_V1,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": _namespace(lists), "uid": new_uid(lists.rng)},
        "spec": {"devices": devices},
    }


def _request(lists: _Lists, name: str, driver: str, count: int, **extra: Any) -> Obj:
    body: Obj = {"deviceClassName": _class(lists, driver), "allocationMode": "ExactCount"}
    return {"name": name, "exactly": {**body, "count": count, **extra}}


def _entries(lists: _Lists) -> list[tuple[str, Entry]]:
    return [(d, e) for d, entries in sorted(lists.published.items()) for e in entries]


def _literal(kind: str, lists: _Lists, name: str) -> str:
    """A CEL value of the attribute's element kind that some device may hold."""
    if name == NUMA:
        return str(lists.rng.randrange(4))
    pool = next(v for n, k, v in _OWN.values() if f"/{n}" in name)
    value = lists.rng.choice(pool)
    if kind == "versions":
        return f"semver('{value}')"
    return f"'{value}'" if isinstance(value, str) else str(value)


def _driver(lists: _Lists) -> str:
    return lists.rng.choice(sorted({o["spec"]["driver"] for o in _slices(lists)}))


# --- list attributes ---------------------------------------------------------------------


def _list_cel(lists: _Lists) -> Obj | None:
    found = _entries(lists)
    if not found:
        return None
    driver, (name, domain, ident, kind, only) = lists.rng.choice(found)
    attr = f"device.attributes['{domain}'].{ident}"
    lit = _literal(kind, lists, name)
    forms = [f"{lit} in {attr}", f"{attr}.includes({lit})", f"size({attr}) >= 2"]
    if only:  # a comprehension over a single value is an error in cel-go, not in Python
        forms.append(f"{attr}.exists(x, x == {lit})")
    test = lists.rng.choice(forms)
    if lists._chance(0.65):
        test = f"has({attr}) && {test}"  # else a runtime error on devices without it
    selectors = [{"cel": {"expression": test}}]
    count = lists.rng.choice((1, 1, 2))
    lists.features.add("pending-list-cel")
    return _claim(
        lists, "listsel", [_request(lists, "req", driver, count, selectors=selectors)], []
    )


def _list_match(lists: _Lists) -> Obj | None:
    """Devices that share a value: the same NUMA node across two drivers, or one
    driver's list attribute within a request."""
    numa = sorted(d for d, entries in lists.published.items() if any(e[0] == NUMA for e in entries))
    if len(numa) >= 2 and lists._chance(0.6):
        a, b = lists.rng.sample(numa, 2)
        requests = [
            _request(lists, "first", a, 1),
            _request(lists, "second", b, lists.rng.choice((1, 2))),
        ]
        constraint: Obj = {"requests": ["first", "second"], "matchAttribute": NUMA}
    else:
        found = _entries(lists)
        if not found:
            return None
        driver, entry = lists.rng.choice(found)
        requests = [_request(lists, "req", driver, lists.rng.choice((2, 3)))]
        constraint = {"matchAttribute": entry[0]}
    lists.features.add("pending-list-match")
    return _claim(lists, "samenuma", requests, [constraint])


def _list_distinct(lists: _Lists) -> Obj | None:
    found = _entries(lists)
    if not found:
        return None
    driver, entry = lists.rng.choice(found)
    if lists._chance(0.5):
        requests = [_request(lists, "req", driver, lists.rng.choice((2, 3)))]
        constraint: Obj = {"distinctAttribute": entry[0]}
    else:
        requests = [_request(lists, "a", driver, 1), _request(lists, "b", driver, 2)]
        constraint = {"requests": ["a", "b"], "distinctAttribute": entry[0]}
    lists.features.add("pending-list-distinct")
    return _claim(lists, "spread", requests, [constraint])


def _distinct_many(lists: _Lists) -> Obj | None:
    """Three devices with different values of a plain attribute, preferably one with two
    values only: 1.37 compares each device with every device taken, 1.36 with the last of
    each request, so A, B, A passes there."""
    driver = _driver(lists)
    values: dict[str, set[Any]] = {}
    for slc in _slices(lists):
        if slc["spec"]["driver"] != driver:
            continue
        for dev in slc["spec"].get("devices") or ():
            for n, v in dev.get("attributes", {}).items():
                ((kind, value),) = v.items()
                if kind in _SCALAR:
                    values.setdefault(n, set()).add(value)
    if not values:
        return None
    pairs = sorted(n for n, vs in values.items() if len(vs) == 2)
    attr = lists.rng.choice(pairs or sorted(values))
    qualified = attr if "/" in attr else f"{driver}/{attr}"
    if lists._chance(0.6):
        requests = [_request(lists, "req", driver, 3)]
    else:
        requests = [_request(lists, "a", driver, 2), _request(lists, "b", driver, 1)]
    lists.features.add("pending-distinct-many")
    return _claim(lists, "distinct", requests, [{"distinctAttribute": qualified}])


_SCALAR = ("string", "int", "bool", "version")


# --- derived attributes ------------------------------------------------------------------

T = f"device.attributes['{TOPOLOGY}']"


def _derived(name: str, expression: str) -> list[Obj]:
    return [{"name": name, "expression": expression}]


def _numa_expression(lists: _Lists, list_only: bool) -> str:
    if list_only and lists._chance(0.4):
        lists.features.add("pending-derived-list")
        return f"has({T}.numaNodes) ? {T}.numaNodes.filter(x, x < 2) : []"
    fallback = lists.rng.choice(("[7]", "7"))
    return f"'numaNodes' in {T} ? {T}.numaNodes : {fallback}"


def _derived_numa(lists: _Lists) -> Obj | None:
    """A GPU and a NIC on one NUMA node, whatever each driver calls it."""
    drivers = sorted({o["spec"]["driver"] for o in _slices(lists)})
    a, b = lists.rng.sample(drivers, 2) if len(drivers) >= 2 else drivers * 2
    only = all(
        e[4] for e in lists.published.get(a, []) + lists.published.get(b, []) if e[0] == NUMA
    )
    name = "derived.example.com/numa"
    first = _request(
        lists, "first", a, 1, derivedAttributes=_derived(name, _numa_expression(lists, only))
    )
    extra: Obj = {}
    if lists._chance(0.8):  # else the second request reads a device attribute of that name
        extra["derivedAttributes"] = _derived(name, _numa_expression(lists, only))
    second = _request(lists, "second", b, lists.rng.choice((1, 2)), **extra)
    kind = "matchAttribute" if lists._chance(0.75) else "distinctAttribute"
    lists.features.add("pending-derived")
    return _claim(
        lists, "numapair", [first, second], [{"requests": ["first", "second"], kind: name}]
    )


def _derived_parity(lists: _Lists) -> Obj | None:
    driver = _driver(lists)
    g = f"device.attributes['{driver}']"
    expression = f"'index' in {g} ? {g}.index % 2 : 5"
    name = "derived.example.com/parity"
    kind = "matchAttribute" if lists._chance(0.5) else "distinctAttribute"
    request = _request(
        lists, "req", driver, lists.rng.choice((2, 3)), derivedAttributes=_derived(name, expression)
    )
    lists.features.add("pending-derived")
    return _claim(lists, "parity", [request], [{kind: name}])


def _derived_shadow(lists: _Lists) -> Obj | None:
    """A derived attribute named like a published one takes its place."""
    driver = _driver(lists)
    g = f"device.attributes['{driver}']"
    name, expression = lists.rng.choice(
        (
            (f"{driver}/model", f"'model' in {g} ? {g}.model.lowerAscii() : 'none'"),
            (f"{driver}/model", "'same'"),
            (NUMA, f"'numaNodes' in {T} ? size({T}.numaNodes) : 0"),
        )
    )
    request = _request(lists, "req", driver, 2, derivedAttributes=_derived(name, expression))
    lists.features.add("pending-derived-shadow")
    return _claim(lists, "shadow", [request], [{"matchAttribute": name}])


def _derived_error(lists: _Lists) -> Obj | None:
    """An expression that fails on devices without the attribute it reads: the scheduler
    gives up as soon as its search evaluates it on one."""
    driver = _driver(lists)
    name = "derived.example.com/root"
    expression = lists.rng.choice(
        (
            "device.attributes['resource.kubernetes.io'].pcieRoot",
            f"{T}.numaNodes",
            f"device.attributes['{driver}'].index + 0",
        )
    )
    request = _request(
        lists, "req", driver, lists.rng.choice((1, 2)), derivedAttributes=_derived(name, expression)
    )
    kind = "matchAttribute" if lists._chance(0.6) else "distinctAttribute"
    lists.features.add("pending-derived-error")
    return _claim(lists, "rooted", [request], [{kind: name}])


def _derived_subrequests(lists: _Lists) -> Obj | None:
    driver = _driver(lists)
    name = "derived.example.com/numa"
    subs = []
    for i in range(2):
        sub = _request(lists, f"opt-{i}", driver, 2 - i)
        body = {"name": sub["name"], **sub["exactly"]}
        if i == 0 or lists._chance(0.5):
            body["derivedAttributes"] = _derived(name, _numa_expression(lists, False))
        subs.append(body)
    target = lists.rng.choice((["acc"], ["acc/opt-0"], []))
    constraint: Obj = {"matchAttribute": name}
    if target:
        constraint["requests"] = target
    if target == ["acc/opt-0"]:
        subs[1].pop("derivedAttributes", None)  # the API wants a constraint on each one
    lists.features.add("pending-derived-subrequest")
    return _claim(lists, "flexnuma", [{"name": "acc", "firstAvailable": subs}], [constraint])
