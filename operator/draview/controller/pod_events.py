"""Why the operator is not ready, where `kubectl describe pod` shows it.

A kubelet's readiness probe reports only "HTTP probe failed with statuscode: 503"; the
reason /readyz gives (a CRD not installed, RBAC forbidding a write) would otherwise be in
the Pod's log alone. So while the operator cannot become ready for such a reason, it posts
one Warning Event about its own Pod per distinct reason. The Pod is named by the downward
API (POD_NAMESPACE, POD_NAME and POD_UID, all set by the chart: `kubectl describe` matches
Events by uid); without them (a process outside a cluster) nothing is posted.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
from collections.abc import Callable
from typing import Any, cast

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

log = logging.getLogger("draview")

REASON = "NotReady"
CONTROLLER = "draview.io/operator"
MAX_NOTE = 1024  # events.k8s.io/v1 rejects longer notes
# Reasons that only say the operator is still starting: they pass on their own.
STARTING = ("initial list not finished", "initial status sync not finished")


def own_pod() -> tuple[str, str, str] | None:
    """(namespace, name, uid) of the Pod this process runs in, from the downward API."""
    pod = tuple(os.environ.get(k, "") for k in ("POD_NAMESPACE", "POD_NAME", "POD_UID"))
    return (pod[0], pod[1], pod[2]) if all(pod) else None


def event_body(namespace: str, pod: str, uid: str, note: str) -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"generateName": f"{pod}-", "namespace": namespace},
        "regarding": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": namespace,
            "name": pod,
            "uid": uid,
        },
        "reason": REASON,
        "note": note[:MAX_NOTE],
        "type": "Warning",
        "action": "Ready",
        "eventTime": now,
        "reportingController": CONTROLLER,
        "reportingInstance": pod,
    }


class NotReadyReporter:
    """Posts each distinct reason /readyz gives, once it has held for `grace` seconds."""

    def __init__(
        self,
        api: client.ApiClient,
        pod: tuple[str, str, str],
        not_ready: Callable[[], str | None],
        grace: float = 10.0,
        interval: float = 2.0,
    ) -> None:
        self.api, self.pod, self.not_ready = api, pod, not_ready
        self.grace, self.interval = grace, interval
        self.posted: set[str] = set()

    def due(self, why: str | None, held: float) -> bool:
        """Whether a reason that has held for `held` seconds is to be posted now."""
        if why is None or why in STARTING or why in self.posted:
            return False
        return held >= self.grace

    async def run(self) -> None:
        current: str | None = None
        since = asyncio.get_running_loop().time()
        while True:
            why = self.not_ready()
            now = asyncio.get_running_loop().time()
            if why != current:
                current, since = why, now
            if self.due(why, now - since):
                assert why is not None
                self.posted.add(why)
                await self.post(why)
            await asyncio.sleep(self.interval)

    async def post(self, why: str) -> None:
        namespace, name, uid = self.pod
        body = event_body(namespace, name, uid, f"not ready: {why}")
        try:
            await client.EventsV1Api(self.api).create_namespaced_event(namespace, cast(Any, body))
        except (ApiException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            # An Event is a courtesy: failing to post one must not stop the operator.
            log.warning(
                "cannot post an Event on the operator's Pod",
                extra={"pod": f"{namespace}/{name}", "error": str(exc)[:200]},
            )
