"""Events for people: why a claim stays pending (on the claim), and what is wrong with an
invalid or long-incomplete pool (on its slices, for driver authors). Best effort, once
per new explanation, and only from the leader, behind the same fence as status writes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from draview.api.claims import ResourceClaim
from draview.controller.events import (
    PendingClaimExplainer,
    SliceEvent,
    SliceProblemReporter,
    pool_slices,
)
from draview.controller.queue import Role
from draview.controller.reconcile import Reconciler, Settings
from draview.controller.writer import Writer
from draview.engine.model import PoolKey

log = logging.getLogger("draview.controller")

# Seconds of explaining pending claims per round, at most (past one claim): the rest wait
# for the next rounds. The operator's event loop is blocked meanwhile.
EXPLAIN_BUDGET = 1.0

PostEvent = Callable[[ResourceClaim, str], Awaitable[None]]
PostSliceEvent = Callable[[SliceEvent], Awaitable[None]]


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
        due = self.explainer.due(
            store.pending_claims(),
            self.reconciler.full_results,  # unpacked only when some claim is explained
            store.classes.values(),
            store.rules(),
            version=(self.reconciler.judged, store.changes),
            budget=EXPLAIN_BUDGET,
        )
        for claim, message in due:
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
        results = self.reconciler.results
        pools = [(r, pool_slices(r, unreadable.get(k))) for k, r in results.items()]
        for ev in self.slice_reporter.due(pools):
            try:
                await self.post_slice_event(ev)
            except Exception as exc:  # best effort, like claim Events
                log.warning(
                    "could not post Event", extra={"object": ev.slice_name, "error": str(exc)}
                )
