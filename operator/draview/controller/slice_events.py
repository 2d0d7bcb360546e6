"""Warning Events on the ResourceSlices of a pool with a problem, for driver authors.

Driver authors look at `kubectl describe resourceslice`, so `SliceProblemReporter` says
there what is wrong with a pool: one Warning Event per validation error of an invalid
pool (reason = its prefix) and one when a pool stays incomplete past the threshold, on
the slices that show the problem (`_targets`: for an incomplete pool, every slice of its
newest generation), once per problem, at most `per_pass` per pass (the rest come later).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from draview.controller.claim_events import CONTROLLER, MAX_NOTE, now_micro
from draview.engine.model import PoolKey
from draview.engine.pool import PoolResult
from draview.explain.steps import Steps, finish

log = logging.getLogger("draview.events")

INCOMPLETE = "PoolIncomplete"
_TOKEN = re.compile(r"[^\s,:;'\"()\[\]]+")
# Pools looked at between two steps of a pass.
POOLS_PER_STEP = 512


class HeldSlice(NamedTuple):
    """What a problem's message is matched against, for one slice of a pool."""

    uid: str
    names: set[str]  # its device and counter-set names
    current: bool  # of the pool's newest generation, the one the scheduler reads


# A pool's slices by name, or what makes them.
PoolSlices = Mapping[str, HeldSlice] | Callable[[], Mapping[str, HeldSlice]]


@dataclass(frozen=True, slots=True)
class SliceEvent:
    slice_name: str
    slice_uid: str
    reason: str
    message: str


def _targets(message: str, slices: Mapping[str, HeldSlice]) -> list[str]:
    """The slices a problem is about, where a driver author looks (`kubectl describe
    resourceslice` of what the driver just published): for an incomplete pool every
    slice of the newest generation; else the slices named outright, else those holding a
    device or counter set it names (of the newest generation when any is: an old
    generation's copy of a device is not what the scheduler reads), else the pool's
    first slice of the newest generation by name (the one carrying poolStatus)."""
    newest = sorted(n for n, held in slices.items() if held.current)
    if message.startswith(INCOMPLETE + ":") and newest:
        return newest
    tokens = set(_TOKEN.findall(message))
    named = sorted(n for n in slices if n in tokens)
    if named:
        return named
    holding = sorted(n for n, held in slices.items() if held.names & tokens)
    return [n for n in holding if slices[n].current] or holding or (newest or sorted(slices))[:1]


def pool_slices(
    result: PoolResult, unreadable: Mapping[str, str] | None = None
) -> dict[str, HeldSlice]:
    """A pool's slices by name; `unreadable` adds the slices that could not be read
    (name -> uid; of no known generation)."""
    out = {name: HeldSlice(uid, set(), False) for name, uid in (unreadable or {}).items() if uid}
    for current, group in ((True, result.pool.current), (False, result.pool.stale)):
        for s in group:
            names = {d.name for d in s.devices} | {c.name for c in s.shared_counters}
            out[s.name] = HeldSlice(s.uid, names, current)
    return out


class SliceProblemReporter:
    """Remembers the problems already posted per slice so each is sent once."""

    def __init__(
        self,
        threshold: float = 60.0,
        per_pass: int = 10,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold = threshold
        self.per_pass = per_pass
        self.clock = clock
        self.posted: set[tuple[str, str]] = set()  # (slice uid, problem)
        self.incomplete_since: dict[PoolKey, float] = {}

    def _problems(self, result: PoolResult) -> list[str]:
        problems = list(result.errors.all())
        complete = next(
            (c for c in result.status.get("conditions", []) if c["type"] == "Complete"), None
        )
        if complete is None or complete["status"] == "True":
            self.incomplete_since.pop(result.key, None)
            return problems
        since = self.incomplete_since.setdefault(result.key, self.clock())
        if self.clock() - since >= self.threshold:
            problems.append(f"{INCOMPLETE}: {complete.get('message', '')}")
        return problems

    def due(self, pools: Iterable[tuple[PoolResult, PoolSlices]]) -> list[SliceEvent]:
        """A whole pass at once (see `round`)."""
        return finish(self.round(pools))

    def round(self, pools: Iterable[tuple[PoolResult, PoolSlices]]) -> Steps[list[SliceEvent]]:
        """Events not yet posted, for (result, pool_slices(result, …)) of every pool, or
        a function that makes that, called only for a pool with a problem (most have
        none, and naming every device of every pool would be most of a pass)."""
        wanted: dict[tuple[str, str], SliceEvent] = {}
        seen: set[PoolKey] = set()
        for i, (result, of) in enumerate(pools):
            if i % POOLS_PER_STEP == 0:
                yield
            seen.add(result.key)
            problems = self._problems(result)
            slices = (of() if callable(of) else of) if problems else {}
            for problem in problems:
                reason = problem.split(":", 1)[0] if ":" in problem else "PoolInvalid"
                for name in _targets(problem, slices):
                    uid = slices[name].uid
                    wanted[(uid, problem)] = SliceEvent(name, uid, reason, problem)
        for key in set(self.incomplete_since) - seen:
            del self.incomplete_since[key]
        # A problem that went away is news again if it comes back.
        self.posted &= wanted.keys()
        fresh = [k for k in sorted(wanted) if k not in self.posted][: self.per_pass]
        self.posted.update(fresh)
        return [wanted[k] for k in fresh]


def slice_event_body(
    ev: SliceEvent, instance: str, api_version: str, namespace: str = "default"
) -> dict[str, Any]:
    """events.k8s.io/v1 Event on a cluster-scoped ResourceSlice (in `default`, where
    kubectl describe looks for events of cluster-scoped objects)."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{ev.slice_name[:200]}.{time.time_ns():x}", "namespace": namespace},
        "eventTime": now_micro(),
        "type": "Warning",
        "reason": ev.reason[:128],
        "action": "Validate",
        "note": ev.message[:MAX_NOTE],
        "reportingController": CONTROLLER,
        "reportingInstance": instance[:128],
        "regarding": {
            "apiVersion": api_version,
            "kind": "ResourceSlice",
            "name": ev.slice_name,
            "uid": ev.slice_uid,
        },
    }


async def post_slice_event(
    api_client: client.ApiClient,
    ev: SliceEvent,
    instance: str = "draview",
    api_version: str = "resource.k8s.io/v1",
) -> bool:
    """Create the Warning Event; False (logged) when the server refused it."""
    body = slice_event_body(ev, instance, api_version)
    try:
        await client.EventsV1Api(api_client).create_namespaced_event("default", cast(Any, body))
        return True
    except ApiException as exc:
        log.warning("cannot post Event", extra={"slice": ev.slice_name, "status": exc.status})
        return False
