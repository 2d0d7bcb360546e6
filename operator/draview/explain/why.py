"""Explain an unallocated claim the way the scheduler's allocator would decide it."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from draview.api.claims import Constraint, DeviceChoice, ResourceClaim
from draview.api.taints import DeviceClass, DeviceTaintRule
from draview.cel import LISTS_EXPOSED, CelCompileError, CelEngine, CelRuntimeError, EvalResult
from draview.engine.aborts import ABORTS, MAY_ABORT
from draview.engine.model import PoolKey
from draview.engine.node_match import device_reaches
from draview.engine.pool import PoolResult
from draview.engine.validate import CounterKey
from draview.explain.allocatable import Allocatability, allocatable_steps, judged_with
from draview.explain.checks import capacity_problem, taint_text, untolerated
from draview.explain.chunked import Chunked
from draview.explain.constraints import Attributes, list_mode
from draview.explain.gather import Assignment, GatherIndex
from draview.explain.index import DeviceIndex, IndexedDevice, PoolDevices
from draview.explain.joined import Joined, JoinedMap
from draview.explain.model import ChoiceExplanation, ClaimExplanation, RequestExplanation
from draview.explain.places import changed_places
from draview.explain.steps import Steps, finish

NETWORK = ""  # devices not bound to one node: reachable from any node they select
# Devices looked at between two steps (explain/steps.py): a selector evaluated for the
# first time costs about a millisecond a device.
DEVICES_PER_STEP = 32
# A kept fold is patched where at most one device in this many is judged again; beyond,
# each patch's inserts cost more than folding the pool anew.
PATCHED_AT_MOST = 4
# What a device's selectors answer, as a fold keeps it (PoolDevices.checks); _ASK: an
# error, evaluated again where met.
_MISSES, _MATCHES, _ASK = 0, 1, 2

# Reasons as they appear in output, most telling first when summarising.
REASON_ORDER = (
    "CELRuntimeError",
    "Allocated",
    "InsufficientSharedCapacity",
    "Tainted",
    "CapacityTooSmall",
    "NodeUnreachable",
    "PoolIncomplete",
    "PoolInvalid",
    ABORTS,
    MAY_ABORT,
    "StaleGeneration",
    "CapacitySourceInUse",
    "CompatibilityGroupConflict",
    "PartitionableDevicesDisabled",
    "SliceHoldsCounterSets",
    "BindingConditionsDisabled",
    "CompatibilityGroupsDisabled",
    "OptionalNodeOperationsDisabled",
    "NodeLacksOptionalNodeOperations",
)


# Device states whose reason is the whole story, whatever the request asks.
_STATE_REASONS = frozenset(
    {
        "PoolInvalid",
        "PoolIncomplete",
        "StaleGeneration",
        "CapacitySourceInUse",
        "PartitionableDevicesDisabled",
        "SliceHoldsCounterSets",
        "BindingConditionsDisabled",
        "CompatibilityGroupsDisabled",
        "CompatibilityGroupConflict",
        "OptionalNodeOperationsDisabled",
        "NodeLacksOptionalNodeOperations",
        ABORTS,
        MAY_ABORT,
    }
)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


@dataclass(frozen=True, slots=True)
class _Asked:
    """What one request choice is judged against: its selectors (its DeviceClass's and
    its own), the index, the node asked about (None: any) and its labels, and how CEL
    exposes list attributes."""

    selectors: tuple[str, ...]
    choice: DeviceChoice
    index: DeviceIndex
    node: str | None
    labels: Mapping[str, str]
    lists: str


@dataclass(slots=True)
class _Fold:
    """Devices judged for one request choice, in walk order: the whole walk's, or one
    pool's, to be added to the others' in the index's order."""

    matched: int = 0
    free: list[str] = field(default_factory=list)
    blocked: dict[str, list[str]] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)
    runtime_errors: dict[str, str] = field(default_factory=dict)
    per_node: dict[str, int] = field(default_factory=dict)  # free devices by node
    # A pool's fold kept by a probe: what became of each device (_SKIPPED, _FREE,
    # _ERRED, or its blocker's reason code), so that folding the pool again after a few
    # of its devices changed reads the others back (Explainer._fold). None: not kept,
    # or two devices of the pool share an id (their details would be mixed up).
    codes: bytearray | None = None


# Reason codes of a kept fold (_Fold.codes): what became of a device, or why it is
# blocked, as an index into _REASONS past _BLOCKED. The reasons are the few dozen
# `_blocker` and the pool checks name: they fit a byte.
_SKIPPED, _FREE, _ERRED, _BLOCKED = 0, 1, 2, 3
_REASONS: list[str] = []
_REASON_CODES: dict[str, int] = {}


_REASONS_LOCK = threading.Lock()  # probes and reviews fold in worker threads


def _reason_code(reason: str) -> int:
    found = _REASON_CODES.get(reason)
    if found is None:
        with _REASONS_LOCK:
            found = _REASON_CODES.get(reason)
            if found is None:
                # Listed before its code is handed out: a code read back always names it.
                _REASONS.append(reason)
                found = _REASON_CODES[reason] = _BLOCKED + len(_REASONS) - 1
    return found


@dataclass(frozen=True, slots=True)
class _Readable:
    """A pool's last index entry's devices and the codes and fold made of them, and the
    counters whose left changed since (a device that debits one is judged again)."""

    devices: Sequence[IndexedDevice]
    codes: bytearray
    fold: _Fold
    moved: frozenset[CounterKey]


def _readable(before: tuple[PoolDevices, _Fold] | None, pool: PoolDevices) -> _Readable | None:
    """What the pool's last fold can be patched from: the same slices (whose selector
    answers the caller knows) and as many devices; None otherwise."""
    if before is None:
        return None
    entry, fold = before
    if (
        fold.codes is None
        or entry.checks is not pool.checks
        or len(entry.devices) != len(pool.devices)
    ):
        return None
    was, now = entry.remaining, pool.remaining
    moved: frozenset[CounterKey] = frozenset()
    if was is not now and was != now:
        moved = frozenset(k for k in was.keys() | now.keys() if was.get(k) != now.get(k))
    return _Readable(entry.devices, fold.codes, fold, moved)


def _to_judge(pool: PoolDevices, kept: _Readable) -> list[int]:
    """The places of the devices to judge again: those not the same object as in the
    kept entry (found in C), and those that debit from a counter set some counter of
    which has another left (PoolDevices.debiting)."""
    redo = list(changed_places(pool.devices, kept.devices))
    if kept.moved:
        redo = sorted(pool.debiting({ckey[0] for ckey in kept.moved}).union(redo))
    return redo


@dataclass(frozen=True, slots=True)
class _Total:
    """The folds of all pools for one request choice, added up (device lists joined)."""

    matched: int
    free: Sequence[str]
    blocked: dict[str, Sequence[str]]
    details: Mapping[str, str]
    runtime_errors: dict[str, str]
    per_node: dict[str, int]


_NONE: list[str] = []  # a pool's place in a reason's lists when it has none: never grown


@dataclass(slots=True)
class _Standing:
    """Every pool's fold for one request choice, in lists aligned with the index's pools:
    a probe asked again after a few pools were folded again patches their places, where
    adding up a thousand folds would cost more than folding the pools that changed."""

    keys: list[PoolKey]
    entries: list[PoolDevices]  # the index entry each part was folded from
    parts: list[_Fold]
    at: dict[PoolKey, int] = field(default_factory=dict)  # a pool's place in `keys`
    # The index the entries were last taken from, its shape and how far its log went
    # then (DeviceIndex.log): asked again of it, only the pools logged since are looked at.
    index: DeviceIndex | None = None
    shape: int = -1
    logged: int = 0
    matched: int = 0
    # Handed out in each total (Chunked: a snapshot costs a pointer per 32 pools).
    free: Chunked[list[str]] = field(default_factory=Chunked)
    free_len: int = 0
    blocked: dict[str, Chunked[list[str]]] = field(default_factory=dict)
    blocked_len: dict[str, int] = field(default_factory=dict)
    details: Chunked[Mapping[str, str]] = field(default_factory=Chunked)
    details_len: int = 0
    # Added up again whenever a part that has some changes (rare): their order counts.
    runtime_errors: dict[str, str] = field(default_factory=dict)
    per_node: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, keys: list[PoolKey], entries: list[PoolDevices], parts: list[_Fold]) -> _Standing:
        n = len(parts)
        st = cls(
            keys,
            entries,
            list(parts),
            {k: i for i, k in enumerate(keys)},
            free=Chunked([_NONE] * n),
            details=Chunked([{}] * n),
        )
        for i, part in enumerate(parts):
            st.put(i, part, None)
        st.add_up_the_rest()
        return st

    def put(self, i: int, part: _Fold, before: _Fold | None) -> None:
        """Pool i's fold is `part` now, in place of `before`."""
        if before is not None:
            self.matched -= before.matched
            self.free_len -= len(before.free)
            self.details_len -= len(before.details)
            for reason, ids in before.blocked.items():
                self.blocked_len[reason] -= len(ids)
                self.blocked[reason][i] = _NONE
        self.parts[i] = part
        self.matched += part.matched
        self.free[i] = part.free
        self.free_len += len(part.free)
        self.details[i] = part.details
        self.details_len += len(part.details)
        for reason, ids in part.blocked.items():
            if reason not in self.blocked:
                self.blocked[reason] = Chunked([_NONE] * len(self.parts))
                self.blocked_len[reason] = 0
            self.blocked[reason][i] = ids
            self.blocked_len[reason] += len(ids)

    def add_up_the_rest(self) -> None:
        """Runtime errors and free devices by node, in the pools' order (new maps: the
        totals handed out before keep theirs)."""
        errors: dict[str, str] = {}
        per_node: dict[str, int] = {}
        for part in self.parts:
            errors.update(part.runtime_errors)
            for where, n in part.per_node.items():
                per_node[where] = per_node.get(where, 0) + n
        self.runtime_errors, self.per_node = errors, per_node

    def total(self) -> _Total:
        # Joined, not copied: every device of the world is in some list and every
        # blocked one has its detail. The lists of parts are snapshots, so that a total
        # handed out stays as it was.
        return _Total(
            self.matched,
            Joined(self.free.snapshot(), self.free_len),
            {
                reason: Joined(parts.snapshot(), self.blocked_len[reason])
                for reason, parts in self.blocked.items()
                if self.blocked_len[reason]
            },
            JoinedMap(self.details.snapshot(), self.details_len),
            self.runtime_errors,
            self.per_node,
        )


@dataclass(slots=True)
class _Patched:
    """A kept fold's lists, copied to be patched where devices were judged again
    (Explainer._patch): a device's place in its list is counted in C over the codes
    of the devices before it, which are in device order as the lists are."""

    free: list[str]
    blocked: dict[str, list[str]]
    details: dict[str, str]
    errors: dict[str, str]  # by name; put in device order by the caller
    matched: int

    @classmethod
    def of(cls, fold: _Fold) -> _Patched:
        return cls(
            list(fold.free),
            {reason: list(ids) for reason, ids in fold.blocked.items()},
            dict(fold.details),
            dict(fold.runtime_errors),
            fold.matched,
        )

    def take(self, codes: bytearray, i: int, name: str) -> None:
        """Device i, as its code says, out of the list it is in."""
        was = codes[i]
        if was == _FREE:
            del self.free[codes.count(_FREE, 0, i)]
        elif was >= _BLOCKED:
            reason = _REASONS[was - _BLOCKED]
            ids = self.blocked[reason]
            del ids[codes.count(was, 0, i)]
            if not ids:
                del self.blocked[reason]
            self.details.pop(name, None)
        if was == _FREE or was >= _BLOCKED:
            self.matched -= 1

    def put(self, codes: bytearray, i: int, name: str, text: str | None) -> None:
        """Device i, as its code now says, into its place in its list (`text`: the
        error or the blocker's detail)."""
        code = codes[i]
        if code == _FREE:
            self.free.insert(codes.count(_FREE, 0, i), name)
        elif code == _ERRED:
            self.errors[name] = cast(str, text)
        elif code >= _BLOCKED:
            ids = self.blocked.setdefault(_REASONS[code - _BLOCKED], [])
            ids.insert(codes.count(code, 0, i), name)
            if text is not None:
                self.details[name] = text
        if code == _FREE or code >= _BLOCKED:
            self.matched += 1


class Explainer:
    """Reusable across claims and batches: CEL programs and per-device results are cached.
    `keep_folds`: keep each pool's fold per request choice, keyed by the index entry it
    came from, so that explaining again after a few pools were indexed again walks only
    those (fit's FitMemo); `read_back`: and what became of each device, so that a pool
    folded again reads back the devices that did not change."""

    def __init__(
        self, cel: CelEngine | None = None, keep_folds: bool = False, read_back: bool = True
    ) -> None:
        self.cel = cel or CelEngine()
        # Per request choice (by what a fold depends on but the devices): every pool's fold.
        self._standing: dict[object, _Standing] | None = {} if keep_folds else None
        # Kept folds note what became of each device, to be read back when their pool
        # is folded again; not for a question asked once (`fit` without a memo).
        self._codes = keep_folds and read_back
        self._dumps: dict[int, tuple[DeviceChoice, str]] = {}  # _dumped

    # -- one device --------------------------------------------------------------------
    def _blocker(
        self,
        d: IndexedDevice,
        choice: DeviceChoice,
        pool: PoolDevices,
        fractional: bool,
        node: str | None,
        labels: Mapping[str, str],
    ) -> tuple[str, str] | None:
        """(reason, detail) when the device cannot serve this choice, else None."""
        st = d.status
        state, reason = st["state"], st.get("stateReason")
        if node is not None and not device_reaches(d.slice, d.device, node, labels):
            return "NodeUnreachable", f"not reachable from node {node}"
        if reason in _STATE_REASONS:
            return str(reason), str(reason)
        if state == "Allocated" and not choice.admin_access:
            held = st.get("allocations", [])
            if len(held) == 1 and not held[0].get("adminAccess"):  # most devices
                return (
                    "Allocated",
                    f"allocated to {held[0]['claimNamespace']}/{held[0]['claimName']}",
                )
            claims = ", ".join(
                f"{a['claimNamespace']}/{a['claimName']}" for a in held if not a.get("adminAccess")
            )
            return "Allocated", f"allocated to {claims}" if claims else "allocated"
        blocking = untolerated(d.taints, choice.tolerations) if d.taints else None
        if blocking:
            return "Tainted", "taint " + ", ".join(taint_text(t) for t in blocking) + (
                " not tolerated"
            )
        if (
            state not in ("Allocated", "PartiallyAllocated")
            and not choice.admin_access
            # The engine's verdict first: most devices a fit's copies leave behind.
            and (reason == "InsufficientSharedCapacity" or not pool.counters_fit(d))
        ):
            return "InsufficientSharedCapacity", "shared counters left are too small"
        if choice.capacity_requests:
            shareable = d.device.allow_multiple_allocations
            problem = capacity_problem(
                d.device,
                d.driver,
                choice.capacity_requests,
                st.get("availableCapacity", {}) if shareable else None,
                fractional,
            )
            if problem is not None:
                return "CapacityTooSmall", problem
        return None

    # -- one request or subrequest -------------------------------------------------------
    def _choice_steps(
        self,
        label: str,
        choice: DeviceChoice,
        classes: Mapping[str, DeviceClass],
        index: DeviceIndex,
        node: str | None,
        labels: Mapping[str, str] | None,
        lists: str = LISTS_EXPOSED,
    ) -> Steps[ChoiceExplanation]:
        out = ChoiceExplanation(
            request=label,
            device_class=choice.device_class_name,
            allocation_mode=choice.allocation_mode,
            count=choice.count,
            admin_access=choice.admin_access,
            selectors=list(choice.selectors),
        )
        cls = classes.get(choice.device_class_name)
        if cls is None:
            out.error = f"DeviceClass {choice.device_class_name!r} not found"
            out.reason = out.error
            return out
        selectors = (*cls.selectors, *choice.selectors)
        try:
            for expr in selectors:
                self.cel.compile(expr)
        except CelCompileError as exc:
            out.error = f"selector does not compile: {exc}"
            out.reason = out.error
            return out
        asked = _Asked(selectors, choice, index, node, labels or {}, lists)
        if self._standing is None:
            fold = _Fold()
            for pool in index.pools.values():
                yield from self._fold(fold, pool, asked)
            total = _Total(
                fold.matched,
                fold.free,
                dict(fold.blocked),
                fold.details,
                fold.runtime_errors,
                fold.per_node,
            )
        else:
            total = yield from self._kept(asked)
        out.matched, out.free, out.blocked = total.matched, total.free, total.blocked
        out.details, out.runtime_errors = total.details, total.runtime_errors
        self._decide(out, total.per_node, node)
        return out

    def _kept(self, asked: _Asked) -> Steps[_Total]:
        """The pools' folds added up in index order, each folded again only when its
        index entry changed since it was kept."""
        assert self._standing is not None
        index = asked.index
        # Everything a pool's fold depends on but its devices.
        same = (
            self._dumped(asked.choice),
            asked.selectors,
            asked.node,
            tuple(sorted(asked.labels.items())),
            asked.lists,
            index.fractional,
        )
        st = self._standing.get(same)
        places: list[int]
        if st is not None and st.index is index and st.shape == index.shape:
            # The same pools: those whose entries were replaced since are logged.
            places = sorted({st.at[k] for k in index.log[st.logged :]})
            entries = [index.pools[st.keys[i]] for i in places]
        else:
            keys, entries = list(index.pools), list(index.pools.values())
            if st is None or st.keys != keys:
                st = self._standing[same] = yield from self._folded_anew(asked, keys, entries, st)
                st.index, st.shape, st.logged = index, index.shape, len(index.log)
                return st.total()
            places = list(changed_places(entries, st.entries))
            entries = [entries[i] for i in places]
        st.index, st.shape, st.logged = index, index.shape, len(index.log)
        rest = False
        for i, pool in zip(places, entries, strict=True):
            if pool is st.entries[i]:
                continue  # replaced and put back
            part = _Fold()
            before = st.parts[i]
            yield from self._fold(part, pool, asked, (st.entries[i], before))
            # The maps added up in order: only a pool whose own differ changes them.
            rest = rest or (
                list(before.per_node.items()) != list(part.per_node.items())
                or list(before.runtime_errors.items()) != list(part.runtime_errors.items())
            )
            st.entries[i] = pool
            st.put(i, part, before)
        if rest:
            st.add_up_the_rest()
        return st.total()

    def _folded_anew(
        self,
        asked: _Asked,
        keys: list[PoolKey],
        entries: list[PoolDevices],
        st: _Standing | None,
    ) -> Steps[_Standing]:
        """Every pool's fold, where pools came or went: a pool whose index entry is the
        one kept keeps its fold."""
        kept: dict[PoolKey, tuple[PoolDevices, _Fold]] = {}
        if st is not None:
            kept = {k: (st.entries[i], st.parts[i]) for i, k in enumerate(st.keys)}
        parts = []
        for key, pool in zip(keys, entries, strict=True):
            hit = kept.get(key)
            if hit is None or hit[0] is not pool:
                part = _Fold()
                yield from self._fold(part, pool, asked, hit)
                hit = (pool, part)
            parts.append(hit[1])
        return _Standing.of(keys, entries, parts)

    def _dumped(self, choice: DeviceChoice) -> str:
        """The choice as JSON (part of what a kept fold is keyed by), made once per
        choice object: a probe asks the same ones at every asking."""
        hit = self._dumps.get(id(choice))
        if hit is None or hit[0] is not choice:
            if len(self._dumps) >= 64:
                self._dumps.clear()
            hit = self._dumps[id(choice)] = (choice, choice.model_dump_json())
        return hit[1]

    def _fold(
        self,
        out: _Fold,
        pool: PoolDevices,
        asked: _Asked,
        before: tuple[PoolDevices, _Fold] | None = None,
    ) -> Steps[None]:
        """Judge the pool's devices for the choice into `out`, in their order. `before`:
        the pool's last index entry and its fold for the same choice, kept (`_kept`):
        when only a few devices may have changed, that fold is patched where they are
        (`_patch`)."""
        match = self.cel.matcher(asked.selectors, asked.lists)
        # What the selectors answer for each device, learnt by the first fold of the
        # pool's slices and kept with them (PoolDevices.checks): a pool folded again
        # after a claim change looks it up.
        checks, key = pool.checks, (asked.selectors, asked.lists)
        known = checks.get(key) if checks is not None else None
        if self._codes and known is not None:
            kept = _readable(before, pool)
            if kept is not None:
                redo = _to_judge(pool, kept)
                if len(redo) * PATCHED_AT_MOST <= len(pool.devices):
                    self._patch(out, pool, asked, kept, redo, known, match)
                    return
        learnt = bytearray(len(pool.devices)) if checks is not None and known is None else None
        codes = out.codes = bytearray(len(pool.devices)) if self._codes else None
        per_node = out.per_node
        detailed = erred = 0  # to tell whether two devices share an id
        choice, node, labels = asked.choice, asked.node, asked.labels
        fractional = asked.index.fractional
        # _judged inlined: this loop runs for every device of the world in a question
        # asked anew, where a call per device cost a tenth of a one-off fit.
        for i, d in enumerate(pool.devices):
            if i % DEVICES_PER_STEP == 0:
                yield
            result: EvalResult
            seen = _ASK if known is None else known[i]
            if seen == _MATCHES:
                result = True
            elif seen == _MISSES:
                result = False
            else:
                result = match(d.driver, d.device, d.cache_key)
                if learnt is not None:
                    learnt[i] = _MATCHES if result is True else _MISSES if result is False else _ASK
            if not d.pool_complete or not d.pool_valid:
                # The allocator skips such pools without evaluating their devices.
                if result is True:
                    out.matched += 1
                    reason = "PoolIncomplete" if not d.pool_complete else "PoolInvalid"
                    out.blocked.setdefault(reason, []).append(d.id)
                    if codes is not None:
                        codes[i] = _reason_code(reason)
                continue
            if isinstance(result, CelRuntimeError):
                out.runtime_errors[d.id] = str(result)
                erred += 1
                if codes is not None:
                    codes[i] = _ERRED
                continue
            if not result:
                continue
            out.matched += 1
            blocker = self._blocker(d, choice, pool, fractional, node, labels)
            name = d.id
            if blocker is None:
                out.free.append(name)
                where = d.device.node_name or d.slice.node_name or NETWORK
                per_node[where] = per_node.get(where, 0) + 1
                if codes is not None:
                    codes[i] = _FREE
            else:
                out.blocked.setdefault(blocker[0], []).append(name)
                out.details[name] = blocker[1]
                detailed += 1
                if codes is not None:
                    codes[i] = _reason_code(blocker[0])
        if learnt is not None and checks is not None:
            checks[key] = bytes(learnt)
        if detailed != len(out.details) or erred != len(out.runtime_errors):
            out.codes = None  # two devices share an id: not read back

    def _judged(
        self,
        d: IndexedDevice,
        i: int,
        known: bytes,
        match: Any,
        asked: _Asked,
        pool: PoolDevices,
    ) -> tuple[int, str | None]:
        """What becomes of the pool's device i for the choice, its selectors' answers
        `known` (a kept fold is patched only then): _SKIPPED, _FREE, _ERRED (with the
        error) or its blocker's code (with the detail, if any). The same as _fold's
        loop, which has it inlined (test_why_kept compares the two)."""
        result: EvalResult
        seen = known[i]
        if seen == _MATCHES:
            result = True
        elif seen == _MISSES:
            result = False
        else:
            result = match(d.driver, d.device, d.cache_key)  # an error last time: asked again
        if not d.pool_complete or not d.pool_valid:
            # The allocator skips such pools without evaluating their devices.
            if result is not True:
                return _SKIPPED, None
            return _reason_code("PoolIncomplete" if not d.pool_complete else "PoolInvalid"), None
        if isinstance(result, CelRuntimeError):
            return _ERRED, str(result)
        if not result:
            return _SKIPPED, None
        blocker = self._blocker(
            d, asked.choice, pool, asked.index.fractional, asked.node, asked.labels
        )
        if blocker is None:
            return _FREE, None
        return _reason_code(blocker[0]), blocker[1]

    def _patch(
        self,
        out: _Fold,
        pool: PoolDevices,
        asked: _Asked,
        kept: _Readable,
        redo: list[int],
        known: bytes,
        match: Any,
    ) -> None:
        """`out` is the kept fold with the devices at `redo` judged again: each taken out
        of the list it was in and put into the one it is in now (_Patched); the free
        devices by node and the errors made again in device order from the codes."""
        devices = pool.devices
        codes = out.codes = bytearray(kept.codes)
        lists = _Patched.of(kept.fold)
        for i in redo:
            d = devices[i]
            code, text = self._judged(d, i, known, match, asked, pool)
            name = d.id
            lists.take(codes, i, name)
            codes[i] = code
            lists.put(codes, i, name, text)
        out.matched, out.free, out.blocked = lists.matched, lists.free, lists.blocked
        out.details = lists.details
        at = codes.find(_FREE)
        while at != -1:
            d = devices[at]
            where = d.device.node_name or d.slice.node_name or NETWORK
            out.per_node[where] = out.per_node.get(where, 0) + 1
            at = codes.find(_FREE, at + 1)
        if lists.errors:
            at = codes.find(_ERRED)
            while at != -1:
                name = devices[at].id
                out.runtime_errors[name] = lists.errors[name]
                at = codes.find(_ERRED, at + 1)

    def prune_folds(self, keys: Collection[tuple[str, str]]) -> None:
        """Forget the folds of pools not among `keys`."""
        if not self._standing:
            return
        for same, st in list(self._standing.items()):
            if all(k in keys for k in st.keys):
                continue
            here = [i for i, k in enumerate(st.keys) if k in keys]
            self._standing[same] = _Standing.of(
                [st.keys[i] for i in here],
                [st.entries[i] for i in here],
                [st.parts[i] for i in here],
            )

    def kept_pools(self) -> set[PoolKey]:
        """The pools whose folds are kept."""
        return {k for st in (self._standing or {}).values() for k in st.keys}

    @staticmethod
    def _decide(out: ChoiceExplanation, per_node: Mapping[str, int], node: str | None) -> None:
        blocked = sum(len(v) for v in out.blocked.values())
        why_not = ", ".join(f"{len(out.blocked[r])} {r}" for r in REASON_ORDER if r in out.blocked)
        if out.runtime_errors:
            dev, msg = sorted(out.runtime_errors.items())[0]
            more = len(out.runtime_errors) - 1
            out.reason = (
                f"CEL runtime error on device {dev}: {msg}"
                + (f" (and {_plural(more, 'more device')})" if more else "")
                + "; the scheduler fails the claim"
            )
            return
        network = per_node.get(NETWORK, 0)
        best_node, best = None, network
        for name, n in per_node.items():
            if name != NETWORK and n + network > best:
                best_node, best = name, n + network
        out.best_node, out.best_node_free = best_node, best
        free = len(out.free)
        base = f"{free} of {_plural(out.matched, 'matching device')} free"
        if why_not:
            base += f" ({why_not})"
        if out.matched == 0:
            out.reason = "no device matches the DeviceClass and request selectors"
            return
        if out.allocation_mode == "All":
            out.satisfiable = blocked == 0 and free > 0
            out.reason = (
                f"allocationMode All: all {out.matched} matching devices are free"
                if out.satisfiable
                else f"allocationMode All needs every matching device free: {base}"
            )
            return
        if free < out.count:
            out.reason = f"needs {out.count}, {base}"
            return
        if best < out.count and node is None:
            out.reason = f"needs {out.count} on one node, {base} but at most {best} on any one node"
            return
        out.satisfiable = True
        out.reason = f"needs {out.count}: {base}"

    # -- constraints ---------------------------------------------------------------------
    def _constraint(
        self,
        c: Constraint,
        requests: Sequence[RequestExplanation],
        index: DeviceIndex,
        attributes: Attributes,
        derived: Mapping[str, Mapping[str, str]],
    ) -> Steps[str | None]:
        """`derived`: each request's (or subrequest's) derived attributes, by label."""
        names = set(c.requests) or {r.name for r in requests}
        attr = c.match_attribute or c.distinct_attribute
        if attr is None:
            return None
        by_id: dict[str, IndexedDevice] = {}
        for i, d in enumerate(index.devices):
            if i % (64 * DEVICES_PER_STEP) == 0:
                yield
            by_id[d.id] = d
        groups: _Offered = []
        for r in requests:
            for ch in r.choices:
                if ch.request.split("/")[0] not in names and ch.request not in names:
                    continue
                if ch is not r.chosen:
                    continue
                values: dict[Any, int] = defaultdict(int)
                own = derived.get(ch.request, {})
                for dev_id in ch.free:
                    d = by_id[dev_id]
                    for v in attributes.offered(own, d.device, d.driver, attr, d.cache_key):
                        values[v] += 1
                groups.append((ch.request, ch.count, values))
        if not groups:
            return None
        if c.match_attribute:
            return _unmatched(attr, groups)
        return _not_distinct(attr, groups)

    # -- the claim -----------------------------------------------------------------------
    def explain(
        self,
        claim: ResourceClaim,
        index: DeviceIndex,
        classes: Mapping[str, DeviceClass] | Iterable[DeviceClass],
        node: str | None = None,
        labels: Mapping[str, str] | None = None,
        results: Sequence[PoolResult] | None = None,
        rules: Sequence[DeviceTaintRule] = (),
    ) -> ClaimExplanation:
        """The per-device reasons come from the index; with `results` (the pools the index
        was built from) the verdict is the allocator's own answer, from the port of its
        search (explain/search.py), on `node` or on every node."""
        return finish(self.explain_steps(claim, index, classes, node, labels, results, rules))

    def explain_steps(
        self,
        claim: ResourceClaim,
        index: DeviceIndex,
        classes: Mapping[str, DeviceClass] | Iterable[DeviceClass],
        node: str | None = None,
        labels: Mapping[str, str] | None = None,
        results: Iterable[PoolResult] | None = None,
        rules: Sequence[DeviceTaintRule] = (),
        gather: GatherIndex | None = None,
        shaky: Mapping[tuple[str, str], list[Assignment]] | None = None,
    ) -> Steps[ClaimExplanation]:
        """explain() in steps; `gather` and `shaky`: what the search needs of `results`,
        when the caller keeps them (explain/catalog.py)."""
        by_name = classes if isinstance(classes, Mapping) else {c.name: c for c in classes}
        out = ClaimExplanation(claim.namespace, claim.name, claim.allocated, node)
        profile_rules = judged_with(results or ())
        lists = list_mode(profile_rules)
        derived: dict[str, Mapping[str, str]] = {}
        for req in claim.requests:
            choices = []
            for ch in req.choices:
                label = f"{req.name}/{ch.name}" if req.prioritized else req.name
                derived[label] = ch.derived
                choice = yield from self._choice_steps(
                    label, ch, by_name, index, node, labels, lists
                )
                choices.append(choice)
                if req.prioritized and choices[-1].satisfiable:
                    break  # the allocator takes the first subrequest that fits
            out.requests.append(RequestExplanation(req.name, req.prioritized, choices))
        attributes = Attributes(self.cel, profile_rules)
        for c in claim.constraints:
            problem = yield from self._constraint(c, out.requests, index, attributes, derived)
            if problem is not None:
                out.constraint_problems.append(problem)
        self._verdict(out)
        if results is not None and not out.allocated:
            nodes = [node] if node is not None else None
            found = yield from allocatable_steps(
                claim, results, by_name, rules, nodes, self.cel, gather=gather, shaky=shaky
            )
            self._exact(out, found)
        return out

    @staticmethod
    def _exact(out: ClaimExplanation, found: Allocatability) -> None:
        """Replace the estimate with the search's answer; keep the estimate's words where
        they agree, since they say which request and devices are the problem."""
        if found.answer == "yes":
            where = ", ".join(found.nodes[:3]) + (" and more" if len(found.nodes) > 3 else "")
            out.verdict = "Allocatable"
            out.summary = (
                f"the allocator would allocate it on {where}; something other than its "
                "devices keeps it pending (the pod's node constraints, a scheduling delay)"
            )
        elif len(found.outcomes) > 1:
            # The order decides: name every outcome it can have.
            out.verdict, out.summary = "Uncertain", found.detail
        elif found.answer == "no":
            if found.aborts:
                out.verdict, out.summary = "Error", found.detail
            elif out.verdict != "Unallocatable":
                out.verdict, out.summary = "Unallocatable", found.detail

    @staticmethod
    def _verdict(out: ClaimExplanation) -> None:
        if out.allocated:
            out.verdict, out.summary = "Allocated", "the claim is allocated"
            return
        errors = [c for r in out.requests for c in r.choices if c.error or c.runtime_errors]
        if errors:
            out.verdict = "Error"
            out.summary = f"request {errors[0].request}: {errors[0].reason}"
            return
        failing = [r for r in out.requests if not r.satisfiable]
        if failing:
            r = failing[0]
            if r.prioritized:
                parts = "; ".join(f"{c.request}: {c.reason}" for c in r.choices)
                out.summary = f"request {r.name}: no subrequest fits ({parts})"
            else:
                out.summary = f"request {r.name}: {r.choices[0].reason}"
            if len(failing) > 1:
                out.summary += f" (and {_plural(len(failing) - 1, 'more request')})"
            out.verdict = "Unallocatable"
            return
        if out.constraint_problems:
            out.verdict, out.summary = "Unallocatable", out.constraint_problems[0]
            return
        out.verdict = "MaybeAllocatable"
        where = f" on node {out.node}" if out.node else ""
        out.summary = (
            f"enough matching devices are free{where}; the pod's own node constraints, "
            "a scheduling delay or a combination the allocator cannot find may keep it "
            "pending (try --node NODE)"
        )


# A constraint's requests: each one's name, the devices it asks for, and how many of its
# free devices offer each value of the attribute.
_Offered = list[tuple[str, int, dict[Any, int]]]


def _unmatched(attr: str, groups: _Offered) -> str | None:
    """matchAttribute: why no single value is offered by enough free devices of every
    request, or None when one is."""
    common = set(groups[0][2])
    for _, _, values in groups[1:]:
        common &= set(values)
    if any(all(vals.get(v, 0) >= n for _, n, vals in groups) for v in common):
        return None
    detail = "; ".join(
        f"{req}: "
        + (
            ", ".join(f"{v} x{n}" for v, n in sorted(vals.items(), key=str))
            or "no free device has it"
        )
        for req, _, vals in groups
    )
    return (
        f"matchAttribute {attr}: no single value is shared by enough free devices "
        f"of requests {', '.join(g[0] for g in groups)} ({detail})"
    )


def _not_distinct(attr: str, groups: _Offered) -> str | None:
    """distinctAttribute: why the free devices offer too few different values, or None."""
    distinct: set[Any] = set()
    for _, _, vals in groups:
        distinct |= set(vals)
    need = sum(n for _, n, _ in groups)
    if len(distinct) >= need:
        return None
    have = len(distinct)
    return f"distinctAttribute {attr}: needs {need} different values, free devices have {have}"
