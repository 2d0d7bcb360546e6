"""Index claims' allocation results by the pool they name."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from draview.api.claims import ResourceClaim
from draview.api.common import is_optional
from draview.engine.model import AllocRef, PoolKey


def claim_allocations(claim: ResourceClaim) -> dict[PoolKey, list[AllocRef]]:
    """A claim's results grouped by pool (its pools are what a claim change dirties)."""
    out: dict[PoolKey, list[AllocRef]] = defaultdict(list)
    for r in claim.results:
        out[(r.driver, r.pool)].append(
            AllocRef(
                device=r.device,
                claim_namespace=claim.namespace,
                claim_name=claim.name,
                claim_uid=claim.uid,
                request=r.request,
                admin_access=r.admin_access,
                share_id=r.share_id,
                consumed=tuple(sorted(r.consumed_capacity.items())),
            )
        )
    return dict(out)


def index_allocations(claims: Iterable[ResourceClaim]) -> dict[PoolKey, list[AllocRef]]:
    index: dict[PoolKey, list[AllocRef]] = defaultdict(list)
    for claim in claims:
        for key, refs in claim_allocations(claim).items():
            index[key].extend(refs)
    return dict(index)


# Keys an allocation result may carry; the binding conditions do not change what draview
# computes (the models ignore them as well).
_RESULT_KEYS = frozenset(
    {
        "request",
        "driver",
        "pool",
        "device",
        "adminAccess",
        "shareID",
        "consumedCapacity",
        "tolerations",
        "bindingConditions",
        "bindingFailureConditions",
    }
)


def allocations_from_object(obj: dict[str, Any]) -> dict[PoolKey, list[AllocRef]] | None:
    """The allocations of an allocated claim straight from its object, or None when the
    claim is not allocated or not in the plain shape (the caller reads it with the models).

    An allocated claim is all the operator keeps of it, and reading 50,000 of them
    through the models was a fifth of its start-up. Whenever the models can read the
    claim, this gives exactly what `claim_allocations(ResourceClaim.from_object(obj))`
    gives; a claim whose spec they reject still counts here, because its allocation
    holds the devices whatever draview thinks of the rest.
    """
    meta = obj.get("metadata")
    status = obj.get("status")
    if type(meta) is not dict or type(status) is not dict:
        return None
    allocation = status.get("allocation")
    devices = allocation.get("devices") if type(allocation) is dict else None
    results = devices.get("results") if type(devices) is dict else None
    if type(results) is not list or not results:
        return None
    namespace = meta.get("namespace") or ""
    name = meta.get("name") or ""
    uid = meta.get("uid") or ""
    if not (type(namespace) is str and type(name) is str and type(uid) is str):
        return None
    out: dict[PoolKey, list[AllocRef]] = defaultdict(list)
    for r in results:
        if type(r) is not dict or r.keys() - _RESULT_KEYS:
            return None
        driver, pool, device = r.get("driver"), r.get("pool"), r.get("device")
        request = r.get("request", "")
        admin = r.get("adminAccess")
        share = r.get("shareID")
        consumed = r.get("consumedCapacity") or {}
        if not (
            type(driver) is str
            and type(pool) is str
            and type(device) is str
            and type(request) is str
            and is_optional(admin, bool)
            and is_optional(share, str)
            and type(consumed) is dict
            and all(type(q) is str for q in consumed.values())
        ):
            return None
        out[(driver, pool)].append(
            AllocRef(
                device=device,
                claim_namespace=namespace,
                claim_name=name,
                claim_uid=uid,
                request=request,
                admin_access=bool(admin),
                share_id=share,
                consumed=tuple(sorted(consumed.items())),
            )
        )
    return dict(out)
