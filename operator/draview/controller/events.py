"""Warning Events on ResourceClaims that stay unallocated, saying why.

`PendingClaimExplainer.due()` is pure apart from the clock: given the store's claims, the
computed pools and the DeviceClasses, it returns the claims that need a new Event — a
claim pending longer than the threshold whose explanation changed since the last Event
(at most one Event per change). `post_event()` writes it with events.k8s.io/v1, falling
back to core/v1 on servers without it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from draview.api.claims import ResourceClaim
from draview.api.taints import DeviceClass, DeviceTaintRule
from draview.engine.pool import PoolResult
from draview.explain import DeviceIndex, Explainer

log = logging.getLogger("draview.events")

REASON = "DRAViewUnallocatable"
ACTION = "Explain"
CONTROLLER = "draview.io/operator"
MAX_NOTE = 1024  # events.k8s.io/v1 rejects longer notes
# Only these verdicts are worth a Warning: Allocatable means the allocator would serve the
# claim (something else keeps it pending), Uncertain that it depends on the slice order.
WARN_VERDICTS = frozenset({"Unallocatable", "Error"})


def _created(text: str) -> float | None:
    if not text:
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def claim_key(claim: ResourceClaim) -> str:
    return claim.uid or claim.key


class PendingClaimExplainer:
    """Remembers the last explanation sent per claim so each change is sent once."""

    def __init__(
        self,
        threshold: float = 60.0,
        explainer: Explainer | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.threshold = threshold
        self.explainer = explainer or Explainer()
        self.clock = clock
        self.last: dict[str, str] = {}

    def due(
        self,
        claims: Iterable[ResourceClaim],
        results: Sequence[PoolResult],
        classes: Iterable[DeviceClass],
        rules: Sequence[DeviceTaintRule] = (),
    ) -> list[tuple[ResourceClaim, str]]:
        now = self.clock()
        pending: list[ResourceClaim] = []
        seen: set[str] = set()
        for claim in claims:
            key = claim_key(claim)
            if claim.allocated:
                continue
            seen.add(key)
            created = _created(claim.created)
            # A claim without a timestamp is treated as old: better an Event than silence.
            if created is None or now - created >= self.threshold:
                pending.append(claim)
        for key in set(self.last) - seen:
            del self.last[key]  # allocated or deleted: a later failure is news again
        if not pending:
            return []
        index = DeviceIndex.build(results, rules)
        by_name = {c.name: c for c in classes}
        out: list[tuple[ResourceClaim, str]] = []
        for claim in sorted(pending, key=lambda c: c.key):
            exp = self.explainer.explain(claim, index, by_name, results=results, rules=rules)
            key = claim_key(claim)
            if self.last.get(key) == exp.summary:
                continue
            self.last[key] = exp.summary
            if exp.verdict in WARN_VERDICTS:
                out.append((claim, exp.summary))
        return out


def _now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _event_name(claim: ResourceClaim) -> str:
    # As client-go's recorder does: generateName "<name>." is rejected for Events
    # (a name ending in a dot is not a valid subdomain prefix), so name them explicitly.
    return f"{claim.name}.{time.time_ns():x}"


def event_body(
    claim: ResourceClaim, message: str, instance: str, api_version: str
) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": _event_name(claim), "namespace": claim.namespace},
        "eventTime": _now_micro(),
        "type": "Warning",
        "reason": REASON,
        "action": ACTION,
        "note": message[:MAX_NOTE],
        "reportingController": CONTROLLER,
        "reportingInstance": instance[:128],
        "regarding": {
            "apiVersion": api_version,
            "kind": "ResourceClaim",
            "name": claim.name,
            "namespace": claim.namespace,
            "uid": claim.uid,
        },
    }


async def post_event(
    api_client: client.ApiClient,
    claim: ResourceClaim,
    message: str,
    instance: str = "draview",
    api_version: str = "resource.k8s.io/v1",
) -> bool:
    """Create the Warning Event; False (logged) when the server refused it."""
    body = event_body(claim, message, instance, api_version)
    try:
        await client.EventsV1Api(api_client).create_namespaced_event(
            claim.namespace, cast(Any, body)
        )
        return True
    except ApiException as exc:
        if exc.status != 404:
            log.warning("cannot post Event", extra={"claim": claim.key, "status": exc.status})
            return False
    # Servers without events.k8s.io/v1: the core/v1 shape.
    now = _now_micro()
    core = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": _event_name(claim), "namespace": claim.namespace},
        "involvedObject": body["regarding"],
        "reason": REASON,
        "message": message[:MAX_NOTE],
        "type": "Warning",
        "source": {"component": CONTROLLER},
        "firstTimestamp": now[:19] + "Z",
        "lastTimestamp": now[:19] + "Z",
        "count": 1,
    }
    try:
        await client.CoreV1Api(api_client).create_namespaced_event(claim.namespace, cast(Any, core))
        return True
    except ApiException as exc:
        log.warning("cannot post Event", extra={"claim": claim.key, "status": exc.status})
        return False
