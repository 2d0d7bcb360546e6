"""The rounds of Events for people: why a claim stays pending (on the claim:
claim_events.py), and what is wrong with an invalid or long-incomplete pool (on its
slices, for driver authors: slice_events.py). Best effort, once per new explanation, and
only from the leader, behind the same fence as status writes.

A round runs on the operator's event loop, in steps (explain/steps.py): after
`STEP_SECONDS` of work it lets the loop run anything else that is ready (the Lease's
renewal, watches, batches) before it goes on. Explaining one claim at 65,000 nodes is
seconds of CPU, and preparing a round from scratch (every pool's status unpacked, every
device indexed) would grow with the cluster: only the pools judged since the last round
are unpacked and indexed again (`CatalogSync`)."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from draview.api.claims import ResourceClaim
from draview.api.taints import DeviceTaintRule
from draview.controller.claim_events import PendingClaimExplainer
from draview.controller.queue import Role
from draview.controller.reconcile import Reconciler, Settings
from draview.controller.slice_events import SliceEvent, SliceProblemReporter, pool_slices
from draview.controller.writer import Writer
from draview.engine.model import PoolKey
from draview.explain import Catalog
from draview.explain.steps import Steps

log = logging.getLogger("draview.controller")

# Seconds of explaining pending claims per round, at most (past one claim): the rest wait
# for the next rounds.
EXPLAIN_BUDGET = 1.0
# Longest a round holds the event loop before it lets other work run.
STEP_SECONDS = 0.05
# Pools looked at between two steps when finding those judged since the last round.
KEYS_PER_STEP = 2048
# A refresh that indexes at least this many pools does it without the cyclic collector
# and freezes what it made (see CatalogSync.refresh).
FREEZE_AFTER = 500

PostEvent = Callable[[ResourceClaim, str], Awaitable[None]]
PostSliceEvent = Callable[[SliceEvent], Awaitable[None]]
T = TypeVar("T")


async def run_steps(steps: Steps[T], seconds: float | None = None) -> T:
    """Run `steps` to the end, letting the event loop run other work whenever `seconds`
    (STEP_SECONDS) have passed since it last did."""
    most = STEP_SECONDS if seconds is None else seconds
    began = time.monotonic()
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        if time.monotonic() - began >= most:
            await asyncio.sleep(0)
            began = time.monotonic()


class CatalogSync:
    """The reconciler's judged pools as an explain.Catalog, updated rather than rebuilt:
    a pool is unpacked and indexed again only when it was judged since it was last put
    (its stamp moved), dropped when the reconciler forgot it, and all of them indexed
    again when the DeviceTaintRules changed (they decide the devices' taints)."""

    def __init__(self, reconciler: Reconciler) -> None:
        self.reconciler = reconciler
        self.catalog = Catalog()
        self.stamps: dict[PoolKey, int] = {}

    def refresh(self, rules: list[DeviceTaintRule]) -> Steps[Catalog]:
        if tuple(rules) != self.catalog.rules:
            self.catalog.rules = tuple(rules)
            self.stamps.clear()  # every pool again, with the new taints
        rec = self.reconciler
        stale: list[PoolKey] = []
        for i, key in enumerate(list(rec.stamps)):
            if i % KEYS_PER_STEP == 0:
                yield
            if self.stamps.get(key) != rec.stamps.get(key, -1):
                stale.append(key)
        for key in [k for k in self.stamps if k not in rec.stamps]:
            self.catalog.drop(key)
            del self.stamps[key]
        # The catalog holds an object or more per device, all acyclic. Indexing many
        # pools with the cyclic collector on, each full collection would walk all of it
        # (seconds in a large cluster, the loop held meanwhile); so, as sync.long_lived
        # does for the first sync, it is off meanwhile and what was made is then frozen out of its
        # generations (without a collection first: that would be such a walk).
        many = len(stale) >= FREEZE_AFTER
        was_on = gc.isenabled()
        if many:
            gc.disable()
        try:
            for key in stale:
                # Pools judged while this runs (between steps) are taken as they are then.
                stamp = rec.stamps.get(key)
                result = rec.full_result(key) if stamp is not None else None
                if stamp is None or result is None:
                    continue
                self.catalog.put(result, keep=rec.results.get(key))
                self.stamps[key] = stamp
                yield  # a pool unpacked and indexed: up to a few ms for a large one
        finally:
            if many:
                gc.freeze()
                if was_on:
                    gc.enable()
        return self.catalog


class Explanations:
    def __init__(
        self,
        role: Role,
        reconciler: Reconciler,
        writer: Writer,
        settings: Settings,
        post_event: PostEvent | None = None,
        post_slice_event: PostSliceEvent | None = None,
    ) -> None:
        self.role = role
        self.reconciler = reconciler
        self.writer = writer
        self.interval = settings.explain_interval
        self.post_event = post_event if settings.claim_events else None
        self.explainer = PendingClaimExplainer(threshold=settings.pending_threshold)
        self.post_slice_event = post_slice_event
        self.slice_reporter = SliceProblemReporter(threshold=settings.pending_threshold)
        self.sync = CatalogSync(reconciler)
        # Held while the catalog is brought up to date and read: by a round, and by an
        # answer of the explain API (explain_answers.py), which must not see a catalog
        # half refreshed by the other.
        self.lock = asyncio.Lock()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.explain_pending()
                await self.report_slice_problems()
            except Exception:
                log.exception("explaining pending claims failed")

    async def explain_pending(self) -> None:
        """An Event on each claim pending past the threshold, once per new explanation."""
        if self.post_event is None or not self.role.leader or not self.writer.may_write():
            return
        store = self.reconciler.store
        rules = store.rules()
        async with self.lock:
            due = await run_steps(
                self.explainer.round(
                    store.pending_claims(),
                    lambda: self.sync.refresh(rules),  # only when some claim is explained
                    list(store.classes.values()),
                    rules,
                    version=(self.reconciler.judged, store.changes),
                    budget=EXPLAIN_BUDGET,
                )
            )
        for claim, message in due:
            if not self.role.leader or not self.writer.may_write():
                return  # the round took long enough for the fence to close
            try:
                await self.post_event(claim, message)
            except Exception as exc:  # an Event is best effort; status writes matter more
                log.warning("could not post Event", extra={"object": claim.key, "error": str(exc)})

    async def report_slice_problems(self) -> None:
        """A Warning Event on the slices of each pool problem, once per problem."""
        if self.post_slice_event is None or not self.role.leader:
            return
        unreadable: dict[PoolKey, dict[str, str]] = {}
        for uid, problem in self.reconciler.store.problems.items():
            if problem.pool is not None:
                unreadable.setdefault(problem.pool, {})[problem.name] = uid
        # A copy of the pools as they are now: batches judge others between the steps.
        pools = (
            (r, lambda r=r, k=k: pool_slices(r, unreadable.get(k)))
            for k, r in list(self.reconciler.results.items())
        )
        for ev in await run_steps(self.slice_reporter.round(pools)):
            try:
                await self.post_slice_event(ev)
            except Exception as exc:  # best effort, like claim Events
                log.warning(
                    "could not post Event", extra={"object": ev.slice_name, "error": str(exc)}
                )
