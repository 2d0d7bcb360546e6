"""Warning Events on ResourceClaims that stay unallocated, saying why.

`PendingClaimExplainer.due()` is pure apart from the clock: given the store's claims, the
computed pools and the DeviceClasses, it returns the claims that need a new Event — a
claim pending longer than the threshold whose explanation changed since the last Event
(at most one Event per change). `post_event()` writes it with events.k8s.io/v1, falling
back to core/v1 on servers without it.

Driver authors look at `kubectl describe resourceslice`, so `SliceProblemReporter` does
the same for pools: one Warning Event per validation error of an invalid pool (reason =
its prefix) and one when a pool stays incomplete past the threshold, on the slices that
show the problem (`_targets`: for an incomplete pool, every slice of its newest
generation), once per problem, at most `per_pass` per pass (the rest come later).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Generator, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple, cast

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from draview.api.claims import ResourceClaim
from draview.api.taints import DeviceClass, DeviceTaintRule
from draview.engine.model import PoolKey
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


# -- Events on ResourceSlices ---------------------------------------------------------

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
        "eventTime": _now_micro(),
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
