"""Leader election on a coordination.k8s.io Lease, judged the way client-go judges it.

Every replica watches and keeps its caches warm; only the holder of the Lease writes.

- Renewal is this module's own loop and never waits behind work: `on_start` and
  `on_stop` are plain callbacks, the work they start runs elsewhere.
- Expiry is never judged by comparing our clock with another machine's renewTime: a
  record is expired when it has not changed for its lease duration, measured on this
  replica's monotonic clock from when this replica last saw it change.
- Fencing: `may_write()` is false once `renew_deadline` (shorter than the lease) has
  passed since the last successful renewal, even if this loop is stuck; a transient
  failure is retried until then, and leadership is dropped (`on_stop`) when it passes.
- kubernetes_asyncio.leaderelection (36.x) reads wall-clock time.time() for all of this
  and offers no fencing, so it is not used.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Literal, Protocol

from kubernetes_asyncio.client import V1Lease, V1LeaseSpec, V1ObjectMeta
from kubernetes_asyncio.client.exceptions import ApiException

from draview.controller import metrics

log = logging.getLogger("draview.leader")

Attempt = Literal["held", "other", "error"]


class LeaseApi(Protocol):
    """What is used of CoordinationV1Api (tests pass a fake)."""

    def read_namespaced_lease(self, name: str, namespace: str) -> Awaitable[V1Lease]: ...

    def create_namespaced_lease(self, namespace: str, body: V1Lease) -> Awaitable[V1Lease]: ...

    def replace_namespaced_lease(
        self, name: str, namespace: str, body: V1Lease
    ) -> Awaitable[V1Lease]: ...


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class LeaderElector:
    def __init__(
        self,
        api: LeaseApi,
        namespace: str,
        name: str,
        identity: str,
        on_start: Callable[[], None],
        on_stop: Callable[[], None],
        lease_seconds: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        wall: Callable[[], dt.datetime] = _utcnow,
    ) -> None:
        if not 0 < retry_period < renew_deadline < lease_seconds:
            raise ValueError("need 0 < retry period < renew deadline < lease duration")
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.on_start = on_start
        self.on_stop = on_stop
        self.lease_seconds = lease_seconds
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock = clock
        self.sleep = sleep
        self.wall = wall
        self.leading = False
        # Monotonic time at which the last successful acquire/renew request was *sent*:
        # the server's record is at least that fresh, so fencing from it is conservative.
        self.renewed_at = 0.0
        # The record as last seen (resourceVersion, holder) and when it last changed.
        self.observed: tuple[str, str] | None = None
        self.observed_at = 0.0
        # Lease requests failing in a row: the first is a warning, the rest debug (an API
        # server outage was one warning per retry period), a success ends the streak.
        self.failing = 0

    def may_write(self) -> bool:
        """True only while a renewal succeeded less than renew_deadline ago."""
        return self.leading and self.clock() - self.renewed_at < self.renew_deadline

    def _observe(self, version: str, holder: str, now: float) -> None:
        if self.observed != (version, holder):
            self.observed = (version, holder)
            self.observed_at = now

    async def _attempt(self) -> Attempt:
        now = self.clock()
        try:
            lease: V1Lease = await self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
            stamp = self.wall()
            body = V1Lease(
                metadata=V1ObjectMeta(name=self.name, namespace=self.namespace),
                spec=V1LeaseSpec(
                    holder_identity=self.identity,
                    lease_duration_seconds=int(self.lease_seconds),
                    acquire_time=stamp,
                    renew_time=stamp,
                    lease_transitions=0,
                ),
            )
            try:
                await self.api.create_namespaced_lease(self.namespace, body)
            except ApiException as exc2:
                if exc2.status == 409:
                    return "other"
                raise
            self.renewed_at = now
            return "held"
        spec = lease.spec or V1LeaseSpec()
        holder = spec.holder_identity or ""
        self._observe(str(lease.metadata.resource_version), holder, now)
        duration = float(spec.lease_duration_seconds or self.lease_seconds)
        valid = now - self.observed_at < duration
        if holder and holder != self.identity and valid:
            return "other"
        stamp = self.wall()
        if holder != self.identity:
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
            spec.acquire_time = stamp
        spec.holder_identity = self.identity
        spec.lease_duration_seconds = int(self.lease_seconds)
        spec.renew_time = stamp
        lease.spec = spec
        try:
            # resourceVersion in the body makes this a compare-and-swap.
            await self.api.replace_namespaced_lease(self.name, self.namespace, lease)
        except ApiException as exc:
            if exc.status == 409:  # someone wrote in between: look again next round
                return "error" if self.leading else "other"
            raise
        self.renewed_at = now
        return "held"

    async def _try(self) -> Attempt:
        try:
            # A request that hangs must not outlive the deadline it is meant to meet.
            outcome = await asyncio.wait_for(self._attempt(), self.renew_deadline)
        except Exception as exc:  # API errors, timeouts, lost connections
            self.failing += 1
            extra = {"error": str(exc) or type(exc).__name__, "failures": self.failing}
            if self.failing == 1:
                log.warning("lease request failed", extra=extra)
            else:
                log.debug("lease request failed again", extra=extra)
            return "error"
        if self.failing:
            log.info("lease requests succeed again", extra={"failures": self.failing})
            self.failing = 0
        return outcome

    def _gain(self) -> None:
        self.leading = True
        metrics.IS_LEADER.set(1)
        log.info("became leader", extra={"identity": self.identity})
        self.on_start()

    def _lose(self, why: str) -> None:
        self.leading = False
        metrics.IS_LEADER.set(0)
        log.warning("lost leadership", extra={"identity": self.identity, "reason": why})
        self.on_stop()

    async def step(self) -> None:
        """One round: acquire or renew, then decide."""
        outcome = await self._try()
        if not self.leading:
            if outcome == "held":
                self._gain()
            return
        if outcome == "other":
            self._lose("another replica holds the lease")
        elif outcome == "error" and self.clock() - self.renewed_at >= self.renew_deadline:
            self._lose("renew deadline passed")

    async def run(self) -> None:
        while True:
            await self.step()
            await self.sleep(self.retry_period)

    async def release(self) -> None:
        """Give the lease up at shutdown so another replica takes over at once."""
        if not self.leading:
            return
        self.leading = False  # fence first: nothing writes from here on
        metrics.IS_LEADER.set(0)
        try:
            lease = await self.api.read_namespaced_lease(self.name, self.namespace)
            if lease.spec and lease.spec.holder_identity == self.identity:
                lease.spec.holder_identity = ""
                lease.spec.lease_duration_seconds = 1
                await self.api.replace_namespaced_lease(self.name, self.namespace, lease)
        except Exception as exc:
            log.warning("lease release failed", extra={"error": str(exc)})
