"""The world generator: deterministic, broad, and within what the API server validates.

Pure and fast; tests/integration/test_worldgen_valid.py submits worlds to a real API server.
The checks here restate the rules of pkg/apis/resource/validation (Kubernetes v1.36.3) that
the generator must keep, so that a violation shows up without a cluster.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from draview.engine.profile import all_gates_on, make_profile

from .apiserver import held
from .worldgen import (
    _SIZES,
    ADMIN_LABEL,
    FEATURES,
    MAX_ATTRS_AND_CAPS,
    RACK_LABEL,
    World,
    _Builder,
    generate,
    parse_quantity,
    term_matches,
)

Obj = dict[str, Any]
SEEDS = range(300)
MIN_WORLDS_PER_FEATURE = 10

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$"
)
_PLACEMENTS = ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
_SCALAR_KINDS = {"bool", "int", "string", "version"}
_LIST_KINDS = {"bools": "bool", "ints": "int", "strings": "string", "versions": "version"}
_TYPES = {"bool": bool, "int": int, "string": str, "version": str}


@pytest.fixture(scope="module")
def worlds() -> list[World]:
    return [generate(seed) for seed in SEEDS]


def is_label(name: str) -> bool:
    return len(name) <= 63 and bool(_LABEL.match(name))


def is_subdomain(name: str) -> bool:
    return len(name) <= 253 and all(is_label(part) for part in name.split("."))


def is_qualified(name: str) -> bool:
    """An attribute or capacity name: C identifier, optionally behind a domain."""
    domain, _, ident = name.rpartition("/")
    ok = len(ident) <= 32 and bool(_C_IDENTIFIER.match(ident))
    return ok and (not domain or (len(domain) <= 63 and is_subdomain(domain)))


def of_kind(world: World, kind: str) -> list[Obj]:
    return [o for o in world.objects if o["kind"] == kind]


def devices(world: World) -> Iterator[tuple[Obj, Obj]]:
    for slc in of_kind(world, "ResourceSlice"):
        for dev in slc["spec"].get("devices", []):
            yield slc, dev


def claims(world: World) -> list[Obj]:
    return of_kind(world, "ResourceClaim") + world.pending


# --- determinism and breadth ---------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 17, 123, 499])
def test_same_seed_same_world(seed: int) -> None:
    a, b = generate(seed), generate(seed)
    assert json.dumps(a.objects) == json.dumps(b.objects)
    assert json.dumps(a.pending) == json.dumps(b.pending)
    assert (a.features, a.partition_attributes) == (b.features, b.partition_attributes)


def test_different_seeds_differ(worlds: list[World]) -> None:
    distinct = {json.dumps(w.objects) for w in worlds}
    assert len(distinct) == len(worlds)


def test_every_feature_occurs_in_many_worlds(worlds: list[World]) -> None:
    counts = Counter(f for w in worlds for f in w.features)
    assert set(counts) <= set(FEATURES), set(counts) - set(FEATURES)
    rare = {f: counts[f] for f in FEATURES if counts[f] < MIN_WORLDS_PER_FEATURE}
    assert not rare, f"features in fewer than {MIN_WORLDS_PER_FEATURE} of 300 worlds: {rare}"


def test_small_worlds_are_small(worlds: list[World]) -> None:
    for w in worlds:
        slices = of_kind(w, "ResourceSlice")
        drivers = {s["spec"]["driver"] for s in slices}
        pools = {(s["spec"]["driver"], s["spec"]["pool"]["name"]) for s in slices}
        assert 1 <= len(drivers) <= 4, w.seed
        assert 1 <= len(pools) <= 6, w.seed
        assert len(list(devices(w))) <= 60, w.seed
        assert len(of_kind(w, "Node")) <= 4, w.seed
        assert len(claims(w)) <= 30, w.seed


def test_unknown_size_is_refused() -> None:
    with pytest.raises(ValueError):
        generate(0, "huge")


def test_medium_worlds_keep_the_invariants() -> None:
    for seed in range(5):
        world = generate(seed, "medium")
        check_slices(world)
        check_nodes(world)
        check_claims(world)


# --- the API server's rules ----------------------------------------------------------------


def test_names_are_valid(worlds: list[World]) -> None:
    for w in worlds:
        for obj in w.objects + w.pending:
            name = obj["metadata"]["name"]
            if obj["kind"] == "Namespace":
                assert is_label(name), name
            else:
                assert is_subdomain(name), (obj["kind"], name)
        for slc in of_kind(w, "ResourceSlice"):
            assert is_subdomain(slc["spec"]["driver"]), slc["spec"]["driver"]
            assert all(is_subdomain(p) for p in slc["spec"]["pool"]["name"].split("/"))
        for _, dev in devices(w):
            assert is_label(dev["name"]), dev["name"]


def test_slices_follow_the_api_rules(worlds: list[World]) -> None:
    for w in worlds:
        check_slices(w)


def check_slices(w: World) -> None:
    names = [s["metadata"]["name"] for s in of_kind(w, "ResourceSlice")]
    assert len(names) == len(set(names)), w.seed
    for slc in of_kind(w, "ResourceSlice"):
        spec = slc["spec"]
        where = (w.seed, slc["metadata"]["name"])
        # Since 1.35 a slice holds devices or counter sets, never both.
        assert not ("devices" in spec and "sharedCounters" in spec), where
        assert sum(k in spec for k in _PLACEMENTS) == 1, where
        assert spec["pool"]["resourceSliceCount"] > 0, where
        assert spec["pool"].get("generation", 0) >= 0, where
        check_counter_sets(spec.get("sharedCounters", []), where)
        devs = spec.get("devices", [])
        assert len({d["name"] for d in devs}) == len(devs), where
        assert len(devs) <= 64, where
        for dev in devs:
            check_device(dev, bool(spec.get("perDeviceNodeSelection")), where)


def check_counter_sets(sets: list[Obj], where: Any) -> None:
    assert len(sets) <= 8, where
    assert len({s["name"] for s in sets}) == len(sets), where
    for counter_set in sets:
        assert is_label(counter_set["name"]), where
        assert 0 < len(counter_set["counters"]) <= 32, where
        assert all(is_label(c) for c in counter_set["counters"]), where
        for counter in counter_set["counters"].values():
            parse_quantity(counter["value"])


def check_device(dev: Obj, per_device: bool, where: Any) -> None:
    where = (*where, dev["name"])
    attrs, caps = dev.get("attributes", {}), dev.get("capacity", {})
    # The harness adds two attributes to every device; the API allows 32 in all.
    assert len(attrs) + len(caps) <= MAX_ATTRS_AND_CAPS, where
    values = 2  # the harness adds two single-valued attributes
    for name, value in attrs.items():
        assert is_qualified(name), (where, name)
        assert len(value) == 1, where
        ((kind, v),) = value.items()
        items = v if kind in _LIST_KINDS else [v]
        # A list attribute (DRAListTypeAttributes) is a non-empty list of one type.
        assert kind in _SCALAR_KINDS | _LIST_KINDS.keys() and isinstance(items, list) and items, (
            where
        )
        element = _LIST_KINDS.get(kind) or kind
        assert all(type(x) is _TYPES[element] for x in items), where
        values += len(items)
        if element in ("string", "version"):
            assert all(len(x) <= 64 for x in items), where
        if element == "version":
            assert all(_SEMVER.match(x) for x in items), where
    # ResourceSliceMaxAttributeValuesPerDevice, counting each value of a list.
    assert values <= 48, where
    shareable = bool(dev.get("allowMultipleAllocations"))
    for name, cap in caps.items():
        assert is_qualified(name), (where, name)
        if "requestPolicy" in cap:
            assert shareable, f"{where}: requestPolicy needs allowMultipleAllocations"
            check_policy(parse_quantity(cap["value"]), cap["requestPolicy"], where)
    consumes = dev.get("consumesCounters", [])
    assert len(consumes) <= 2, where
    assert len({c["counterSet"] for c in consumes}) == len(consumes), where
    for consumption in consumes:
        assert is_label(consumption["counterSet"]), where
        assert all(is_label(c) for c in consumption["counters"]), where
    placed = sum(k in dev for k in ("nodeName", "nodeSelector", "allNodes"))
    assert placed == (1 if per_device else 0), where
    for taint in dev.get("taints", []):
        assert taint["effect"] in {"NoSchedule", "NoExecute", "None"}, where


def check_policy(capacity: int, policy: Obj, where: Any) -> None:
    """validation.go validateRequestPolicy and friends."""
    q = parse_quantity
    assert not ("validValues" in policy and "validRange" in policy), where
    if "validValues" in policy:
        values = [q(v) for v in policy["validValues"]]
        assert values == sorted(set(values)) and len(values) <= 10, where
        assert max(values) <= capacity and q(policy["default"]) in values, where
    if "validRange" in policy:
        rng, default = policy["validRange"], q(policy["default"])
        lo = q(rng["min"])
        assert lo <= default and lo <= capacity, where
        if "max" in rng:
            assert lo <= q(rng["max"]) <= capacity and default <= q(rng["max"]), where
        if "step" in rng:
            step = q(rng["step"])
            assert lo + step <= capacity and (default - lo) % step == 0, where
            assert "max" not in rng or (q(rng["max"]) - lo) % step == 0, where


def test_every_node_named_or_selected_exists(worlds: list[World]) -> None:
    for w in worlds:
        check_nodes(w)


# The one term drawn on purpose to match no node ("selector-no-node").
DEAD_TERM = {"matchExpressions": [{"key": RACK_LABEL, "operator": "In", "values": ["rack-none"]}]}


def check_nodes(w: World) -> None:
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in of_kind(w, "Node")}
    for slc in of_kind(w, "ResourceSlice"):
        for holder in [slc["spec"], *slc["spec"].get("devices", [])]:
            if "nodeName" in holder:
                assert holder["nodeName"] in nodes, (w.seed, holder["nodeName"])
            for term in holder.get("nodeSelector", {}).get("nodeSelectorTerms", []):
                matched = any(term_matches(term, n, labels) for n, labels in nodes.items())
                assert matched or term == DEAD_TERM, term
        if "nodeSelector" in slc["spec"]:
            assert len(slc["spec"]["nodeSelector"]["nodeSelectorTerms"]) == 1, w.seed


def test_claims_follow_the_api_rules(worlds: list[World]) -> None:
    for w in worlds:
        check_claims(w)


def check_claims(w: World) -> None:
    namespaces = {
        n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in of_kind(w, "Namespace")
    }
    assert "default" not in namespaces  # every cluster has it: creating it would fail
    uids = [c["metadata"]["uid"] for c in claims(w)]
    assert len(uids) == len(set(uids)) and all(_UUID.match(u) for u in uids), w.seed
    assert all("status" not in c for c in w.pending), w.seed
    for claim in claims(w):
        check_claim(claim, namespaces, w.seed)


def check_claim(claim: Obj, namespaces: dict[str, dict[str, str]], seed: int) -> None:
    where = (seed, claim["metadata"]["name"])
    ns = claim["metadata"]["namespace"]
    assert ns in namespaces, where
    requests = claim["spec"]["devices"]["requests"]
    names: set[str] = set()
    admin = False
    for request in requests:
        assert is_label(request["name"]), where
        names.add(request["name"])
        bodies = [request["exactly"]] if "exactly" in request else request["firstAvailable"]
        assert ("exactly" in request) != ("firstAvailable" in request), where
        for body in bodies:
            check_allocation_mode(body, where)
        names |= {f"{request['name']}/{s['name']}" for s in request.get("firstAvailable", [])}
        admin |= bool(request.get("exactly", {}).get("adminAccess"))
    check_constraints(claim["spec"]["devices"], names, where)
    if admin:
        assert namespaces[ns].get(ADMIN_LABEL) == "true", where
    for result in (
        claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
    ):
        assert result["request"] in names, where
        assert is_label(result["device"]), where
        if "shareID" in result:
            assert _UUID.match(result["shareID"]), where
        if result.get("adminAccess"):
            assert admin and namespaces[ns].get(ADMIN_LABEL) == "true", where


def check_constraints(devices: Obj, names: set[str], where: Any) -> None:
    """validateDeviceConstraint and validateDeviceDerivedAttribute (v1.37.2): constraints
    name requests that exist, and every derived attribute is read by a constraint that
    targets its request (all requests, the request, or its parent)."""
    targets: list[tuple[set[str], str]] = []
    for c in devices.get("constraints", []):
        assert len(c.keys() & {"matchAttribute", "distinctAttribute"}) == 1, where
        attr = c.get("matchAttribute") or c["distinctAttribute"]
        assert "/" in attr and is_qualified(attr), where
        assert set(c.get("requests", [])) <= names, where
        targets.append((set(c.get("requests", [])), attr))
    for request in devices["requests"]:
        subs = request.get("firstAvailable") or [{**request.get("exactly", {}), "name": ""}]
        for sub in subs:
            label = f"{request['name']}/{sub['name']}" if sub["name"] else request["name"]
            derived = [d["name"] for d in sub.get("derivedAttributes", [])]
            assert len(derived) == len(set(derived)) <= 32, where
            for attr in derived:
                assert "/" in attr and is_qualified(attr), where
                used = any(
                    a == attr and (not reqs or label in reqs or request["name"] in reqs)
                    for reqs, a in targets
                )
                assert used, (where, attr)


def check_allocation_mode(body: Obj, where: Any) -> None:
    if body["allocationMode"] == "All":
        assert "count" not in body, where
    else:
        assert body["allocationMode"] == "ExactCount" and body["count"] > 0, where


def test_partition_attributes_name_attributes_devices_carry(worlds: list[World]) -> None:
    for w in worlds:
        for qualified in w.partition_attributes:
            driver, _, attr = qualified.rpartition("/")
            carried = [
                d
                for s, d in devices(w)
                if s["spec"]["driver"] == driver and attr in d.get("attributes", {})
            ]
            assert carried, (w.seed, qualified)
        if "partition-attribute" in w.features:
            assert w.partition_attributes, w.seed


def test_allocations_name_published_pools(worlds: list[World]) -> None:
    """Dangling allocations name a missing device of an existing pool, not a missing pool."""
    for w in worlds:
        pools = {
            (s["spec"]["driver"], s["spec"]["pool"]["name"]) for s in of_kind(w, "ResourceSlice")
        }
        for claim in of_kind(w, "ResourceClaim"):
            for result in claim["status"]["allocation"]["devices"]["results"]:
                assert (result["driver"], result["pool"]) in pools, (w.seed, result)


# --- list-typed and derived attributes (worldgen_lists.py) ---------------------------------

_ADDED = {"topology.example.com/numaNodes", "links", "vlans", "engines", "shells"}


def _without_added(objects: list[Obj]) -> list[Obj]:
    out = copy.deepcopy(objects)
    for obj in out:
        if obj["kind"] != "ResourceSlice":
            continue
        for dev in obj["spec"].get("devices", []):
            for name in _ADDED & set(dev.get("attributes", {})):
                del dev["attributes"][name]
    return out


@pytest.mark.parametrize("seed", [0, 1, 17, 123, 499])
def test_the_lists_leave_every_earlier_object_as_it_was(seed: int) -> None:
    """They come from a stream of their own, after the rest: a seed's world is the one it
    named before, plus attributes on devices, pending claims and what those need."""
    before = _Builder(seed, _SIZES["small"]).build()
    after = generate(seed)
    assert _without_added(after.objects)[: len(before.objects)] == before.objects
    extra = after.objects[len(before.objects) :]
    assert all(o["kind"] in ("DeviceClass", "Namespace") for o in extra), seed
    assert after.pending[: len(before.pending)] == before.pending
    assert before.features <= after.features


def test_list_and_derived_attributes_are_in_many_worlds(worlds: list[World]) -> None:
    """Not only present somewhere: in a good share of the worlds, and still there in the
    worlds of the profiles whose API server holds them."""
    share = Counter(f for w in worlds for f in w.features)
    assert share["list-attribute"] >= 0.6 * len(worlds)
    assert share["pending-derived"] >= 0.3 * len(worlds)
    assert share["pending-list-cel"] >= 0.3 * len(worlds)
    full = all_gates_on("1.37")
    kept = [held(w.objects, w.pending, full) for w in worlds]
    with_derived = sum(any("derivedAttributes" in json.dumps(c) for c in p) for _, p in kept)
    assert with_derived >= 0.4 * len(worlds)
    for profile in (make_profile("1.37"), make_profile("1.36"), all_gates_on("1.35")):
        for w in worlds[:60]:
            objs, pending = held(w.objects, w.pending, profile)
            text = json.dumps(objs) + json.dumps(pending)
            assert '"ints"' not in text and "derivedAttributes" not in text, w.seed
            assert ".includes(" not in text and ".exists(" not in text, w.seed
    lists_only = all_gates_on("1.36")
    both = [held(w.objects, w.pending, lists_only) for w in worlds[:60]]
    assert any('"ints"' in json.dumps(o) for o, _ in both)
    assert not any("derivedAttributes" in json.dumps(p) for _, p in both)
