"""What the explain API (explain_api.py) answers for a FitReview: `kubectl dra fit` of a
workload, from the leader's judged pools.

The plugin computing the answer itself reads every ResourceSlice of the cluster and
judges every pool before it can place a copy; the leader holds every pool judged
already. It hands `fit` the pools as last judged, with their status bodies (unpacked,
as a capacity probe takes them), in a worker thread, one review at a time: a question
asked cold costs about what `kubectl dra fit` costs once the cluster is read (seconds at
thousands of nodes, bench/engine/README.md), and the event loop keeps the Lease and the
watches going meanwhile."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from draview.api import explanations as api
from draview.api.workload import Workload, WorkloadError, read_workload
from draview.api.world import World
from draview.controller import metrics
from draview.controller.explain_answers import Reply, failure, unavailable
from draview.controller.probe_source import error_text
from draview.controller.queue import Role
from draview.controller.reconcile import Reconciler
from draview.engine.model import AllocRef, EngineOptions, PoolKey
from draview.engine.pool import PoolResult
from draview.explain.fit import FitError, FitResult, check_workload, fit
from draview.explain.fit_document import document

log = logging.getLogger("draview.explain_api")

# The share of the operator's time reviews may take: one that took t seconds is followed
# by the next no sooner than t / SHARE after it began. A client asking in a loop (a CI
# pipeline checking workload after workload) then leaves the batches, the writes and
# the Lease most of the CPU, whatever the size of the cluster.
SHARE = 0.5


class FitAnswers:
    def __init__(self, role: Role, reconciler: Reconciler, identity: str) -> None:
        self.role = role
        self.reconciler = reconciler
        self.identity = identity
        self.lock = asyncio.Lock()  # one review at a time
        self.not_before = 0.0  # when the next review may begin (SHARE)
        self.clock: Callable[[], float] = time.monotonic
        self.sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    async def answer(self, namespace: str, body: Any) -> Reply:
        refused = unavailable(self.role)
        if refused is not None:
            return refused
        try:
            objects, count, budget = api.read_fit_review(body)
            # The plugin sends what the workload names along with it, as its caller read
            # them: nothing is looked up here.
            workload = read_workload(objects, lambda *_: None, namespace)
            # Before its turn: an unknown class needs no pool looked at to be refused.
            check_workload(workload, self.reconciler.store.classes)
        except (ValueError, WorkloadError) as exc:  # FitError is a ValueError
            return failure(422, "Invalid", str(exc))
        async with self.lock:
            wait = self.not_before - self.clock()
            if wait > 0:
                await self.sleep(wait)
            began = self.clock()
            try:
                found = await self._fit(f"{namespace}/{workload.label}", workload, count, budget)
            finally:
                self.not_before = began + (self.clock() - began) / SHARE
        if isinstance(found, Reply):
            return found
        result, pools = found
        profile = self.reconciler.settings.engine.profile.label()
        answered_by = {"replica": self.identity, "profile": profile, "pools": pools}
        doc = document(result, workload, profile, budget)
        return Reply(201, api.fit_review_answer(body, doc, answered_by))

    async def _fit(
        self, what: str, workload: Workload, count: int | None, budget: int
    ) -> tuple[FitResult, int] | Reply:
        """fit on the pools as judged now, and how many; or the error to answer with."""
        world, judge, allocations = self._picture()
        options = self.reconciler.settings.engine
        began = time.perf_counter()
        try:
            result = await asyncio.to_thread(
                _fit, world, judge, allocations, workload, options, count, budget
            )
        except FitError as exc:
            return failure(422, "Invalid", str(exc))
        except Exception as exc:  # a bug met by one review: the operator goes on
            log.exception("fit review failed", extra={"object": what})
            return failure(500, "InternalError", f"draview could not answer: {error_text(exc)}")
        metrics.FIT_REVIEW_SECONDS.observe(time.perf_counter() - began)
        log.debug("fit review answered", extra={"object": what, "copies": result.copies})
        return result, len(judge)

    def _picture(
        self,
    ) -> tuple[World, list[Callable[[], PoolResult]], dict[PoolKey, list[AllocRef]]]:
        """On the event loop: every judged pool as the worker is to judge or unpack it,
        and what fit's world is made of, taken while nothing changes them."""
        rec = self.reconciler
        store = rec.store
        judge: list[Callable[[], PoolResult]] = []
        allocations: dict[PoolKey, list[AllocRef]] = {}
        slices = []
        for key in sorted(rec.results):
            again = rec.judge_again(key)
            if again is None:
                continue
            judge.append(again)
            allocations[key] = store.allocations_of(key)
            slices.extend(store.slices_of(key))
        return rec.world(slices, store.classes.values()), judge, allocations


def _fit(
    world: World,
    judge: Sequence[Callable[[], PoolResult]],
    allocations: dict[PoolKey, list[AllocRef]],
    workload: Workload,
    options: EngineOptions,
    count: int | None,
    budget: int,
) -> FitResult:
    """In a worker thread: the pools unpacked (or judged again), then fit."""
    results = [make() for make in judge]
    return fit(
        world,
        workload,
        options,
        count=count,
        budget=budget,
        results=results,
        allocations=allocations,
    )
