"""Leader election on a coordination.k8s.io Lease: every replica watches and keeps its
caches warm; only the holder of the lease writes."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable

from kubernetes_asyncio.client import CoordinationV1Api, V1Lease, V1LeaseSpec, V1ObjectMeta
from kubernetes_asyncio.client.exceptions import ApiException

from draview.controller import metrics

log = logging.getLogger("draview.leader")


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class LeaderElector:
    def __init__(
        self,
        api: CoordinationV1Api,
        namespace: str,
        name: str,
        identity: str,
        on_start: Callable[[], Awaitable[None]],
        on_stop: Callable[[], None],
        lease_seconds: int = 15,
        renew_seconds: float = 5.0,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.on_start = on_start
        self.on_stop = on_stop
        self.lease_seconds = lease_seconds
        self.renew_seconds = renew_seconds
        self.leading = False

    async def _try(self) -> bool:
        now = _utcnow()
        try:
            lease = await self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = V1Lease(
                metadata=V1ObjectMeta(name=self.name, namespace=self.namespace),
                spec=V1LeaseSpec(
                    holder_identity=self.identity,
                    lease_duration_seconds=self.lease_seconds,
                    acquire_time=now,
                    renew_time=now,
                    lease_transitions=0,
                ),
            )
            try:
                await self.api.create_namespaced_lease(self.namespace, body)
                return True
            except ApiException as exc2:
                if exc2.status == 409:
                    return False
                raise
        spec = lease.spec or V1LeaseSpec()
        holder = spec.holder_identity or ""
        renewed = spec.renew_time or spec.acquire_time
        duration = spec.lease_duration_seconds or self.lease_seconds
        expired = renewed is None or (now - renewed).total_seconds() > duration
        if holder and holder != self.identity and not expired:
            return False
        if holder != self.identity:
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
            spec.acquire_time = now
        spec.holder_identity = self.identity
        spec.lease_duration_seconds = self.lease_seconds
        spec.renew_time = now
        lease.spec = spec
        try:
            # resourceVersion in the body makes this a compare-and-swap.
            await self.api.replace_namespaced_lease(self.name, self.namespace, lease)
            return True
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise

    async def run(self) -> None:
        while True:
            try:
                held = await self._try()
            except Exception as exc:  # API unreachable: we cannot prove we still lead
                log.warning("lease check failed", extra={"error": str(exc)})
                held = False
            if held and not self.leading:
                self.leading = True
                metrics.IS_LEADER.set(1)
                log.info("became leader", extra={"identity": self.identity})
                await self.on_start()
            elif not held and self.leading:
                self.leading = False
                metrics.IS_LEADER.set(0)
                log.warning("lost leadership", extra={"identity": self.identity})
                self.on_stop()
            await asyncio.sleep(self.renew_seconds if self.leading else self.renew_seconds / 2)

    async def release(self) -> None:
        """Give the lease up at shutdown so another replica takes over at once."""
        if not self.leading:
            return
        try:
            lease = await self.api.read_namespaced_lease(self.name, self.namespace)
            if lease.spec and lease.spec.holder_identity == self.identity:
                lease.spec.holder_identity = ""
                lease.spec.renew_time = None  # type: ignore[assignment]
                await self.api.replace_namespaced_lease(self.name, self.namespace, lease)
        except Exception as exc:
            log.warning("lease release failed", extra={"error": str(exc)})
        self.leading = False
        metrics.IS_LEADER.set(0)
