"""Put draview's engine and the real allocator (tests/fidelity/oracle.py) side by side.

For a world (Kubernetes objects), every device of every slice is probed: a claim pinned
to exactly that copy of the device (a unique attribute added to a copy of the world, and
a CEL selector on it), asking of a shareable device the smallest request its policy
permits (`engine.capacity.probe_request`, the same rule the engine applies). The engine
computes the original world; the verdicts are compared device by device.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from draview.api.claims import ResourceClaim
from draview.api.fastslice import slice_from_object
from draview.api.world import build_world
from draview.cel import CelEngine
from draview.engine.aborts import MAY_ABORT
from draview.engine.attributes import attribute
from draview.engine.capacity import probe_request
from draview.engine.model import EngineOptions
from draview.engine.profile import Profile
from draview.engine.rules import rules_for
from draview.engine.world import compute_world
from draview.explain.allocatable import (
    ABORTS,
    FITS,
    UNSCHEDULABLE,
    Allocatability,
    allocatable,
)
from draview.explain.gather import ambiguous, node_names

if TYPE_CHECKING:
    from tests.fidelity.oracle import Oracle

PROBE_DOMAIN = "probe.draview.io"
PROBE_CLASS = "draview-probe"
ATTR = f'device.attributes["{PROBE_DOMAIN}"]'
ORDERS = 2  # as given and reversed; `permutations` adds the orders that matter

DeviceKey = tuple[str, int]  # (slice name, device index)
# Reasons draview gives a device allocatable in some orders only: of the list (slices that
# disagree on resourceSliceCount) or, in 1.34, of the pools a node's allocator walks.
ORDER_DEPENDENT = ("InconsistentSliceCount", MAY_ABORT)


def _slices(objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o.get("kind") == "ResourceSlice"]


def pinned_world(objects: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of the world in which every device carries its own id and its pool."""
    out = copy.deepcopy(list(objects))
    for s in _slices(out):
        spec = s["spec"]
        pool = f"{spec['driver']}/{spec['pool']['name']}"
        for j, dev in enumerate(spec.get("devices") or ()):
            attrs = dev.setdefault("attributes", {})
            attrs[f"{PROBE_DOMAIN}/id"] = {"string": f"{s['metadata']['name']}/{j}"}
            attrs[f"{PROBE_DOMAIN}/pool"] = {"string": pool}
    return out


def claim(name: str, requests: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "probe", "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": requests}},
    }


def device_probes(
    objects: Sequence[dict[str, Any]], profile: Profile | None = None
) -> list[dict[str, Any]]:
    # Without DRAConsumableCapacity a capacity request is an error and every device is
    # exclusive: the probe asks for the device whole.
    shareable = profile is None or rules_for(profile).shareable
    probes = []
    for s in _slices(objects):
        model = slice_from_object(s)
        name = s["metadata"]["name"]
        for j, dev in enumerate(model.devices):
            exactly: dict[str, Any] = {
                "deviceClassName": PROBE_CLASS,
                "selectors": [
                    {
                        "cel": {
                            "expression": f'device.attributes["{PROBE_DOMAIN}"].id == "{name}/{j}"'
                        }
                    }
                ],
            }
            if shareable and dev.allow_multiple_allocations and dev.capacity:
                exactly["capacity"] = {
                    "requests": {c: str(probe_request(cap)) for c, cap in dev.capacity.items()}
                }
            probes.append(
                {
                    "id": f"{name}/{j}",
                    "claim": claim(f"p{len(probes)}", [{"name": "p", "exactly": exactly}]),
                }
            )
    return probes


# Enough for every world of seeds 0..9999 (the most needs 2,880); a world that needs
# more fails loudly rather than being judged on fewer orders than it needs.
MAX_PERMUTATIONS = 4096


def permutations(objects: Sequence[dict[str, Any]]) -> list[list[int]]:
    """Slice list orders worth asking for. The allocator trusts the resourceSliceCount of
    the first slice of a pool that each node gathers, and nodes gather different subsets
    of a pool; only the relative order of a pool's own slices matters. So for every pool
    whose slices disagree on the count, every order of them (a handful), combined across
    such pools; the other slices follow as given. Shuffles or rotations miss orders that
    decide an answer."""
    groups: dict[tuple[str, str, int], list[int]] = {}
    counts: dict[tuple[str, str, int], set[int]] = {}
    slices = _slices(objects)
    for i, s in enumerate(slices):
        spec = s["spec"]
        pool = spec["pool"]
        key = (spec["driver"], pool["name"], pool.get("generation", 0))
        groups.setdefault(key, []).append(i)
        counts.setdefault(key, set()).add(pool.get("resourceSliceCount", 1))
    # Only the order within one generation decides which count is met first there.
    shaky = sorted(k for k, seen in counts.items() if len(seen) > 1)
    orders = [list(itertools.permutations(groups[k])) for k in shaky]
    needed = math.prod(len(o) for o in orders)
    if needed > MAX_PERMUTATIONS:
        raise RuntimeError(f"the world needs {needed} slice orders, over {MAX_PERMUTATIONS}")
    out: list[list[int]] = []
    for combo in itertools.product(*orders):
        if not combo:
            break
        first = [i for order in combo for i in order]
        out.append(first + [i for i in range(len(slices)) if i not in first])
    return out


def attempts(nodes: dict[str, list[str]]) -> set[str]:
    """What the scheduling attempts the oracle's answers stand for ended in (per node,
    one answer per order: one attempt per order): an error on any node aborts the
    attempt, else one node that allocates is enough."""
    orders = max((len(outs) for outs in nodes.values()), default=0)
    out = set()
    for k in range(orders):
        at_k = [outs[k] for outs in nodes.values()]
        if any(o.startswith("error") for o in at_k):
            out.add(ABORTS)
        else:
            out.add(FITS if "ok" in at_k else UNSCHEDULABLE)
    return out or {UNSCHEDULABLE}


def reduce(nodes: dict[str, list[str]]) -> str:
    """The attempts as "yes"/"no" when every order agrees, else "maybe"."""
    seen = attempts(nodes)
    if FITS not in seen:
        return "no"
    return "yes" if len(seen) == 1 else "maybe"


# Orders to ask again where draview says the order decides and the oracle showed only
# some of the outcomes: the allocator's Go map order (1.34, 1.35) is new on every call and
# cannot be asked for, so the same orders are asked again and again until it shows up.
MORE_ORDERS = (100, 1000, 1000, 1000)


def _ask_more(
    oracle: Oracle, case: dict[str, Any], wanted: set[str], answer: dict[str, Any], orders: int
) -> None:
    """Ask the probes `wanted` of `case` again with `orders` orders; append what the
    oracle answers to `answer`'s outcome lists (each order one more attempt)."""
    again = {**case, "probes": [p for p in case["probes"] if p["id"] in wanted], "orders": orders}
    more = {p["id"]: p["nodes"] for p in oracle.ask(again)["probes"]}
    for probe in answer["probes"]:
        extra = more.get(probe["id"])
        if extra is not None:
            for node, outs in probe["nodes"].items():
                outs.extend(extra[node])


def engine_verdicts(
    objects: Sequence[dict[str, Any]], options: EngineOptions | None = None
) -> dict[DeviceKey, tuple[str, str, str | None]]:
    """(verdict, state, reason) per device copy, as draview reports it."""
    out: dict[DeviceKey, tuple[str, str, str | None]] = {}
    for result in compute_world(build_world(objects), options):
        for sr in result.slices:
            for j, d in enumerate(sr.status["devices"]):
                state, reason = d["state"], d.get("stateReason")
                if state in ("Available", "PartiallyAllocated"):
                    verdict = "yes"
                elif reason in ORDER_DEPENDENT:
                    verdict = "maybe"
                else:
                    verdict = "no"
                out[(sr.slice.name, j)] = (verdict, state, reason)
    return out


@dataclass(frozen=True, slots=True)
class Difference:
    device: DeviceKey
    engine: tuple[str, str, str | None]
    oracle: str
    answers: dict[str, list[str]]

    @property
    def order_dependent(self) -> bool:
        return self.engine[0] == "maybe" and self.oracle != "maybe"

    def __str__(self) -> str:
        verdict, state, reason = self.engine
        return (
            f"device {self.device[0]}[{self.device[1]}]: draview {state}"
            f"{'/' + reason if reason else ''} ({verdict}), allocator {self.oracle} "
            f"{_brief(self.answers)}"
        )


def device_case(
    case_id: str, objects: Sequence[dict[str, Any]], profile: Profile | None = None
) -> dict[str, Any]:
    return {
        "id": case_id,
        "objects": pinned_world(objects),
        "probes": device_probes(objects, profile),
        "orders": ORDERS,
        "permutations": permutations(objects),
    }


def _options(profile: Profile | None, **kwargs: Any) -> EngineOptions:
    return EngineOptions(**kwargs) if profile is None else EngineOptions(profile=profile, **kwargs)


def compare_devices(
    objects: Sequence[dict[str, Any]],
    answer: dict[str, Any],
    profile: Profile | None = None,
    oracle: Oracle | None = None,
) -> list[Difference]:
    """`oracle`: ask again, with more orders, the devices draview calls order-dependent
    where the answer shows one outcome only (MORE_ORDERS); without it they differ."""
    if "error" in answer:
        raise RuntimeError(f"oracle refused the world: {answer['error']}")
    mine = engine_verdicts(objects, _options(profile))

    def ours(probe: dict[str, Any]) -> tuple[str, str, str | None]:
        slice_name, _, index = probe["id"].rpartition("/")
        return mine.get((slice_name, int(index)), ("absent", "absent", None))

    for orders in MORE_ORDERS if oracle is not None else ():
        short = {
            p["id"]
            for p in answer["probes"]
            if ours(p)[0] == "maybe" and reduce(p["nodes"]) != "maybe"
        }
        if not short:
            break
        _ask_more(oracle, device_case("again", objects, profile), short, answer, orders)
    diffs = []
    for probe in answer["probes"]:
        slice_name, _, index = probe["id"].rpartition("/")
        theirs = reduce(probe["nodes"])
        if ours(probe)[0] != theirs:
            diffs.append(Difference((slice_name, int(index)), ours(probe), theirs, probe["nodes"]))
    return diffs


def claims_case(
    case_id: str, objects: Sequence[dict[str, Any]], pending: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """The world's pending claims, each asked of the allocator as it is."""
    probes = [
        {"id": f"{c['metadata'].get('namespace', '')}/{c['metadata']['name']}", "claim": c}
        for c in pending
    ]
    return {
        "id": case_id,
        "objects": list(objects),
        "probes": probes,
        "orders": ORDERS,
        "permutations": permutations(objects),
    }


@dataclass(frozen=True, slots=True)
class ClaimDifference:
    claim: str
    engine: Allocatability
    oracle: str
    answers: dict[str, list[str]]

    def __str__(self) -> str:
        seen = "/".join(o for o, _ in self.engine.outcomes) or self.engine.answer
        return (
            f"claim {self.claim}: draview {seen} ({self.engine.detail}), "
            f"allocator {self.oracle} {_brief(self.answers)}"
        )


def _brief(answers: dict[str, list[str]]) -> dict[str, dict[str, int]]:
    """Per node, how often each kind of answer came (the lists run to a thousand)."""
    out: dict[str, dict[str, int]] = {}
    for node, outs in answers.items():
        counts: dict[str, int] = {}
        for o in outs:
            counts[o[:100]] = counts.get(o[:100], 0) + 1
        out[node] = counts
    return out


def compare_claims(
    objects: Sequence[dict[str, Any]],
    pending: Sequence[dict[str, Any]],
    answer: dict[str, Any],
    profile: Profile | None = None,
    oracle: Oracle | None = None,
) -> tuple[list[ClaimDifference], int]:
    """Differences, and how many claims the search could not decide within its budget.

    A claim agrees when the attempts end in the outcomes draview names (fits, is
    unschedulable, aborts), every one of them. `oracle`: where draview names more
    outcomes than the answer shows, ask again with more orders (MORE_ORDERS)."""
    if "error" in answer:
        raise RuntimeError(f"oracle refused the world: {answer['error']}")
    world = build_world(objects)
    options = _options(profile)
    results = compute_world(world, options)
    classes = {c.name: c for c in world.classes}
    nodes = sorted(set(node_names(results)) - {None} | {n.name for n in world.nodes or ()})
    cel = CelEngine()
    by_id = {f"{c['metadata'].get('namespace', '')}/{c['metadata']['name']}": c for c in pending}
    mine = {
        pid: allocatable(
            ResourceClaim.from_object(c),
            results,
            classes,
            world.taint_rules,
            nodes,
            cel,
            profile=options.profile,
        )
        for pid, c in by_id.items()
    }

    def want(pid: str) -> set[str]:
        return {o for o, _ in mine[pid].outcomes}

    for orders in MORE_ORDERS if oracle is not None else ():
        short = {
            p["id"]
            for p in answer["probes"]
            if mine[p["id"]].answer != "unknown" and attempts(p["nodes"]) < want(p["id"])
        }
        if not short:
            break
        _ask_more(oracle, claims_case("again", objects, pending), short, answer, orders)
    diffs, unknown = [], 0
    for probe in answer["probes"]:
        theirs = attempts(probe["nodes"])
        if mine[probe["id"]].answer == "unknown":
            unknown += 1
        elif theirs != want(probe["id"]):
            seen = "/".join(o for o in (FITS, UNSCHEDULABLE, ABORTS) if o in theirs)
            diffs.append(ClaimDifference(probe["id"], mine[probe["id"]], seen, probe["nodes"]))
    return diffs, unknown


def partition_case(
    case_id: str,
    objects: Sequence[dict[str, Any]],
    attributes: Sequence[str],
    profile: Profile | None = None,
) -> tuple[dict[str, Any], list[tuple[str, int]]]:
    """For every partition type draview can count exactly, a claim for "how many more
    fit" devices of it and one for one more. Returns the case and (probe id, expected
    answer is "yes" for the first, "no" for the second) pairs."""
    world = build_world(objects)
    results = compute_world(world, _options(profile, partition_attributes=tuple(attributes)))
    shaky = set(ambiguous(results))
    probes: list[dict[str, Any]] = []
    expect: list[tuple[str, int]] = []
    for r in results:
        if r.key in shaky:
            continue
        driver, pool = r.key
        shareable = {
            str(attribute(d, driver, a))
            for fs in (r.prepared.flat if r.prepared else ())
            for d in fs.devices
            if d.allow_multiple_allocations
            for a in attributes
            if attribute(d, driver, a) is not None
        }
        for part in r.status.get("partitions", ()):
            if part["method"] != "exact" or part["type"] in shareable:
                continue
            domain, _, ident = part["attribute"].rpartition("/")
            expr = (
                f'{ATTR}.pool == "{driver}/{pool}" && "{ident}" in device.attributes["{domain}"]'
                f' && device.attributes["{domain}"]["{ident}"] == "{part["type"]}"'
            )
            for n, want in ((part["allocatable"], "yes"), (part["allocatable"] + 1, "no")):
                if n < 1 or n > 32:
                    continue
                pid = f"{driver}/{pool}/{part['type']}/{n}"
                exactly = {
                    "deviceClassName": PROBE_CLASS,
                    "count": n,
                    "selectors": [{"cel": {"expression": expr}}],
                }
                probes.append(
                    {
                        "id": pid,
                        "claim": claim(f"p{len(probes)}", [{"name": "p", "exactly": exactly}]),
                    }
                )
                expect.append((pid, 1 if want == "yes" else 0))
    case = {
        "id": case_id,
        "objects": pinned_world(objects),
        "probes": probes,
        "orders": ORDERS,
        "permutations": permutations(objects),
    }
    return case, expect


def compare_partitions(expect: Sequence[tuple[str, int]], answer: dict[str, Any]) -> list[str]:
    if "error" in answer:
        raise RuntimeError(f"oracle refused the world: {answer['error']}")
    got = {p["id"]: reduce(p["nodes"]) for p in answer["probes"]}
    out = []
    for pid, fits in expect:
        want = "yes" if fits else "no"
        if got.get(pid) != want:
            out.append(f"partition probe {pid}: draview says {want}, allocator {got.get(pid)}")
    return out
