"""Where the data comes from: the cluster (the API server, or kubectl with --kubectl),
or a dump file (-f).

Availability comes from the draview operator's ResourceSliceStatus/ResourcePoolStatus
objects when it publishes them; otherwise (CRDs absent or empty, --live, -f) it is
computed here with the same engine from slices, claims and DeviceTaintRules.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from draview.api.claims import READ_ERRORS, ResourceClaim
from draview.api.common import error_text
from draview.api.slices import ResourceSlice
from draview.api.status import POOL_STATUS_KIND, SLICE_STATUS_KIND
from draview.api.taints import DeviceClass
from draview.api.world import World, build_world
from draview.cli.dra.allocations import CLAIMS, OPERATOR, claims_from_statuses, statuses_cover
from draview.cli.dra.cluster import (
    EVERYTHING,
    Cluster,
    Forbidden,
    NotFound,
    NotServed,
    Query,
    matches,
)
from draview.cli.dra.common import CliError, UsageError, parse_duration
from draview.cli.dra.kubeconfig import load as load_kubeconfig
from draview.cli.dra.kubectl import Kubectl
from draview.cli.dra.rest import Rest
from draview.cli.dra.scope import WHOLE, Scope, claim_drivers
from draview.cli.inputs import InputError, read_sources
from draview.cli.limits import limits_from_args
from draview.cli.profile_flags import given, profile_from_args
from draview.engine.model import EngineOptions
from draview.engine.pool import PoolResult
from draview.engine.profile import DEFAULT, Profile, ProfileError
from draview.engine.world import compute_world, node_assumption, world_objects

Origin = Literal["operator", "computed"]

# Optional kinds: a cluster may not serve them, or the user may not read them.
_OPTIONAL = {"DeviceTaintRule", "DeviceClass", "Node", SLICE_STATUS_KIND, POOL_STATUS_KIND}


def connect(args: argparse.Namespace) -> Cluster:
    """The API server directly, or kubectl when --kubectl (or $DRAVIEW_KUBECTL) names it."""
    try:
        timeout = parse_duration(args.request_timeout) if args.request_timeout else None
    except ValueError as exc:
        raise UsageError(f"--request-timeout: {exc}") from None
    if args.chunk_size < 0:
        raise UsageError("--chunk-size: must be 0 (no paging) or more")
    if args.kubectl or os.environ.get("DRAVIEW_KUBECTL"):
        kubectl = Kubectl.find(args.kubectl, args.kubeconfig, args.context)
        kubectl.request_timeout = args.request_timeout
        kubectl.chunk_size = args.chunk_size
        return kubectl
    return Rest(load_kubeconfig(args.kubeconfig, args.context), timeout, args.chunk_size)


def warn(message: str) -> None:
    print(f"kubectl-dra: warning: {message}", file=sys.stderr)


def note(message: str) -> None:
    print(f"kubectl-dra: note: {message}", file=sys.stderr)


class Statuses:
    """The status objects a question needs, read when first used: `get pools` never
    reads the slices' statuses."""

    def __init__(
        self,
        origin: Origin,
        pools: Callable[[], list[dict[str, Any]]],
        slices: Callable[[], list[dict[str, Any]]],
    ) -> None:
        self.origin = origin
        self._load_pools = pools
        self._load_slices = slices

    @cached_property
    def pools(self) -> list[dict[str, Any]]:
        return sorted(self._load_pools(), key=lambda o: (o["spec"]["driver"], o["spec"]["pool"]))

    @cached_property
    def slices(self) -> list[dict[str, Any]]:
        return sorted(self._load_slices(), key=lambda o: o["metadata"]["name"])

    @cached_property
    def _slice_index(self) -> dict[str, dict[str, Any]]:
        return {o["metadata"]["name"]: o for o in self.slices}

    @cached_property
    def _pool_index(self) -> dict[tuple[str, str], dict[str, Any]]:
        return {(o["spec"]["driver"], o["spec"]["pool"]): o for o in self.pools}

    def slice_status(self, name: str) -> dict[str, Any] | None:
        return self._slice_index.get(name)

    def pool_status(self, driver: str, pool: str) -> dict[str, Any] | None:
        return self._pool_index.get((driver, pool))


# More nodes than this in an allocation's node selector: the driver's slices are read.
_MOST_NODES = 16


def allocation_nodes(claim: dict[str, Any]) -> list[str] | None:
    """The nodes an allocation's node selector names by `metadata.name` (what the
    scheduler writes for node-local devices); None when it selects otherwise or more
    than a few."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    terms = (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    names: list[str] = []
    for term in terms:
        found = [
            str(v)
            for f in term.get("matchFields") or []
            if f.get("key") == "metadata.name" and f.get("operator") == "In"
            for v in f.get("values") or []
        ]
        if not found or term.get("matchExpressions"):
            return None
        names.extend(found)
    return sorted(set(names)) if names and len(set(names)) <= _MOST_NODES else None


def _needs_nodes(slices: list[dict[str, Any]]) -> bool:
    """Whether any slice's judgement reads Node objects: a node selector (which nodes it
    reaches), or skipNodeOperations (which features the nodes declare, 1.37)."""
    for s in slices:
        spec = s.get("spec")
        if not isinstance(spec, dict):
            continue
        if spec.get("nodeSelector") or spec.get("skipNodeOperations"):
            return True
        devices = spec.get("devices")
        if (
            spec.get("perDeviceNodeSelection")
            and isinstance(devices, list)
            and any(isinstance(d, dict) and d.get("nodeSelector") for d in devices)
        ):
            return True
    return False


@dataclass
class Objects:
    """The raw objects, from a dump or the cluster, each kind (or selection) read once."""

    cluster: Cluster | None
    dump: list[dict[str, Any]] | None = None
    live: bool = False
    _cache: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _one: dict[tuple[str, str, str | None], dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def offline(self) -> bool:
        return self.dump is not None

    def objects(self, kind: str, query: Query = EVERYTHING) -> list[dict[str, Any]]:
        """Every object of a kind (all namespaces) that the query selects. Optional kinds
        that the server does not serve or the user may not list come back empty."""
        key = kind if query == EVERYTHING else f"{kind}?{query.labels}&{query.fields}"
        if key in self._cache:
            return self._cache[key]
        if kind in self._cache:  # the whole kind is read already: select from it
            found = [o for o in self._cache[kind] if matches(o, query)]
        elif self.dump is not None:
            found = [o for o in self.dump if o.get("kind") == kind and matches(o, query)]
        else:
            assert self.cluster is not None
            try:
                found = self.cluster.list(kind, query)
            except NotServed:
                found = []
            except Forbidden as exc:
                if kind not in _OPTIONAL and kind != "ResourceClaim":
                    raise
                if kind == "ResourceClaim":
                    self._warn(f"cannot list ResourceClaims ({exc}); allocations are unknown")
                found = []
            finally:
                self.cluster.progress_done()
            for o in found:
                o.setdefault("kind", kind)
        self._cache[key] = found
        return found

    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)
            warn(message)

    def selected(self, kind: str, queries: list[Query]) -> list[dict[str, Any]]:
        """The union of what several queries select (each object once, by name)."""
        if len(queries) == 1:
            return self.objects(kind, queries[0])
        seen: dict[tuple[str | None, str], dict[str, Any]] = {}
        for query in queries:
            for o in self.objects(kind, query):
                meta = o.get("metadata") or {}
                seen.setdefault((meta.get("namespace"), str(meta.get("name"))), o)
        return list(seen.values())

    def prefetch_selected(self, *wanted: tuple[str, list[Query]]) -> None:
        """Read several selections at once, each on its own connection: the API server
        encodes one while this process decodes another (a pending claim's `why` reads
        every slice and every slice status of a driver)."""
        if self.dump is not None or len(wanted) < 2:
            return
        with ThreadPoolExecutor(max_workers=len(wanted)) as pool:
            list(pool.map(lambda kq: self.selected(*kq), wanted))

    def prefetch(self, *kinds: str) -> None:
        """List several kinds at once: each list is a round trip (a process with kubectl)."""
        todo = [k for k in kinds if k not in self._cache]
        if self.dump is not None or len(todo) < 2:
            return
        with ThreadPoolExecutor(max_workers=len(todo)) as pool:
            list(pool.map(self.objects, todo))

    def one(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """One object by name; CliError 'not found' when it does not exist."""
        label = kind.lower() if namespace is None else f"{kind.lower()} {namespace}/{name}"
        if self.dump is not None or kind in self._cache:
            for o in self.objects(kind):
                meta = o.get("metadata")
                if not isinstance(meta, dict):  # a damaged object in a dump: not this one
                    continue
                if meta.get("name") == name and (
                    namespace is None or (meta.get("namespace") or "default") == namespace
                ):
                    return o
            what = label if namespace is not None else f"{kind.lower()} {name!r}"
            raise NotFound(f"{what} not found")
        key = (kind, name, namespace)
        if key not in self._one:
            assert self.cluster is not None
            self._one[key] = self.cluster.get(kind, name, namespace)
        return self._one[key]


@dataclass
class Source(Objects):
    """What the subcommands read: the objects, and what the engine makes of them (or the
    operator's status objects, when it runs)."""

    _world: World | None = None
    _results: list[PoolResult] | None = None
    _profile: Profile | None = None
    _profile_said: bool = False
    _named: Profile | None = None  # the profile the flags name, if they name one
    _statuses: dict[Scope, Statuses] = field(default_factory=dict)
    _publishes: bool | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Source:
        try:
            named = profile_from_args(args, warn) if given(args) else None
        except ProfileError as exc:
            raise UsageError(str(exc)) from None
        if args.filename:
            try:
                source = cls(None, read_sources(args.filename, limits_from_args(args)), live=True)
            except InputError as exc:
                raise CliError(str(exc)) from None
        else:
            source = cls(connect(args), live=args.live)
        source._profile = source._named = named
        return source

    def named_profile(self) -> Profile | None:
        """The profile --kubernetes-version and --feature-gates name; None when they
        name none (the cluster's own is judged as, as the operator judges)."""
        return self._named

    def profile(self) -> Profile:
        """Whose scheduler to mirror: the flags', else a live cluster's own, else the
        default. Said once on stderr, since the answer depends on it."""
        if self._profile is None:
            cluster = None if self.offline else self.cluster
            self._profile = cluster.cluster_profile() if cluster is not None else DEFAULT
            names = cluster.gate_names if cluster is not None else None
            for problem in names.problems(reported=True) if names is not None else []:
                self._warn(f"{problem}: judged without it")
        if not self._profile_said and self._profile is not DEFAULT:
            self._profile_said = True
            print(
                f"kubectl-dra: note: judged as {self._profile.label()} (allocator "
                f"{self._profile.implementation}, gates: {self._profile.source})",
                file=sys.stderr,
            )
            if (caveat := self._profile.caveat()) is not None:
                self._warn(caveat)
        return self._profile

    def slice_models(self, scope: Scope = WHOLE) -> list[ResourceSlice]:
        """Only the slices, normalised (no claims needed: works for restricted users); of
        the scope and maybe others (the caller filters)."""
        if self._world is not None:
            return self._world.slices
        return build_world(self.selected("ResourceSlice", scope.slice_queries())).slices

    def node_labels(self, name: str) -> dict[str, str]:
        meta = (self.node(name) or {}).get("metadata")
        labels = meta.get("labels") if isinstance(meta, dict) else None
        if not isinstance(labels, dict):
            return {}
        return {str(k): str(v) for k, v in labels.items()}

    def world(self) -> World:
        if self._world is None:
            self._world = self._build_world()
        return self._world

    def _build_world(
        self,
        slices: Sequence[Query] = (EVERYTHING,),
        claims: list[dict[str, Any]] | None = None,
    ) -> World:
        """The engine's input: the slices the queries select (with their pools' problems),
        and `claims` (default: every ResourceClaim), DeviceTaintRules, DeviceClasses and,
        where a slice's judgement reads them, the Nodes."""
        # The profile first: a cluster draview cannot judge is refused before any list
        # is made.
        self.profile()
        kinds = ["DeviceTaintRule", "DeviceClass"] + (["ResourceClaim"] if claims is None else [])
        if list(slices) == [EVERYTHING]:
            kinds.append("ResourceSlice")
        self.prefetch(*kinds)
        slice_objs = self.selected("ResourceSlice", list(slices))
        objs = [
            *slice_objs,
            *(self.objects("ResourceClaim") if claims is None else claims),
            *self.objects("DeviceTaintRule"),
            *self.objects("DeviceClass"),
        ]
        if _needs_nodes(slice_objs):
            # Which nodes a selector reaches, and what each declares, decide what each
            # node's allocator sees; without them the engine assumes nodes
            # (engine/world.node_assumption).
            nodes = self.objects("Node")
            if not nodes and not self.offline:
                self._warn("cannot list Nodes: node selectors are assumed to match")
            objs.extend(nodes)
        world = build_world(objs)
        for problem in world.problems:
            self._warn(str(problem))
        if self.offline and (note := node_assumption(world)) is not None:
            self._warn(note)
        return world

    def claim_world(
        self, raw: dict[str, Any], claim: ResourceClaim
    ) -> tuple[World, list[PoolResult], str]:
        """What `why` judges a claim against, read as narrowly as the answer allows: an
        allocated claim, the pools it holds devices in; a pending one, every pool."""
        held = {(r.driver, r.pool) for r in claim.results}
        nodes = allocation_nodes(raw)
        slices = None
        if not held and not self.offline and not self.live:
            classes = {c.name: c for c in self.class_models()}
            drivers = claim_drivers(claim, classes)
            if drivers is not None:
                # Every request selects one driver's devices: only those pools matter.
                return self.judged_world(raw, None, drivers=drivers)
        if held and nodes:
            # A slice's pool is no selectable field, but the allocation says which node
            # it is for: that node's slices of each driver, and those that name no node.
            slices = [
                q
                for d in sorted({d for d, _ in held})
                for n in nodes
                for q in Scope(driver=d, node=n).slice_queries()
            ]
        return self.judged_world(raw, held or None, slices)

    def judged_world(
        self,
        claim: dict[str, Any] | None = None,
        held: set[tuple[str, str]] | None = None,
        slice_queries: list[Query] | None = None,
        drivers: set[str] | None = None,
    ) -> tuple[World, list[PoolResult], str]:
        """The world and its results for `why` and `fit`, and where the allocations came
        from: the operator's slice statuses when it publishes them (one object a slice,
        instead of every claim in the cluster), else every ResourceClaim. `held`: only
        these pools (None: all); `claim`: the claim asked about, as the API server has
        it (newer than any status)."""
        if self.offline or self.live or self.cluster is None:
            return self.world(), self.results(), CLAIMS
        scopes = list(dict.fromkeys(Scope(d, p) for d, p in sorted(held or ())))
        scopes += [Scope(driver=d) for d in sorted(drivers or ())]
        slices = slice_queries or [q for sc in scopes for q in sc.slice_queries()] or [EVERYTHING]
        slices = list(dict.fromkeys(slices))
        claims = None
        origin = CLAIMS
        if self.operator_publishes():
            queries = [q for sc in scopes for q in sc.status_queries()] or [EVERYTHING]
            self.profile()  # refused before any list is made, as in _build_world
            self.prefetch_selected((SLICE_STATUS_KIND, queries), ("ResourceSlice", slices))
            statuses = self.selected(SLICE_STATUS_KIND, queries)
            if statuses_cover(statuses, self.selected("ResourceSlice", slices)):
                claims = claims_from_statuses(statuses, claim)
            else:
                note(
                    "some slices have no status object of the draview operator (it is "
                    "behind, or not running): every claim is read"
                )
            if claims is not None:
                origin = OPERATOR
        if claims is None and held is None and drivers is None:
            world = self.world()  # every slice and every claim: the world as a whole
            return world, self.results(), origin
        world = self._build_world(slices, claims)
        if held is not None:
            world.slices = [s for s in world.slices if s.pool_key in held]
            world.problems = [p for p in world.problems if p.pool is None or p.pool in held]
        if drivers is not None:
            world.slices = [s for s in world.slices if s.driver in drivers]
            world.problems = [p for p in world.problems if p.pool is None or p.pool[0] in drivers]
        return world, compute_world(world, EngineOptions(profile=self.profile())), origin

    def results(self) -> list[PoolResult]:
        """The engine's results for every pool (always computed, for `why`)."""
        if self._results is None:
            self._results = compute_world(self.world(), EngineOptions(profile=self.profile()))
        return self._results

    def statuses(self, scope: Scope = WHOLE) -> Statuses:
        """The status objects of the scope (and maybe others: the caller filters): the
        operator's when it publishes them, else computed here from everything."""
        if scope not in self._statuses:
            self._statuses[scope] = self._load_statuses(scope)
        return self._statuses[scope]

    def operator_publishes(self) -> bool:
        """Whether the operator's status objects exist (one small request each)."""
        if self._publishes is None:
            self._publishes = False
            if not self.live and not self.offline:
                assert self.cluster is not None
                self._publishes = any(
                    self.cluster.any(kind) for kind in (POOL_STATUS_KIND, SLICE_STATUS_KIND)
                )
        return self._publishes

    def _load_statuses(self, scope: Scope) -> Statuses:
        if self.operator_publishes():
            queries = scope.status_queries()
            return Statuses(
                "operator",
                lambda: self.selected(POOL_STATUS_KIND, queries),
                lambda: self.selected(SLICE_STATUS_KIND, queries),
            )
        objs = world_objects(self.world(), EngineOptions(profile=self.profile()))
        pools = [o for o in objs if o["kind"] == POOL_STATUS_KIND]
        slices = [o for o in objs if o["kind"] == SLICE_STATUS_KIND]
        return Statuses("computed", lambda: pools, lambda: slices)

    def class_models(self) -> list[DeviceClass]:
        """The DeviceClasses, read (they are few) whether or not the world is built."""
        out = []
        for obj in self.objects("DeviceClass"):
            try:
                out.append(DeviceClass.from_object(obj))
            except READ_ERRORS:
                continue  # build_world reports it where the class is used
        return out

    def slice_model(self, name: str) -> ResourceSlice:
        """One ResourceSlice by name, normalised; CliError (one line) when unreadable."""
        try:
            return ResourceSlice.from_object(self.one("ResourceSlice", name))
        except READ_ERRORS as exc:
            raise CliError(f"resourceslice {name!r} cannot be read: {error_text(exc)}") from None

    def node(self, name: str) -> dict[str, Any] | None:
        """The Node object, or None when it is not there (a dump without nodes)."""
        try:
            return self.one("Node", name)
        except (NotFound, Forbidden, NotServed):
            return None

    def default_namespace(self) -> str:
        return "default" if self.cluster is None else self.cluster.default_namespace()
