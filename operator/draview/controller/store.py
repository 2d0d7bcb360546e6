"""In-memory store of what the operator watches, indexed by pool.

Every update is O(size of the object) and returns the pools it made dirty: for a slice
its old and new pool, for a claim the pools of its old and new allocation.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace

from draview.api.claims import ResourceClaim
from draview.api.slices import ResourceSlice
from draview.api.taints import DeviceClass, DeviceTaintRule
from draview.api.world import ObjectProblem
from draview.engine.allocations import claim_allocations
from draview.engine.model import AllocRef, PoolKey

# A claim's entry in a pool: its one ref, or a tuple of them (a tuple costs 56 bytes, and
# 650,000 claims mostly hold one device each).
Refs = AllocRef | tuple[AllocRef, ...]
# The pools a claim's allocation names: one key, or a tuple of keys. A PoolKey is itself a
# tuple (of two strings), told apart by its first item.
Pools = PoolKey | tuple[PoolKey, ...]


def _pools(entry: Pools) -> tuple[PoolKey, ...]:
    return (entry,) if type(entry[0]) is str else entry  # type: ignore[return-value]


class ClaimRecords:
    """Claims by uid, and the allocations each pool holds.

    Sized for 650,000 claims: a claim's allocations are kept once (in its pools'
    entries), the claim itself only by the pools it names, single refs and single pools
    without a tuple around them, and the strings every claim repeats (namespace, request,
    device names, pool keys) are shared. Only a pending claim keeps its model
    (explanations read it)."""

    def __init__(self) -> None:
        self.pending: dict[str, ResourceClaim] = {}
        self.claim_pools: dict[str, Pools] = {}
        # Claims known with neither an allocation that names a pool nor a pending model
        # (allocated with no result): still claims, for counts and re-list pruning.
        self.bare: set[str] = set()
        self.pool_allocs: dict[PoolKey, dict[str, Refs]] = {}
        # Claims that could not be read, by uid: one problem per pool their allocation names.
        self.claim_problems: dict[str, list[ObjectProblem]] = {}
        self._keys: dict[PoolKey, PoolKey] = {}  # one tuple per pool key, however many claims
        # Changes to what explanations read besides judged pools (claims, classes, rules).
        self.changes = 0

    def put_claim(
        self, uid: str, claim: ResourceClaim, problems: list[ObjectProblem] | None = None
    ) -> set[PoolKey]:
        dirty = self.put_allocations(
            uid, claim_allocations(claim), None if claim.allocated else claim
        )
        if problems:
            self.claim_problems[uid] = problems
            dirty.update(p.pool for p in problems if p.pool is not None)
        return dirty

    def put_allocations(
        self, uid: str, pools: dict[PoolKey, list[AllocRef]], pending: ResourceClaim | None = None
    ) -> set[PoolKey]:
        """A claim by its allocations (and its model while it is pending)."""
        dirty = self.delete_claim(uid)
        self.changes += 1
        if pending is not None:
            self.pending[uid] = pending
        keys = []
        for key, refs in pools.items():
            key = self._keys.setdefault(key, key)
            shared = [_shared(r) for r in refs]
            entry: Refs = shared[0] if len(shared) == 1 else tuple(shared)
            self.pool_allocs.setdefault(key, {})[uid] = entry
            keys.append(key)
            dirty.add(key)
        if keys:
            self.claim_pools[uid] = keys[0] if len(keys) == 1 else tuple(keys)
        elif pending is None:
            self.bare.add(uid)
        return dirty

    def delete_claim(self, uid: str) -> set[PoolKey]:
        self.changes += 1
        self.pending.pop(uid, None)
        self.bare.discard(uid)
        self.claim_problems.pop(uid, None)  # its pools are those of its allocations
        entry = self.claim_pools.pop(uid, None)
        pools = _pools(entry) if entry is not None else ()
        for key in pools:
            allocs = self.pool_allocs.get(key)
            if allocs is not None:
                allocs.pop(uid, None)
                if not allocs:
                    del self.pool_allocs[key]
        return set(pools)

    def allocations_of(self, key: PoolKey) -> list[AllocRef]:
        out: list[AllocRef] = []
        for entry in self.pool_allocs.get(key, {}).values():
            if type(entry) is AllocRef:
                out.append(entry)
            else:
                out.extend(entry)  # type: ignore[arg-type]  # a tuple of refs
        return out

    def pending_claims(self) -> list[ResourceClaim]:
        return list(self.pending.values())

    def claim_uids(self) -> list[str]:
        """Every claim known: allocated (by the pools it names), pending, or bare."""
        return [
            *self.claim_pools,
            *(u for u in self.pending if u not in self.claim_pools),
            *self.bare,
        ]


def _shared(ref: AllocRef) -> AllocRef:
    """The ref with the strings thousands of claims repeat shared (sys.intern)."""
    return replace(
        ref,
        device=sys.intern(ref.device),
        claim_namespace=sys.intern(ref.claim_namespace),
        request=sys.intern(ref.request),
    )


class Store(ClaimRecords):
    """Slices by uid and by pool, taint rules, and (ClaimRecords) claims."""

    def __init__(self) -> None:
        super().__init__()
        self.slices: dict[str, ResourceSlice] = {}
        self.pool_slices: dict[PoolKey, dict[str, ResourceSlice]] = defaultdict(dict)
        self.taint_rules: dict[str, DeviceTaintRule] = {}
        # DeviceClasses only feed explanations of pending claims; they dirty no pool.
        self.classes: dict[str, DeviceClass] = {}
        # Slices that could not be read, by uid, with the pool they name (if readable).
        self.problems: dict[str, ObjectProblem] = {}

    # -- slices ---------------------------------------------------------------------
    def put_slice(
        self, uid: str, s: ResourceSlice | None, problem: ObjectProblem | None = None
    ) -> set[PoolKey]:
        dirty = self.delete_slice(uid)
        if s is not None:
            self.slices[uid] = s
            self.pool_slices[s.pool_key][uid] = s
            dirty.add(s.pool_key)
        if problem is not None:
            self.problems[uid] = problem
            if problem.pool is not None:
                dirty.add(problem.pool)
        return dirty

    def delete_slice(self, uid: str) -> set[PoolKey]:
        dirty: set[PoolKey] = set()
        old = self.slices.pop(uid, None)
        if old is not None:
            members = self.pool_slices.get(old.pool_key)
            if members is not None:
                members.pop(uid, None)
                if not members:
                    del self.pool_slices[old.pool_key]
            dirty.add(old.pool_key)
        problem = self.problems.pop(uid, None)
        if problem is not None and problem.pool is not None:
            dirty.add(problem.pool)
        return dirty

    # -- taint rules ----------------------------------------------------------------
    def put_taint_rule(self, name: str, rule: DeviceTaintRule) -> set[PoolKey]:
        dirty = self.delete_taint_rule(name)
        self.changes += 1
        self.taint_rules[name] = rule
        return dirty | {k for k in self.pool_slices if rule.matches(*k)}

    def delete_taint_rule(self, name: str) -> set[PoolKey]:
        self.changes += 1
        old = self.taint_rules.pop(name, None)
        return {k for k in self.pool_slices if old.matches(*k)} if old is not None else set()

    # -- reads for the engine -------------------------------------------------------
    def pools(self) -> set[PoolKey]:
        # A pool whose slices are all unreadable is still a pool: shown invalid, not gone.
        return set(self.pool_slices) | {p.pool for p in self.problems.values() if p.pool}

    def has_unreadable_slice(self, key: PoolKey) -> bool:
        return any(p.pool == key for p in self.problems.values())

    def slices_of(self, key: PoolKey) -> list[ResourceSlice]:
        return list(self.pool_slices.get(key, {}).values())

    def problems_of(self, key: PoolKey) -> list[str]:
        found = [p for p in self.problems.values() if p.pool == key]
        found.extend(p for ps in self.claim_problems.values() for p in ps if p.pool == key)
        return sorted(str(p) for p in found)

    def rules(self) -> list[DeviceTaintRule]:
        return [self.taint_rules[k] for k in sorted(self.taint_rules)]

    def uids(self, kind: str) -> Iterable[str]:
        return list(self.slices) + list(self.problems) if kind == "slice" else self.claim_uids()
