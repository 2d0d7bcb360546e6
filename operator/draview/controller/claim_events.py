"""Warning Events on ResourceClaims that stay unallocated, saying why.

`PendingClaimExplainer.due()` is pure apart from the clock: given the store's claims, the
computed pools and the DeviceClasses, it returns the claims that need a new Event — a
claim pending longer than the threshold whose explanation changed since the last Event
(at most one Event per change). `post_event()` writes it with events.k8s.io/v1, falling
back to core/v1 on servers without it. The Events on slices are slice_events.py's;
event_rounds.py runs both on the event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Hashable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from draview.api.claims import ResourceClaim
from draview.api.taints import DeviceClass, DeviceTaintRule
from draview.engine.pool import PoolResult
from draview.explain import Catalog, Explainer
from draview.explain.steps import Steps, finish

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


# The pools an explanation reads: as a list (built into a catalog for the round) or a
# catalog, or a function that makes either, or the steps that bring a catalog up to date.
Pools = Sequence[PoolResult] | Catalog
Results = Pools | Callable[[], Pools | Steps[Catalog]]


class PendingClaimExplainer:
    """Remembers the last explanation sent per claim so each change is sent once.

    Explaining a claim searches every node (the allocator's own search), so a round's
    cost is pending claims x devices, seconds of CPU in a large cluster, which must not
    hold the operator's event loop. So a round is skipped when nothing an
    explanation reads has changed since every due claim was explained (`version`), and
    stops after `budget` seconds, the rest of the claims explained in the next rounds
    (claims never explained first, then on from where the last round stopped). Claims
    that ask for the same devices (the same requests and constraints: pods of one
    template) are explained once per round. A round is made in steps (`round`), so that
    the operator lets other work run in between."""

    def __init__(
        self,
        threshold: float = 60.0,
        explainer: Explainer | None = None,
        clock: Callable[[], float] = time.time,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold = threshold
        self.explainer = explainer or Explainer()
        self.clock = clock
        self.timer = timer
        self.last: dict[str, str] = {}
        self._settled: Hashable | None = None  # the version every due claim was explained at
        self._cursor = ""  # the key of the last claim explained

    def due(
        self,
        claims: Iterable[ResourceClaim],
        results: Results,
        classes: Iterable[DeviceClass],
        rules: Sequence[DeviceTaintRule] = (),
        version: Hashable | None = None,
        budget: float | None = None,
    ) -> list[tuple[ResourceClaim, str]]:
        """A whole round at once (see `round`)."""
        return finish(self.round(claims, results, classes, rules, version, budget))

    def round(
        self,
        claims: Iterable[ResourceClaim],
        results: Results,
        classes: Iterable[DeviceClass],
        rules: Sequence[DeviceTaintRule] = (),
        version: Hashable | None = None,
        budget: float | None = None,
    ) -> Steps[list[tuple[ResourceClaim, str]]]:
        """The claims due a new Event, with it. `results`: the pools, or the steps that
        bring a catalog of them up to date (asked only when some claim is to be
        explained). `version`: changes whenever pools, claims, classes or rules do (None:
        always explain); `budget`: seconds of explaining per round (None: every due
        claim)."""
        pending = self._pending(claims)
        if not pending:
            self._settled = version
            return []
        last = self.last
        if (
            version is not None
            and version == self._settled
            and all(claim_key(c) in last for c in pending)
        ):
            return []  # every due claim's explanation is still what was last sent
        if callable(results):
            made = results()
            results = (yield from made) if isinstance(made, Generator) else made
        catalog = results if isinstance(results, Catalog) else Catalog.build(results, rules)
        by_name = {c.name: c for c in classes}
        out: list[tuple[ResourceClaim, str]] = []
        started = self.timer()
        done = 0
        # (verdict, summary) per kind of claim: what explaining a claim says depends only
        # on what it asks for (its name appears nowhere in it), and costs no budget again.
        same: dict[str, tuple[str, str]] = {}
        for claim in self._order(pending):
            kind = claim.model_dump_json(include={"requests", "constraints"})
            found = same.get(kind)
            if found is None:
                if budget is not None and done and self.timer() - started > budget:
                    break
                found = yield from self._explain(claim, catalog, by_name, rules)
                same[kind] = found
            verdict, summary = found
            done += 1
            self._cursor = claim.key
            key = claim_key(claim)
            if last.get(key) == summary:
                continue
            last[key] = summary
            if verdict in WARN_VERDICTS:
                out.append((claim, summary))
        self._settled = version if done == len(pending) else None
        return out

    def _pending(self, claims: Iterable[ResourceClaim]) -> list[ResourceClaim]:
        """Unallocated claims past the threshold; forgets the rest."""
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
        return pending

    def _explain(
        self,
        claim: ResourceClaim,
        catalog: Catalog,
        classes: Mapping[str, DeviceClass],
        rules: Sequence[DeviceTaintRule],
    ) -> Steps[tuple[str, str]]:
        """(verdict, summary) of the claim's explanation."""
        exp = yield from self.explainer.explain_steps(
            claim,
            catalog.devices,
            classes,
            results=catalog.results.values(),
            rules=rules,
            gather=catalog.gather,
            shaky=catalog.shaky,
        )
        return exp.verdict, exp.summary

    def _order(self, pending: list[ResourceClaim]) -> list[ResourceClaim]:
        """Claims never explained first, then on from the one explained last."""
        ordered = sorted(pending, key=lambda c: c.key)
        fresh = [c for c in ordered if claim_key(c) not in self.last]
        known = [c for c in ordered if claim_key(c) in self.last]
        after = [c for c in known if c.key > self._cursor]
        return fresh + after + known[: len(known) - len(after)]


def now_micro() -> str:
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
        "eventTime": now_micro(),
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
    now = now_micro()
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
