"""Capacity probes: how many copies of a named claim fit now, kept current as claims and
slices change, in a CapacityProbe object each and as metrics.

Definitions come from ConfigMaps in the operator's namespace that carry the probes
label (probe_source.py, api/probes.py; the chart renders one from `capacityProbes:`).
They are read
again every `reload` seconds, with the ResourceClaimTemplates they name: a ConfigMap,
not a custom resource, because the chart installs draview's CRDs itself, and Helm
refuses a release whose manifests hold a resource of a kind it does not know yet; and
because who may define probes is then who may edit ConfigMaps in draview's namespace.

After each batch, a probe is asked again only when a pool it depends on was judged or
forgotten (explain/probes.py says which pools those are), or its definition, the
DeviceClasses or the profile changed. Asking is `fit` (explain/fit.py) on those pools
alone, off the event loop in a worker thread, on inputs taken on the loop and never
changed in place. Only the leader asks and writes (probe_objects.py), behind the same
fence as the status objects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import Any, cast

from kubernetes_asyncio.client.exceptions import ApiException

from draview.api.probes import ProbeProblem, ProbeSpec, workload_of
from draview.api.slices import ResourceSlice
from draview.api.taints import DeviceClass
from draview.api.workload import Workload, WorkloadError
from draview.api.world import World
from draview.cel import CelEngine
from draview.controller import metrics
from draview.controller.logs import Once
from draview.controller.probe_objects import ProbeObjects
from draview.controller.probe_source import ProbeSource, Templates, error_text
from draview.controller.queue import Role
from draview.controller.reconcile import Reconciler, Settings
from draview.controller.status_requests import StatusRequests
from draview.engine.model import AllocRef, EngineOptions, PoolKey
from draview.engine.pool import PoolResult
from draview.explain.fit import FitError, FitResult, Overgrown, fit
from draview.explain.fit_memo import FitMemo
from draview.explain.probes import (
    Answer,
    Selectors,
    every_pool,
    failed,
    pool_relevant,
    pool_signature,
    selectors,
)
from draview.explain.probes import (
    answer as answer_of,
)

log = logging.getLogger("draview.capacity")

# CEL results a probe keeps between askings (each device once per selector).
CEL_RESULTS = 500_000
# An asking of a probe that looks at no more pools to judge and nodes to search than
# this runs on the event loop (FitMemo.small): a few milliseconds at most.
SMALL = 8
# Pools looked at between two yields to the event loop.
POOLS_PER_STEP = 256
# The share of the operator's time one probe may take: asking it took t seconds, so it
# is asked again no sooner than t / SHARE after it began. Under steady claim churn in a
# large cluster a probe whose answer takes seconds would otherwise hold the GIL most of
# the time, and the status objects' batches would wait behind it.
SHARE = 0.25


@dataclass
class _Probe:
    spec: ProbeSpec
    workload: Workload | None
    error: str
    selectors: Selectors = ()
    every: bool = False  # it depends on every pool (explain/probes.every_pool)
    cel: CelEngine = field(default_factory=lambda: CelEngine(max_results=CEL_RESULTS))
    # Per pool looked at: its slices (names, generations) then, and whether it counts.
    seen: dict[PoolKey, tuple[tuple[tuple[str, int], ...], bool]] = field(default_factory=dict)
    pools: set[PoolKey] = field(default_factory=set)  # those that count
    due: bool = True
    not_before: float = 0.0  # monotonic: asked again no sooner (SHARE)
    answer: Answer | None = None
    # What asking left for asking again: per pool what it was asked with, by the
    # reconciler's result it came from (a pool not judged again hands fit the same
    # object, which is how the memo knows it), the same as fit is handed it, and fit's
    # own memo.
    judged: dict[PoolKey, _Asked] = field(default_factory=dict)
    gathered: _Gathered | None = None
    memo: FitMemo = field(default_factory=FitMemo)
    # The pools that count, sorted; None: sorted again when next asked for.
    _sorted: list[PoolKey] | None = None
    # `judged` was gathered for that list of pools; those judged or gone since.
    asked_for: list[PoolKey] | None = None
    stale: set[PoolKey] = field(default_factory=set)

    def forget(self) -> None:
        self.seen.clear()
        self.pools.clear()
        self._sorted = None
        self.judged.clear()
        self.gathered = None
        self.memo.clear()
        self.asked_for = None
        self.stale.clear()
        self.due = True

    def counted(self) -> list[PoolKey]:
        """The pools that count, sorted (again only when they changed): the same list
        while they are the same."""
        if self._sorted is None:
            self._sorted = sorted(self.pools)
        return self._sorted

    def counts(self, key: PoolKey, now: bool) -> None:
        """Whether the pool counts now."""
        if now == (key in self.pools):
            return
        self._sorted = None
        if now:
            self.pools.add(key)
        else:
            self.pools.discard(key)


@dataclass(frozen=True, slots=True)
class _Asked:
    """One pool as a probe was last asked with it: the reconciler's result (by identity:
    a new one means the pool was judged again), its judgement with status bodies, and
    the slices and allocations it was judged from, which change only with the result."""

    lean: object
    result: PoolResult | Callable[[], PoolResult]
    slices: list[ResourceSlice]
    allocations: list[AllocRef]


@dataclass(slots=True)
class _Gathered:
    """A probe's pools as fit is handed them, in the order it takes them (a place per
    pool): kept between askings and patched where pools were judged again, so that
    asking again costs the pools that changed, not a pass over every pool of the
    cluster. The asking copies the lists whole (in C) for the worker thread."""

    at: dict[PoolKey, int]
    results: list[PoolResult | Callable[[], PoolResult]]
    slices: list[list[ResourceSlice]]
    allocations: dict[PoolKey, list[AllocRef]]
    # Every pool's slices in one list, as the world fit is asked in holds them: made
    # again only when some pool's slices changed (a claim change leaves them), never
    # changed in place (the worker thread reads it).
    _flat: list[ResourceSlice] | None = None

    @classmethod
    def of(cls, judged: Mapping[PoolKey, _Asked]) -> _Gathered:
        asked = judged.values()
        return cls(
            {k: i for i, k in enumerate(judged)},
            [a.result for a in asked],
            [a.slices for a in asked],
            {k: a.allocations for k, a in judged.items()},
        )

    def put(self, key: PoolKey, asked: _Asked) -> None:
        """The pool (in its place) as asked now."""
        i = self.at[key]
        if asked.slices != self.slices[i]:  # the same objects, found in C, but for a change
            self._flat = None
        self.results[i], self.slices[i] = asked.result, asked.slices
        self.allocations[key] = asked.allocations

    def all_slices(self) -> list[ResourceSlice]:
        if self._flat is None:
            self._flat = list(chain.from_iterable(self.slices))
        return self._flat


class CapacityProbes:
    def __init__(
        self,
        role: Role,
        reconciler: Reconciler,
        requests: StatusRequests,
        settings: Settings,
    ) -> None:
        self.role = role
        self.reconciler = reconciler
        self.options: EngineOptions = settings.engine
        self.interval = settings.batch_interval
        self.probes: dict[str, _Probe] = {}
        self.problems: list[ProbeProblem] = []
        self.source: ProbeSource | None = None
        self._templates: Templates = {}
        self._classes: tuple[DeviceClass, ...] = ()
        self.once = Once(log)
        self.objects = ProbeObjects(requests, self.once)
        self._exported: set[str] = set()
        self._node_series: dict[str, set[str]] = {}
        # The series set, so that dropping one never exported costs no KeyError (a
        # probe with no minimum would raise one at every asking).
        self._live: set[tuple[Any, tuple[str, ...]]] = set()
        # Until the definitions are first read, no object is written or deleted.
        self.loaded = False
        # The batches' judgements taken at this round's start (Reconciler.take_fresh).
        self._fresh: dict[PoolKey, tuple[PoolResult, PoolResult]] = {}

    # -- definitions --------------------------------------------------------------------

    async def reload_loop(self, every: float) -> None:
        while True:
            try:
                await self.reload()
            except asyncio.CancelledError:
                raise
            except ApiException as exc:  # read again next time; said once
                why = error_text(exc)
                if exc.status == 403 and self.source is not None:
                    why = (
                        f"RBAC forbids listing ConfigMaps in {self.source.namespace} (the "
                        "chart's Role <release>-probes grants it; --capacity-probes=false "
                        "turns probes off)"
                    )
                self.once.say("read", f"cannot read capacity probe definitions: {why}")
            except Exception as exc:
                self.once.say("read", f"cannot read capacity probe definitions: {error_text(exc)}")
            await asyncio.sleep(every)

    async def reload(self) -> None:
        if self.source is None:
            return
        specs, problems, templates = await self.source.read()
        self.once.clear("read")
        self.define(specs, problems, templates)

    def define(
        self,
        specs: Mapping[str, ProbeSpec],
        problems: list[ProbeProblem],
        templates: Templates,
    ) -> None:
        """Take the definitions read: a probe whose definition or template changed
        starts over; one no longer defined goes (with its series and, once the leader
        next writes, its object)."""
        for p in problems:
            self.once.say(str(p), f"capacity probe definition skipped: {p}")
        self.problems = list(problems)
        for name in [n for n in self.probes if n not in specs]:
            del self.probes[name]
            self._unexport(name)
        for name, spec in specs.items():
            template = templates.get(spec.template) if spec.template else None
            old = self.probes.get(name)
            if (
                old is not None
                and old.spec == spec
                and (spec.template is None or self._templates.get(spec.template) == template)
            ):
                continue
            self.probes[name] = self._probe(spec, template)
        self._templates = dict(templates)
        self.loaded = True
        self._count_errors()

    def _count_errors(self) -> None:
        """Definitions that cannot be read, and probes that cannot be asked."""
        unasked = sum(
            1 for p in self.probes.values() if p.error or (p.answer and p.answer.copies is None)
        )
        metrics.CAPACITY_PROBE_ERRORS.set(len(self.problems) + unasked)

    def _probe(self, spec: ProbeSpec, template: Any) -> _Probe:
        try:
            return _Probe(spec, workload_of(spec, template), "")
        except WorkloadError as exc:
            self.once.say(f"{spec.name}:{exc}", f"capacity probe {spec.name}: {exc}")
            return _Probe(spec, None, str(exc))

    # -- asking -------------------------------------------------------------------------

    async def run(self) -> None:
        """After each batch interval: ask the probes that are due and write what changed."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.round()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("capacity probe round failed")

    async def round(self) -> None:
        if not self.role.leader or not self.role.synced:
            if self.objects.held is not None or self._exported:
                self.step_down()
            self.reconciler.keep_fresh = False
            self.reconciler.take_fresh()
            return
        try:
            await self._round()
        finally:
            self._fresh = {}  # held for one round: a later one judges what it needs

    async def _round(self) -> None:
        if not self.loaded:
            return
        if self.objects.held is None and await self.objects.load():
            for p in self.probes.values():
                p.due = True  # what the objects hold is known: every answer goes to them
        await self._mark_due()
        for name, probe in list(self.probes.items()):
            if not probe.due or self.probes.get(name) is not probe:
                continue
            began = time.monotonic()
            if began < probe.not_before:
                continue  # still due: asked in a later round
            probe.due = False
            probe.answer = await self._ask(probe)
            took = time.monotonic() - began
            probe.not_before = began + took / SHARE
            if self.probes.get(name) is not probe:
                continue  # defined anew or gone while it was asked: not this answer
            self._export(name, probe)
        wanted = {
            name: (p.spec.spec(), dict(p.answer.status))
            for name, p in self.probes.items()
            if p.answer is not None
        }
        await self.objects.write(wanted, lambda name: name in self.probes)

    async def _mark_due(self) -> None:
        rec = self.reconciler
        store = rec.store
        touched = rec.take_touched()
        rec.keep_fresh = bool(self.probes)
        self._fresh = rec.take_fresh()
        classes = tuple(store.classes.values())
        if classes != self._classes:  # selectors may differ: every pool looked at anew
            self._classes = classes
            for p in self.probes.values():
                p.forget()
        by_name = {c.name: c for c in classes}
        for p in self.probes.values():
            if p.workload is None:
                continue
            if not p.seen:  # new, or started over: every pool is looked at once
                p.selectors = selectors(p.workload, by_name)
                p.every = every_pool(p.workload)
                keys: list[PoolKey] = list(rec.results)
            else:
                keys = list(touched)
            for i, key in enumerate(keys):
                if self._counts(p, key):
                    p.due = True
                    p.stale.add(key)
                if i % POOLS_PER_STEP == POOLS_PER_STEP - 1:
                    await asyncio.sleep(0)  # a new probe in a large cluster: let others run

    def _counts(self, p: _Probe, key: PoolKey) -> bool:
        """Whether the pool counts for the probe now, or did before (either way its
        change may change the answer); remembers which."""
        rec = self.reconciler
        slices = rec.store.slices_of(key)
        result = rec.results.get(key)
        was = key in p.pools
        if not slices or result is None:
            p.seen.pop(key, None)
            p.counts(key, False)
            return was
        signature = pool_signature(slices)
        seen = p.seen.get(key)
        if seen is not None and seen[0] == signature:
            counts = seen[1]
        else:
            counts = p.every or pool_relevant(p.selectors, slices, p.cel)
            p.seen[key] = (signature, counts)
        # A pool some node's allocator aborts on counts whatever it holds.
        if counts or result.errors.allocator:
            p.counts(key, True)
            return True
        p.counts(key, False)
        return was

    async def _ask(self, p: _Probe) -> Answer:
        """The probe's answer now. Asked after _mark_due, which notes the pools judged
        since the last asking (`stale`): only those are looked at again."""
        profile = self.options.profile.label()
        if p.workload is None:
            return failed(p.error, profile)
        rec = self.reconciler
        fresh, gathered, moved = self._gather(p)
        world = rec.world(gathered.all_slices(), self._classes)
        began = time.perf_counter()
        try:
            found: FitResult | None = None
            if (
                moved is not None
                and p.spec.max_copies is None  # a count places every later group again
                and len(fresh) <= SMALL
                and p.memo.small(moved, SMALL)
            ):
                # Asked here, on the event loop: in the worker thread the memo is read
                # through another core's cache, and the hand-over cost as much as such
                # an asking. One that turns out larger goes to the worker anew.
                with contextlib.suppress(Overgrown):
                    found = _fit(world, p, self.options, fresh, None, moved, small=True)
            if found is None:
                found = await asyncio.to_thread(
                    _fit, world, p, self.options, fresh, p.spec.max_copies, moved
                )
        except BaseException as exc:
            # Perhaps half judged: the next asking gathers every pool again.
            p.judged, p.gathered, p.asked_for = {}, None, None
            if isinstance(exc, FitError):
                return failed(str(exc), profile)
            if not isinstance(exc, Exception):
                raise
            # A bug met by one probe: the others go on.
            log.exception("capacity probe failed", extra={"probe": p.spec.name})
            return failed(f"draview could not answer: {error_text(exc)}", profile)
        metrics.CAPACITY_SECONDS.observe(time.perf_counter() - began)
        log.debug(
            "capacity probe asked",
            extra={"probe": p.spec.name, "copies": found.copies, "pools": len(p.judged)},
        )
        return answer_of(found, profile, p.spec.node_series)

    def _gather(self, p: _Probe) -> tuple[list[PoolKey], _Gathered, list[PoolKey] | None]:
        """The pools the probe counts on, as fit is to be handed them, kept in the probe:
        the pools judged since the last asking (`stale`) put in place, or every pool when
        the pools that count changed; those to be judged in the worker (`fresh`); and
        those judged again, when no pool came or went and their slices are the same
        (None otherwise)."""
        rec = self.reconciler
        store = rec.store
        keys = p.counted()
        old = p.judged
        gathered = p.gathered
        if keys is p.asked_for and gathered is not None and all(k in old for k in p.stale):
            # The same pools count: only those judged since are looked at again, in
            # place (a pool no longer judged drops out; one judged anew would need its
            # place in order).
            judged, todo = old, sorted(p.stale)
        else:
            judged, todo, gathered = {}, keys, None
        fresh: list[PoolKey] = []
        moved: list[PoolKey] | None = [] if gathered is not None else None
        for k in todo:
            lean = rec.results.get(k)
            kept = old.get(k)
            if kept is None or kept.lean is not lean:
                whole = self._fresh.get(k)
                again: PoolResult | Callable[[], PoolResult] | None
                if whole is not None and whole[0] is lean:
                    again = whole[1]  # the batch's own judgement
                else:
                    again = rec.judge_again(k)
                    fresh.append(k)
                if again is None:
                    if judged.pop(k, None) is not None:
                        gathered = None  # its place goes: gathered anew below
                    moved = None
                    continue
                asked = _Asked(lean, again, store.slices_of(k), store.allocations_of(k))
                if moved is not None:
                    if kept is None or kept.slices != asked.slices:
                        moved = None
                    else:
                        moved.append(k)
                kept = asked
            judged[k] = kept
            if gathered is not None:
                gathered.put(k, kept)
        if gathered is None:
            gathered = _Gathered.of(judged)
        p.judged, p.gathered, p.asked_for, p.stale = judged, gathered, keys, set()
        return fresh, gathered, moved

    # -- publishing ---------------------------------------------------------------------

    def _export(self, name: str, p: _Probe) -> None:
        a = p.answer
        if a is None:
            return
        self._exported.add(name)
        self._put(metrics.CAPACITY_FIT_MIN, p.spec.min_copies, name)
        if a.copies is None:
            for g in (metrics.CAPACITY_FIT, metrics.CAPACITY_FIT_MAX, metrics.CAPACITY_FIT_BOUNDED):
                self._drop(g, name)
        else:
            self._put(metrics.CAPACITY_FIT, a.copies, name)
            self._put(metrics.CAPACITY_FIT_BOUNDED, int(a.bounded), name)
            self._put(metrics.CAPACITY_FIT_MAX, a.max_copies, name)
        nodes = dict(a.per_node)
        for gone in self._node_series.get(name, set()) - nodes.keys():
            self._drop(metrics.CAPACITY_NODE_FIT, name, gone)
        for node, copies in nodes.items():
            self._put(metrics.CAPACITY_NODE_FIT, copies, name, node)
        self._node_series[name] = set(nodes)
        self._count_errors()

    def _put(self, gauge: Any, value: float | None, *labels: str) -> None:
        """The series set to `value`, or dropped when it is None."""
        if value is None:
            self._drop(gauge, *labels)
            return
        gauge.labels(*labels).set(value)
        self._live.add((gauge, labels))

    def _drop(self, gauge: Any, *labels: str) -> None:
        if (gauge, labels) in self._live:
            self._live.discard((gauge, labels))
            gauge.remove(*labels)

    def _unexport(self, name: str) -> None:
        for g in (
            metrics.CAPACITY_FIT,
            metrics.CAPACITY_FIT_MAX,
            metrics.CAPACITY_FIT_BOUNDED,
            metrics.CAPACITY_FIT_MIN,
        ):
            self._drop(g, name)
        for node in self._node_series.pop(name, set()):
            self._drop(metrics.CAPACITY_NODE_FIT, name, node)
        self._exported.discard(name)

    def step_down(self) -> None:
        """No longer the leader: the new one asks, writes and exports."""
        for name in list(self._exported):
            self._unexport(name)
        self.objects.forget()
        for p in self.probes.values():
            p.forget()
            p.answer = None


def _fit(
    world: World,
    p: _Probe,
    options: EngineOptions,
    fresh: list[PoolKey],
    count: int | None,
    moved: list[PoolKey] | None,
    small: bool = False,
) -> FitResult:
    """In a worker thread, or on the event loop when `small`: the pools judged again
    (`fresh`; every other pool's judgement was made at an earlier asking), then fit
    with the probe's memo (one asking at a time: the probe is not touched meanwhile),
    told which pools were judged again since (`moved`, when _gather knows). On the
    loop it is handed the kept lists themselves; the worker thread gets copies."""
    assert p.workload is not None and p.gathered is not None
    judged, gathered = p.judged, p.gathered
    for key in fresh:
        asked = judged[key]
        if not isinstance(asked.result, PoolResult):
            asked = judged[key] = replace(asked, result=asked.result())
            gathered.put(key, asked)
    return fit(
        world,
        p.workload,
        options,
        count=count,
        results=cast(list[PoolResult], gathered.results if small else list(gathered.results)),
        cel=p.cel,
        allocations=gathered.allocations if small else dict(gathered.allocations),
        memo=p.memo,
        small=small,
        changed=moved,
    )
