"""Reconcile: judge a pool with the engine and diff what it should show against what was
written (objects that are no longer the pool's are removed).

Pure but for the state it keeps between judgements: the latest result per pool (the
engine reuses its node views; explanations read it) and the objects each pool owns.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, cast

from draview.api.node_info import AssumedNodes, NodeInfo, assumed_nodes
from draview.api.slices import ResourceSlice
from draview.api.status import POOL_STATUS_PLURAL, Condition, PoolStatusBody
from draview.api.taints import DeviceClass, DeviceTaintRule
from draview.api.world import World
from draview.controller import metrics
from draview.controller.node_index import NodeIndex
from draview.controller.packing import Packer
from draview.controller.store import Store
from draview.controller.writequeue import ObjKey
from draview.controller.writer import Writer, obj_key
from draview.engine.aborts import InvalidPools
from draview.engine.budget import DEFAULT_MAX_OBJECT_BYTES
from draview.engine.model import EngineOptions, PoolKey
from draview.engine.objects import pool_object_name, result_objects
from draview.engine.pool import PoolResult, SliceResult, compute_pool
from draview.engine.rules import rules_for

log = logging.getLogger("draview.controller")

# Pools judged between two yields to the event loop (about 0.1 s of CPU at most).
COMPUTE_STEP = 50
# The pickled status bodies explanations read (_Packed): a dictionary of their own.
_BODIES = Packer()


@dataclass(frozen=True)
class Settings:
    batch_interval: float = 0.25
    engine: EngineOptions = field(default_factory=EngineOptions)
    # Events on claims that stay unallocated longer than pending_threshold seconds.
    claim_events: bool = True
    pending_threshold: float = 60.0
    explain_interval: float = 10.0
    # Capacity probes (controller/capacity.py): definitions read again this often.
    capacity_probes: bool = True
    capacity_reload: float = 10.0
    # The explain API (explain_api.py) answers `kubectl dra why` from the judged pools.
    explain_api: bool = False
    # No status object may serialize to more than this (engine/budget.py); the writer
    # enforces it (operator_main hands it over).
    max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


Judged = tuple[list[dict[str, Any]], list[ObjKey]]  # objects to write, objects to remove


@dataclass(frozen=True, slots=True)
class Judgement:
    """What every pool of one batch is judged with."""

    nodes: Sequence[NodeInfo]
    rules: list[DeviceTaintRule]
    now: str  # condition transition times


@dataclass(frozen=True, slots=True)
class _Packed:
    """A judged pool's status bodies, pickled and compressed: as dicts they would be
    most of what the operator keeps per pool (tens of KB for a MIG pool). Only
    explanations of pending claims read them again."""

    slices: tuple[ResourceSlice, ...]
    blob: bytes

    @classmethod
    def of(cls, result: PoolResult) -> _Packed:
        bodies = (result.status, [sr.status for sr in result.slices])
        data = pickle.dumps(bodies, protocol=pickle.HIGHEST_PROTOCOL)
        return cls(tuple(sr.slice for sr in result.slices), _BODIES.pack(data))

    def unpack(self, lean: PoolResult) -> PoolResult:
        status, statuses = pickle.loads(_BODIES.unpack(self.blob))
        slices = [SliceResult(s, st) for s, st in zip(self.slices, statuses, strict=True)]
        return replace(lean, status=status, slices=slices)


class _Conditions:
    """Equal condition lists shared between pools: most pools of a large cluster show the
    same few (Complete, Valid, ...) with the same transition time, 1 KB each when kept
    apart. Cleared when it grows past `most`, which only loses sharing."""

    def __init__(self, most: int = 10_000) -> None:
        self.most = most
        self.lists: dict[tuple[tuple[tuple[str, Any], ...], ...], list[Condition]] = {}

    def share(self, conditions: list[Condition]) -> list[Condition]:
        try:
            key = tuple(tuple(c.items()) for c in conditions)
            found = self.lists.get(key)
        except TypeError:  # an unhashable value: kept as it is
            return conditions
        if found is None:
            if len(self.lists) >= self.most:
                self.lists.clear()
            # A copy: the written objects may share the judged lists.
            found = self.lists[key] = [cast(Condition, dict(c)) for c in conditions]
        return found


_CONDITIONS = _Conditions()


def _lean(result: PoolResult) -> PoolResult:
    """What is kept of a judged pool outside _Packed: the prepared slices and views (the
    next judgement reuses them), the allocations, errors and conditions; not what the
    judgement left of the counters (PoolResult.lefts: a search of the whole result
    reads it)."""
    conditions = _CONDITIONS.share(result.status.get("conditions", []))
    status = cast(PoolStatusBody, {"conditions": conditions})
    # Built directly: dataclasses.replace walks the fields each time, and this runs for
    # every pool judged.
    return PoolResult(
        key=result.key,
        pool=result.pool,
        status=status,
        slices=[],
        node_name=result.node_name,
        errors=result.errors,
        states=result.states,
        prepared=result.prepared,
        allocated=result.allocated,
    )


class Reconciler:
    def __init__(self, store: Store, nodes: NodeIndex, writer: Writer, settings: Settings) -> None:
        self.store = store
        self.nodes = nodes
        self.writer = writer
        self.settings = settings
        # While Nodes cannot be watched (RBAC), pools are judged as offline without Node
        # objects: from assumed nodes.
        self.nodes_watched = True
        self._assumed = AssumedNodes()
        # The latest judgement of each pool, lean (_lean); its status bodies in _packed,
        # kept only when claim events are on: explanations are their only reader, and
        # packing them costs CPU on every judgement and memory for every pool.
        self.results: dict[PoolKey, PoolResult] = {}
        self._packed: dict[PoolKey, _Packed] = {}
        # Explanations of pending claims read the bodies: Events, and the explain API.
        self._keep_bodies = settings.claim_events or settings.explain_api
        self.pool_objects: dict[PoolKey, set[ObjKey]] = {}
        # Pools whose last judgement raised: their objects are kept, never pruned.
        self.broken: set[PoolKey] = set()
        self.pool_errors: dict[PoolKey, set[str]] = {}
        # Judgements made (and pools forgotten) so far: explanations of pending claims
        # read the results, and need not be made again while this stays the same.
        self.judged = 0
        # Per pool, the count above when it was last judged: what explanations unpack
        # and index again (explanations.CatalogSync) is the pools whose stamp moved.
        self.stamps: dict[PoolKey, int] = {}
        # Pools judged or forgotten since capacity probes last asked (take_touched): a
        # probe is asked again only when one it depends on is among them.
        self.touched: set[PoolKey] = set()
        # While capacity probes ask (keep_fresh), the judgements made since they last
        # took them, whole, with the lean result each was kept as: a probe counts on the
        # status bodies, and taking the batch's own judgement spares unpacking it (or,
        # with claim events off, judging the pool a second time).
        self.keep_fresh = False
        self._fresh: dict[PoolKey, tuple[PoolResult, PoolResult]] = {}
        # 1.34: the invalid pools nodes gather refuse devices of every pool; when they
        # change, every pool is judged again (take_rejudge_all).
        self.invalid = InvalidPools()
        self._rejudge_all = False
        self._node_local = rules_for(settings.engine.profile).invalid_pool_is_node_local

    def compute(self, keys: Iterable[PoolKey]) -> Judged:
        desired: list[dict[str, Any]] = []
        removed: list[ObjKey] = []
        now, rules = _now(), self.store.rules()
        assumed = None if self.nodes_watched else self._assumed_nodes()
        for key in sorted(keys):
            slices = self.store.slices_of(key)
            # Which label keys the pool's selectors read: known before its next node event.
            self.nodes.pool_changed(key, slices)
            if not slices and not self.store.has_unreadable_slice(key):
                removed.extend(self._forget(key))
                continue
            nodes = self.nodes.nodes_for(key) if assumed is None else assumed
            objs = self._judge(key, slices, Judgement(nodes, rules, now))
            if objs is not None:
                removed.extend(self._own(key, objs))
                desired.extend(objs)
        if self.invalid.settle():
            self._rejudge_all = True
        return desired, removed

    def take_rejudge_all(self) -> bool:
        """Whether the invalid pools that abort attempts changed since last asked: the
        pools judged before then must be judged again."""
        found, self._rejudge_all = self._rejudge_all, False
        return found

    async def compute_in_steps(self, keys: Iterable[PoolKey]) -> Judged:
        """compute() a few pools at a time, yielding in between: a full sync of thousands
        of pools is seconds of CPU, and the Lease must be renewed (and watches read)
        meanwhile."""
        ordered = sorted(keys)
        desired: list[dict[str, Any]] = []
        removed: list[ObjKey] = []
        for i in range(0, len(ordered), COMPUTE_STEP):
            d, r = self.compute(ordered[i : i + COMPUTE_STEP])
            desired += d
            removed += r
            if i + COMPUTE_STEP < len(ordered):
                await asyncio.sleep(0)
        return desired, removed

    def _judge(
        self, key: PoolKey, slices: list[ResourceSlice], j: Judgement
    ) -> list[dict[str, Any]] | None:
        """The pool's objects, or None when judging it raised."""
        before = self.results.get(key)
        try:
            result = compute_pool(
                key,
                slices,
                self.store.allocations_of(key),
                j.rules,
                self.store.problems_of(key),
                self.settings.engine,
                previous=self._previous(key),
                now=j.now,
                prepared=before.prepared if before else None,
                nodes=j.nodes,
                aborts=self.invalid.aborts,
            )
            # The writer fits them to the byte budget as it encodes them.
            objs = result_objects(result, None)
        except Exception:
            # A bug hit by one pool's data must not stop the others: its objects
            # stay as last written, and the next change to it tries again.
            metrics.COMPUTE_ERRORS.inc()
            log.exception("computing a pool failed", extra={"driver": key[0], "pool": key[1]})
            self.broken.add(key)
            return None
        self.broken.discard(key)
        prepared = result.prepared
        if not self._node_local and prepared is not None:
            binding_last = prepared.rules.binding_pools_last
            self.invalid.note(
                key, prepared.views, prepared.flat, result.errors.allocator, binding_last
            )
        self._report(key, result)
        self.judged += 1
        self.stamps[key] = self.judged
        self.touched.add(key)
        lean = self.results[key] = _lean(result)
        if self.keep_fresh:
            self._fresh[key] = (lean, result)
        if self._keep_bodies:
            self._packed[key] = _Packed.of(result)
        return objs

    def take_touched(self) -> set[PoolKey]:
        found, self.touched = self.touched, set()
        return found

    def world(self, slices: list[ResourceSlice], classes: Iterable[DeviceClass]) -> World:
        """The world `fit` is asked in over these slices (of pools judged here): the
        DeviceTaintRules as now, and the nodes when they are watched (else, as each pool
        is judged, those the slices imply)."""
        return World(
            slices=slices,
            taint_rules=self.store.rules(),
            classes=list(classes),
            nodes=list(self.nodes.snapshot()) if self.nodes_watched else None,
        )

    def take_fresh(self) -> dict[PoolKey, tuple[PoolResult, PoolResult]]:
        """The judgements kept since last taken (keep_fresh): per pool, the lean result
        (compare with `results` to know it is still the latest) and the whole one."""
        found, self._fresh = self._fresh, {}
        return found

    def judge_again(self, key: PoolKey) -> Callable[[], PoolResult] | None:
        """A pool's latest judgement with its status bodies, to be made off the event
        loop: unpacked when kept (claim events on), else judged again from what it was
        judged with (compute_pool is pure; what it is handed is never changed in place).
        None when the pool is not judged."""
        lean = self.results.get(key)
        if lean is None:
            return None
        packed = self._packed.get(key)
        if packed is not None:
            return lambda: packed.unpack(lean)
        assumed = None if self.nodes_watched else self._assumed_nodes()
        return partial(
            compute_pool,
            key,
            self.store.slices_of(key),
            self.store.allocations_of(key),
            self.store.rules(),
            self.store.problems_of(key),
            self.settings.engine,
            prepared=lean.prepared,
            nodes=self.nodes.nodes_for(key) if assumed is None else assumed,
            aborts=self.invalid.aborts,
        )

    def full_result(self, key: PoolKey) -> PoolResult | None:
        """A pool's latest judgement with its status bodies (what `why` reads); None
        when the pool is not judged, or claim events are off (no bodies are kept)."""
        lean, packed = self.results.get(key), self._packed.get(key)
        return None if lean is None or packed is None else packed.unpack(lean)

    def full_results(self) -> list[PoolResult]:
        return [p.unpack(self.results[k]) for k, p in self._packed.items()]

    def _own(self, key: PoolKey, objs: list[dict[str, Any]]) -> list[ObjKey]:
        """The pool's objects from now on; returns those it no longer has."""
        names = {obj_key(o) for o in objs}
        gone = list(self.pool_objects.get(key, set()) - names)
        self.pool_objects[key] = names
        return gone

    def _report(self, key: PoolKey, result: PoolResult) -> None:
        errors = set(result.errors.all())
        new_errors = sorted(errors - self.pool_errors.get(key, set()))
        for err in new_errors:
            log.warning(
                "pool validation error", extra={"driver": key[0], "pool": key[1], "error": err}
            )
        self.pool_errors[key] = errors
        metrics.record_pool(result, new_errors)

    def _forget(self, key: PoolKey) -> set[ObjKey]:
        """A pool with no slice left: its objects go."""
        self.judged += 1
        self.invalid.forget(key)
        self.pool_errors.pop(key, None)
        self.results.pop(key, None)
        self._packed.pop(key, None)
        self._fresh.pop(key, None)
        self.stamps.pop(key, None)
        self.touched.add(key)
        self.broken.discard(key)
        metrics.forget_pool(key)
        return self.pool_objects.pop(key, set())

    def _previous(self, key: PoolKey) -> dict[str, Condition] | None:
        """The conditions last written: they keep their lastTransitionTime."""
        status = self.writer.previous_status((POOL_STATUS_PLURAL, pool_object_name(*key)))
        if not status:
            return None
        return {c["type"]: c for c in status.get("conditions", [])}

    def _assumed_nodes(self) -> AssumedNodes:
        """Without a Node watch, judge as `analyze` does without Node objects; the same
        object while the named nodes stay the same, so prepared views are kept."""
        found = assumed_nodes(self.store.slices.values())
        if found != self._assumed:
            self._assumed = found
        return self._assumed

    def forget_all(self) -> None:
        """Lost the lease: the new leader exports the pool series now."""
        for key in self.results:
            metrics.forget_pool(key)
        self.invalid = InvalidPools()  # pools may go while this replica stands by
        self.results.clear()
        self._packed.clear()
        self._fresh.clear()
        self.stamps.clear()
        self.touched.clear()
