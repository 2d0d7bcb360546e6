"""Index claims' allocation results by the pool they name."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from draview.api.claims import ResourceClaim
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
