"""Keeping the store and the written statuses in sync with the cluster: the first list,
the full sync on becoming leader, the periodic re-list, and noticing deleted CRDs are
back. Also what /readyz reports while any of that is not done."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import Iterator

from kubernetes_asyncio import client

from draview.controller.core import Controller
from draview.controller.informers import Informer, relist_classes
from draview.controller.startup import until_done

log = logging.getLogger("draview")


@contextlib.contextmanager
def long_lived() -> Iterator[None]:
    """For work that allocates what the process will hold for good, all of it acyclic
    (the initial list, the first full sync): without the cyclic collector re-walking it
    as the heap grows (each full collection walks everything built so far, and finds
    nothing to free), then moved out of the collector's generations for good.

    Frozen without a collection first (as event_rounds.py freezes its catalog): that
    collection would walk everything the work built and find nothing to free, since
    what a successful list and sync build holds no cycles. What a failed attempt
    leaves in cycles is collected after that attempt (startup.until_done)."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


class Syncer:
    def __init__(
        self,
        ctl: Controller,
        informers: list[Informer],
        api: client.ApiClient,
        versions: dict[str, str],
    ) -> None:
        self.ctl = ctl
        self.informers = informers
        self.api = api
        self.versions = versions
        self.listed = False
        self.sync_task: asyncio.Task[None] | None = None
        # Why the last attempt of a start-up step failed, for /readyz; None otherwise.
        self.startup_problem: str | None = None

    def not_ready(self) -> str | None:
        """Why /readyz answers 503, or None."""
        if self.startup_problem is not None:
            step = "initial list" if not self.listed else "initial status sync"
            return f"{step} not finished: {self.startup_problem}"
        if not self.listed:
            return "initial list not finished"
        if self.ctl.writer.blocked:  # e.g. CRDs deleted, RBAC missing: nothing can be written
            return "cannot write status: " + "; ".join(sorted(self.ctl.writer.blocked.values()))
        if self.ctl.role.leader and not self.ctl.role.synced:
            return "initial status sync not finished"
        return None

    def _failing(self, problem: str | None) -> None:
        self.startup_problem = problem

    async def relist(self) -> None:
        for informer in self.informers:
            await informer.relist()
        self.ctl.ingest.listed()
        if "deviceclasses" in self.versions:
            await relist_classes(self.api, self.ctl.ingest, self.versions["deviceclasses"])

    async def initial_list(self) -> None:
        started = time.monotonic()
        with long_lived():
            await until_done("initial list", self.relist, self._failing)
        self.listed = True
        store = self.ctl.store
        log.info(
            "initial list done",
            extra={
                "slices": len(store.slices),
                "claims": len(store.claim_uids()),
                "pools": len(store.pool_slices),
                "nodes": len(self.ctl.nodes),
                "seconds": round(time.monotonic() - started, 1),
            },
        )

    async def _initial_sync(self) -> None:
        began = time.monotonic()
        with long_lived():
            await until_done("initial status sync", self.ctl.worker.full_sync, self._failing)
        log.info(
            "status in sync",
            extra={
                "pools": len(self.ctl.reconciler.results),
                "seconds": round(time.monotonic() - began, 1),
            },
        )

    def become_leader(self) -> None:
        # Only starts the sync: the elector goes on renewing while it runs.
        self.ctl.role.leader = True
        self.sync_task = asyncio.create_task(self._initial_sync(), name="initial-sync")

    def stop_leading(self) -> None:
        if self.sync_task is not None:
            self.sync_task.cancel()
        self.ctl.worker.step_down()

    async def resync_loop(self, interval: float) -> None:
        """A periodic re-list heals missed watch events and prunes what is gone."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.relist()
                if self.ctl.role.leader:
                    await self.ctl.worker.full_sync()
            except Exception as exc:
                log.warning("periodic re-list failed", extra={"error": str(exc)})

    async def crd_probe_loop(self) -> None:
        """While a CRD is missing nothing is written; one cheap list every few seconds
        notices it is back, and a full sync then re-creates every object."""
        while True:
            await asyncio.sleep(5)
            if await self.ctl.writer.probe() and self.ctl.role.leader:
                await until_done("status sync after CRDs returned", self.ctl.worker.full_sync)
