"""The controller: watched changes -> store -> dirty pools -> batched compute -> writer."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from draview.api.claims import ResourceClaim, read_claim
from draview.api.fastslice import Interner, slice_from_object
from draview.api.nodes import AssumedNodes, NodeInfo, assumed_nodes
from draview.api.status import Condition
from draview.api.taints import DeviceClass, DeviceTaintRule
from draview.api.world import ObjectProblem, object_name, pool_of, short_error
from draview.controller import metrics
from draview.controller.events import (
    PendingClaimExplainer,
    SliceEvent,
    SliceProblemReporter,
    pool_slices,
)
from draview.controller.nodes import NodeIndex
from draview.controller.store import Store
from draview.controller.writer import PLURALS, ObjKey, Writer, obj_key
from draview.engine.budget import DEFAULT_MAX_OBJECT_BYTES
from draview.engine.model import EngineOptions, PoolKey
from draview.engine.objects import pool_object_name, result_objects
from draview.engine.pool import PoolResult, compute_pool

log = logging.getLogger("draview.controller")


@dataclass(frozen=True)
class Settings:
    batch_interval: float = 0.25
    engine: EngineOptions = field(default_factory=EngineOptions)
    # Events on claims that stay unallocated longer than pending_threshold seconds.
    claim_events: bool = True
    pending_threshold: float = 60.0
    explain_interval: float = 10.0
    # No status object may serialize to more than this (engine/budget.py).
    max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# How each watched kind is keyed in the store: by uid (a name only if there is none;
# a claim's name needs its namespace), and taint rules by name.
def _metadata(obj: dict[str, Any]) -> dict[str, Any]:
    # The API server never sends metadata that is not a map, but a handler must not
    # raise on what it is given: such an object is read (and reported) as nameless.
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _slice_key(meta: dict[str, Any]) -> str:
    return str(meta.get("uid") or meta.get("name"))


def _claim_key(meta: dict[str, Any]) -> str:
    return str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")


def _rule_key(meta: dict[str, Any]) -> str:
    return str(meta.get("name"))


_node_key = _rule_key  # Nodes are cluster-scoped and read as metadata only: by name


# Pools computed between two yields to the event loop (about 0.1 s of CPU at most).
COMPUTE_STEP = 50

# Entries the slice interner may hold before it is cleared (see Controller.interner).
INTERNER_MIN = 200_000

PostEvent = Callable[[ResourceClaim, str], Awaitable[None]]
PostSliceEvent = Callable[[SliceEvent], Awaitable[None]]
Handler = Callable[[str, dict[str, Any]], None]  # (event type, object)


class Controller:
    def __init__(
        self,
        writer: Writer,
        settings: Settings,
        post_event: PostEvent | None = None,
        post_slice_event: PostSliceEvent | None = None,
    ) -> None:
        self.store = Store()
        self.post_event = post_event if settings.claim_events else None
        self.explainer = PendingClaimExplainer(threshold=settings.pending_threshold)
        # Invalid or long-incomplete pools: Events on their slices, for driver authors.
        self.post_slice_event = post_slice_event
        self.slice_reporter = SliceProblemReporter(threshold=settings.pending_threshold)
        self.writer = writer
        self.settings = settings
        self.dirty: dict[PoolKey, float] = {}
        # Pools whose objects failed to write: not recomputed before this monotonic time.
        self.due: dict[PoolKey, float] = {}
        # The write under way (a batch or a full sync): cancelled when leadership is lost.
        self.inflight: asyncio.Task[Any] | None = None
        self.pool_objects: dict[PoolKey, set[ObjKey]] = {}
        # Pools whose last computation raised: their objects are kept, never pruned.
        self.broken: set[PoolKey] = set()
        self.pool_errors: dict[PoolKey, set[str]] = {}
        self.versions: dict[str, str] = {}  # uid -> resourceVersion seen
        # Shares equal values between the slices read; cleared when it grows past what
        # the slices alive can explain, so values of deleted devices do not pile up.
        self.interner = Interner()
        self.interner_limit = INTERNER_MIN
        # The latest result per pool: explanations of pending claims read them.
        self.results: dict[PoolKey, PoolResult] = {}
        # The cluster's nodes (names and labels). While Nodes cannot be watched (RBAC),
        # pools are judged as offline without Nodes: from assumed nodes.
        self.nodes = NodeIndex()
        self.nodes_watched = True
        self._assumed = AssumedNodes()
        self.leader = False
        self.synced = False
        # One writer at a time: a full sync and a batch must not interleave, or an older
        # computation could land after a newer one.
        self.write_lock = asyncio.Lock()

    # -- events ---------------------------------------------------------------------
    def mark(self, keys: Iterable[PoolKey]) -> None:
        # A standby keeps its store warm but queues nothing: on becoming leader it
        # recomputes every pool anyway, and its queue metrics stay truthful (0).
        if not self.leader:
            return
        now = time.monotonic()
        for key in keys:
            self.dirty.setdefault(key, now)
        metrics.QUEUE_DEPTH.labels("resourceslice_status").set(len(self.dirty))

    def _seen(self, obj: dict[str, Any]) -> str | None:
        """The object's uid, or None when this exact version was already applied."""
        meta = _metadata(obj)
        uid = str(meta.get("uid") or meta.get("name"))
        rv = str(meta.get("resourceVersion") or "")
        if rv and self.versions.get(uid) == rv:
            return None
        self.versions[uid] = rv
        return uid

    def slice_event(self, kind: str, obj: dict[str, Any]) -> None:
        meta = _metadata(obj)
        uid = _slice_key(meta)
        if kind == "DELETED":
            self.versions.pop(uid, None)
            self.mark(self.store.delete_slice(uid))
            return
        if self._seen(obj) is None:
            return
        if len(self.interner) > self.interner_limit:
            self.interner.clear()
        try:
            s = slice_from_object(obj, self.interner)
        except (ValidationError, AttributeError, TypeError) as exc:
            msg = short_error(exc) if isinstance(exc, ValidationError) else str(exc)
            problem = ObjectProblem("ResourceSlice", object_name(obj), msg, pool_of(obj))
            metrics.INVALID_OBJECTS.labels("ResourceSlice").inc()
            log.warning("unreadable ResourceSlice", extra={"object": problem.name, "error": msg})
            self.mark(self.store.put_slice(uid, None, problem))
            return
        self.mark(self.store.put_slice(uid, s))

    def claim_event(self, kind: str, obj: dict[str, Any]) -> None:
        meta = _metadata(obj)
        uid = _claim_key(meta)
        if kind == "DELETED":
            self.versions.pop(uid, None)
            self.mark(self.store.delete_claim(uid))
        elif self._seen(obj) is not None:
            self._read_claim(uid, obj)
        metrics.CLAIMS_TRACKED.set(len(self.store.claim_pools))

    def _read_claim(self, uid: str, obj: dict[str, Any]) -> None:
        # As offline (api.world): a damaged claim keeps its allocated devices taken and
        # is a validation error of each pool its allocation names.
        claim, message = read_claim(obj)
        if message is not None:
            name = object_name(obj)
            metrics.INVALID_OBJECTS.labels("ResourceClaim").inc()
            log.warning("unreadable ResourceClaim", extra={"object": name, "error": message})
            if claim is None:
                self.mark(self.store.delete_claim(uid))
                return
            pools = sorted({(r.driver, r.pool) for r in claim.results})
            problems = [ObjectProblem("ResourceClaim", name, message, p) for p in pools]
            self.mark(self.store.put_claim(uid, claim, problems))
            return
        assert claim is not None
        self.mark(self.store.put_claim(uid, claim))

    def step_down(self) -> None:
        """Lost the lease: stop writing and stop exporting pool series (the new leader
        exports them now)."""
        self.leader = False
        self.synced = False
        if self.inflight is not None:
            self.inflight.cancel()  # writes in flight stop; the new leader redoes them
        self.dirty.clear()
        self.due.clear()
        for key in self.results:
            metrics.forget_pool(key)
        self.results.clear()
        metrics.QUEUE_DEPTH.labels("resourceslice_status").set(0)
        metrics.STALENESS.set(0)

    def taint_rule_event(self, kind: str, obj: dict[str, Any]) -> None:
        name = _rule_key(_metadata(obj))
        if kind == "DELETED":
            self.mark(self.store.delete_taint_rule(name))
            return
        try:
            rule = DeviceTaintRule.from_object(obj)
        except (ValidationError, AttributeError, TypeError) as exc:
            metrics.INVALID_OBJECTS.labels("DeviceTaintRule").inc()
            log.warning("unreadable DeviceTaintRule", extra={"object": name, "error": str(exc)})
            return
        self.mark(self.store.put_taint_rule(name, rule))

    def node_event(self, kind: str, obj: dict[str, Any]) -> None:
        """Only pools whose slices select nodes can change (controller/nodes.py)."""
        if kind == "DELETED":
            self.mark(self.nodes.delete(_node_key(_metadata(obj))))
        else:
            try:
                node = NodeInfo.from_object(obj)
            except ValueError as exc:  # an API server sends named nodes with string labels
                log.warning(
                    "unreadable Node", extra={"object": object_name(obj), "error": str(exc)}
                )
                return
            self.mark(self.nodes.put(node))
        metrics.NODES.set(len(self.nodes))

    def class_event(self, kind: str, obj: dict[str, Any]) -> None:
        name = str(_metadata(obj).get("name"))
        if kind == "DELETED":
            self.store.classes.pop(name, None)
            return
        try:
            self.store.classes[name] = DeviceClass.from_object(obj)
        except (ValidationError, AttributeError, TypeError) as exc:
            metrics.INVALID_OBJECTS.labels("DeviceClass").inc()
            log.warning("unreadable DeviceClass", extra={"object": name, "error": str(exc)})

    # -- batches --------------------------------------------------------------------
    def _previous(self, key: PoolKey) -> dict[str, Condition] | None:
        status = self.writer.previous_status(("resourcepoolstatuses", pool_object_name(*key)))
        if not status:
            return None
        return {c["type"]: c for c in status.get("conditions", [])}

    def compute(self, keys: Iterable[PoolKey]) -> tuple[list[dict[str, Any]], list[ObjKey]]:
        desired: list[dict[str, Any]] = []
        removed: list[ObjKey] = []
        now = _now()
        rules = self.store.rules()
        assumed = None if self.nodes_watched else self._assumed_nodes()
        for key in sorted(keys):
            slices = self.store.slices_of(key)
            # Which label keys the pool's selectors read: known before its next node event.
            self.nodes.pool_changed(key, slices)
            if not slices and not self.store.has_unreadable_slice(key):
                removed.extend(self.pool_objects.pop(key, ()))
                self.pool_errors.pop(key, None)
                self.results.pop(key, None)
                self.broken.discard(key)
                metrics.forget_pool(key)
                continue
            try:
                result = compute_pool(
                    key,
                    slices,
                    self.store.allocations_of(key),
                    rules,
                    self.store.problems_of(key),
                    self.settings.engine,
                    previous=self._previous(key),
                    now=now,
                    prepared=before.prepared if (before := self.results.get(key)) else None,
                    nodes=self.nodes.nodes_for(key) if assumed is None else assumed,
                )
                objs = result_objects(result, self.settings.max_object_bytes)
            except Exception:
                # A bug hit by one pool's data must not stop the others: its objects
                # stay as last written, and the next change to it tries again.
                metrics.COMPUTE_ERRORS.inc()
                log.exception("computing a pool failed", extra={"driver": key[0], "pool": key[1]})
                self.broken.add(key)
                continue
            self.broken.discard(key)
            self.results[key] = result
            names = {obj_key(o) for o in objs}
            removed.extend(self.pool_objects.get(key, set()) - names)
            self.pool_objects[key] = names
            errors = set(result.errors.all())
            new_errors = sorted(errors - self.pool_errors.get(key, set()))
            for err in new_errors:
                log.warning(
                    "pool validation error", extra={"driver": key[0], "pool": key[1], "error": err}
                )
            self.pool_errors[key] = errors
            metrics.record_pool(result, new_errors)
            desired.extend(objs)
        return desired, removed

    def _assumed_nodes(self) -> AssumedNodes:
        """Without a Node watch, judge as `analyze` does without Node objects; the same
        object while the named nodes stay the same, so prepared views are kept."""
        found = assumed_nodes(self.store.slices.values())
        if found != self._assumed:
            self._assumed = found
        return self._assumed

    async def compute_in_steps(
        self, keys: Iterable[PoolKey]
    ) -> tuple[list[dict[str, Any]], list[ObjKey]]:
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

    async def flush(self) -> None:
        if not self.dirty or not self.leader:
            return
        async with self.write_lock:
            await self._flush()

    async def flush_due(self) -> bool:
        """Flush once (at shutdown); True while dirty pools remain that are due now."""
        await self.flush()
        now = time.monotonic()
        return any(self.due.get(k, 0.0) <= now for k in self.dirty)

    def _take_due(self) -> dict[PoolKey, float]:
        """Take the dirty pools not backing off out of the dirty set."""
        now = time.monotonic()
        batch = {k: t for k, t in self.dirty.items() if self.due.get(k, 0.0) <= now}
        for key in batch:
            del self.dirty[key]
            self.due.pop(key, None)
        return batch

    def _requeue(self, batch: dict[PoolKey, float]) -> None:
        """Put pools back that were taken but not written (cancelled mid-write)."""
        if not self.leader:
            return
        for key, seen in batch.items():
            self.dirty[key] = min(seen, self.dirty.get(key, seen))

    def _retry_later(self, desired: list[dict[str, Any]], failed: dict[ObjKey, float]) -> None:
        """A pool whose objects failed is recomputed once the latest of them is due."""
        by_name = {obj_key(o): o for o in desired}
        for key, not_before in failed.items():
            obj = by_name.get(key)
            if obj is None:
                # A failed delete: the object stays one of its pool's, so that the pool's
                # next computation, once due, deletes it again. (Left to the periodic
                # re-list, an orphan outlived a 429 storm by up to --resync-interval.)
                spec = (self.writer.known.get(key) or {}).get("spec") or {}
                if "driver" not in spec or "pool" not in spec:
                    continue
                pool = (spec["driver"], spec["pool"])
                self.pool_objects.setdefault(pool, set()).add(key)
            else:
                pool = (obj["spec"]["driver"], obj["spec"]["pool"])
            self.due[pool] = max(not_before, self.due.get(pool, 0.0))
            self.mark([pool])

    async def _write(
        self, desired: list[dict[str, Any]], removed: list[ObjKey], started: float | None = None
    ) -> dict[ObjKey, float]:
        """Run the writes as their own task, so that losing leadership can cancel them
        (step_down) without cancelling the loop that waits for them."""
        task = asyncio.create_task(self.writer.apply(desired, removed, started=started))
        self.inflight = task
        try:
            return await task
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if me is not None and me.cancelling():
                raise  # we are being stopped (shutdown): the caller re-queues
            return {}  # step_down cancelled the writes: a new leader redoes them
        finally:
            self.inflight = None

    async def _flush(self) -> None:
        if not self.dirty or not self.leader:
            return
        batch = self._take_due()
        if not batch:
            return
        try:
            oldest = min(batch.values())
            desired, removed = await self.compute_in_steps(batch)
            metrics.SYNC_TOTAL.inc()
            failed = await self._write(desired, removed, started=oldest)
        except asyncio.CancelledError:
            self._requeue(batch)  # shutdown: the final flush writes them
            raise
        self._retry_later(desired, failed)
        metrics.QUEUE_DEPTH.labels("resourceslice_status").set(len(self.dirty))

    async def explain_pending(self) -> None:
        """An Event on each claim pending past the threshold, once per new explanation."""
        # Events are writes too: behind the same fence as status writes.
        if self.post_event is None or not self.leader or not self.writer.may_write():
            return
        due = self.explainer.due(
            self.store.pending_claims(),
            list(self.results.values()),
            self.store.classes.values(),
            self.store.rules(),
        )
        for claim, message in due:
            try:
                await self.post_event(claim, message)
            except Exception as exc:  # an Event is best effort; status writes matter more
                log.warning("could not post Event", extra={"object": claim.key, "error": str(exc)})

    async def report_slice_problems(self) -> None:
        """A Warning Event on the slices of each pool problem, once per problem."""
        if self.post_slice_event is None or not self.leader:
            return
        unreadable: dict[PoolKey, dict[str, str]] = {}
        for uid, problem in self.store.problems.items():
            if problem.pool is not None:
                unreadable.setdefault(problem.pool, {})[problem.name] = uid
        pools = [(r, pool_slices(r, unreadable.get(k))) for k, r in self.results.items()]
        for ev in self.slice_reporter.due(pools):
            try:
                await self.post_slice_event(ev)
            except Exception as exc:  # best effort, like claim Events
                log.warning(
                    "could not post Event", extra={"object": ev.slice_name, "error": str(exc)}
                )

    async def run_explanations(self) -> None:
        while True:
            await asyncio.sleep(self.settings.explain_interval)
            try:
                await self.explain_pending()
                await self.report_slice_problems()
            except Exception:
                log.exception("explaining pending claims failed")

    async def run_batches(self) -> None:
        while True:
            await asyncio.sleep(self.settings.batch_interval)
            oldest = min(self.dirty.values(), default=None)
            metrics.STALENESS.set(0 if oldest is None else time.monotonic() - oldest)
            try:
                await self.flush()
            except Exception:  # one bad batch must never stop the operator
                log.exception("batch failed")

    async def full_sync(self) -> None:
        """After a (re)list or on becoming leader: learn the server, write differences,
        prune objects whose source is gone."""
        async with self.write_lock:
            await self._full_sync()

    async def _full_sync(self) -> None:
        await self.writer.load()
        self.pool_objects.clear()
        keys = self.store.pools() | set(self.dirty)
        batch = dict.fromkeys(keys, time.monotonic())
        self.dirty = {}
        self.due.clear()
        try:
            desired, removed = await self.compute_in_steps(keys)
            wanted = {obj_key(o) for o in desired}
            orphans = [
                k
                for k, obj in self.writer.known.items()
                if k not in wanted and k[0] in PLURALS.values() and not self._of_broken(obj)
            ]
            failed = await self._write(desired, [*removed, *orphans])
        except asyncio.CancelledError:
            self._requeue(batch)
            raise
        if failed:
            log.warning("full sync left failures", extra={"count": len(failed)})
            self._retry_later(desired, failed)
        self.synced = self.leader  # leadership may have been lost while writing

    def _of_broken(self, obj: dict[str, Any]) -> bool:
        spec = obj.get("spec") or {}
        return (spec.get("driver"), spec.get("pool")) in self.broken

    # -- re-list --------------------------------------------------------------------
    # A re-list heals missed watch events: every listed object is applied (unchanged
    # versions are skipped), then what the store holds but the list did not name is
    # deleted. Lists come in pages so that the raw objects never all exist at once.
    def known(self, kind: str) -> set[str]:
        """What the store holds of a kind, before a list starts (objects a watch adds
        while the list runs are newer than the list and must survive the prune)."""
        if kind == "rule":
            return set(self.store.taint_rules)
        if kind == "node":
            return self.nodes.names()
        return set(self.store.uids(kind))

    def handler(self, kind: str) -> Handler:
        """The event handler of a watched kind ("slice", "claim", "rule", "node")."""
        return self._relisted(kind)[1]

    def _relisted(self, kind: str) -> tuple[Callable[[dict[str, Any]], str], Handler, str]:
        """A kind's store key, its event handler, and the metadata field the key is."""
        return {
            "slice": (_slice_key, self.slice_event, "uid"),
            "claim": (_claim_key, self.claim_event, "uid"),
            "rule": (_rule_key, self.taint_rule_event, "name"),
            "node": (_node_key, self.node_event, "name"),
        }[kind]

    def apply_page(self, kind: str, objs: list[dict[str, Any]]) -> set[str]:
        """Apply one page of a list; returns the store keys it named."""
        key_of, handler, _ = self._relisted(kind)
        listed = set()
        for obj in objs:
            listed.add(key_of(_metadata(obj)))
            handler("MODIFIED", obj)
        return listed

    def prune(self, kind: str, before: set[str], listed: set[str]) -> None:
        _, handler, field_name = self._relisted(kind)
        for key in before - listed:
            handler("DELETED", {"metadata": {field_name: key}})
        log.debug("re-listed", extra={"kind": kind, "count": len(listed)})

    def listed(self) -> None:
        """After a full list: let the interner grow to twice what the live slices need."""
        self.interner_limit = max(INTERNER_MIN, 2 * len(self.interner))
