"""Generated worlds as each profile's API server holds them.

worldgen.py writes what a v1.37 API server with every DRA gate on accepts. A cluster of
another release, or with gates off, holds less (read in k8s.io/kubernetes v1.36.3 and
v1.37.2, pkg/registry/resource and pkg/apis/resource/validation):

- list-typed attributes (DRAListTypeAttributes, 1.36+): without the gate the strategy
  empties them (dropDisableDRAListTypeAttributesFields) and validation then refuses the
  slice ("exactly one value must be specified"); 1.34 and 1.35 have no such fields, with
  the same result. A driver publishes its devices without them there, so they are left
  out and every other attribute stays.
- selectors (and derived expressions) are compiled as new expressions on create, in an
  environment that declares includes() and lets comprehensions (exists, all, map,
  filter) range over attribute values only with the gate: a claim that uses them is
  refused, so it is not there.
- derivedAttributes (DRADerivedAttributes, 1.37): without the gate the strategy drops
  them (pkg/api/resourceclaimspec dropDisabledDRADerivedAttributesFields); releases
  before 1.37 do not know the field. The claim stays, without them.
- distinctAttribute and capacity requests (DRAConsumableCapacity): without the gate the
  same strategy drops them (dropDisabledDRAResourceClaimConsumableCapacityFields), which
  leaves an empty constraint.
- 1.34 keeps counter sets beside the devices that consume them (worlds134.py).

The first three were also seen on a local v1.37.2 API server with its default gates: a
slice with `{ints: [0, 1]}` refused, selectors with includes() and exists() over an
attribute refused, `1 in ...` accepted, derivedAttributes dropped from an accepted claim.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from draview.engine.profile import Profile

from .worlds134 import as_134

Obj = dict[str, Any]
_LIST_KINDS = frozenset({"strings", "ints", "bools", "versions"})
# What the new-expressions environment compiles only with DRAListTypeAttributes: a
# comprehension over an attribute value, or includes() (both verified against the v1.37.2
# CEL library: "cannot be range of a comprehension", "undeclared reference").
_NEEDS_LISTS = re.compile(r"\.\s*(exists|all|exists_one|map|filter|includes)\s*\(")


def lists_on(profile: Profile) -> bool:
    return profile.release in ("1.36", "1.37") and profile.gate("DRAListTypeAttributes")


def derived_on(profile: Profile) -> bool:
    return profile.release == "1.37" and profile.gate("DRADerivedAttributes")


def held(objects: list[Obj], pending: list[Obj], profile: Profile) -> tuple[list[Obj], list[Obj]]:
    """(objects, pending claims) as the profile's API server would hold them."""
    if not lists_on(profile):
        objects = [_without_lists(o) for o in objects]
    claims = []
    for claim in pending:
        if not derived_on(profile):
            claim = _without_derived(claim)
        if not profile.gate("DRAConsumableCapacity"):
            claim = without_consumable_capacity(claim)
        if lists_on(profile) or not any(_NEEDS_LISTS.search(e) for e in _expressions(claim)):
            claims.append(claim)
    if profile.release == "1.34":
        objects = as_134(objects)
    return objects, claims


def _without_lists(obj: Obj) -> Obj:
    if obj.get("kind") != "ResourceSlice":
        return obj
    devices = obj["spec"].get("devices") or ()
    if not any(_list_names(d) for d in devices):
        return obj
    out = copy.deepcopy(obj)
    for dev in out["spec"]["devices"]:
        for name in _list_names(dev):
            del dev["attributes"][name]
    return out


def _list_names(dev: Obj) -> list[str]:
    attrs = dev.get("attributes") or {}
    return [n for n, v in attrs.items() if isinstance(v, dict) and v.keys() & _LIST_KINDS]


def _bodies(claim: Obj) -> list[Obj]:
    out = []
    for request in claim["spec"]["devices"]["requests"]:
        out.extend([request["exactly"]] if "exactly" in request else request["firstAvailable"])
    return out


def _expressions(claim: Obj) -> list[str]:
    out = []
    for body in _bodies(claim):
        out.extend(s["cel"]["expression"] for s in body.get("selectors") or ())
        out.extend(d["expression"] for d in body.get("derivedAttributes") or ())
    return out


def _without_derived(claim: Obj) -> Obj:
    if not any("derivedAttributes" in b for b in _bodies(claim)):
        return claim
    out = copy.deepcopy(claim)
    for body in _bodies(out):
        body.pop("derivedAttributes", None)
    return out


def without_consumable_capacity(claim: Obj) -> Obj:
    """The claim without distinctAttribute and capacity requests."""
    constraints = claim["spec"]["devices"].get("constraints") or ()
    dropped = any("distinctAttribute" in c for c in constraints)
    if not dropped and not any("capacity" in b for b in _bodies(claim)):
        return claim
    out = copy.deepcopy(claim)
    for c in out["spec"]["devices"].get("constraints") or ():
        c.pop("distinctAttribute", None)
    for body in _bodies(out):
        body.pop("capacity", None)
    return out
