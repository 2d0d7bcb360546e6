"""Where the data comes from: the cluster through kubectl, or a dump file (-f).

Availability comes from the draview operator's ResourceSliceStatus/ResourcePoolStatus
objects when it publishes them; otherwise (CRDs absent or empty, --live, -f) it is
computed here with the same engine from slices, claims and DeviceTaintRules.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from draview.api.claims import READ_ERRORS
from draview.api.common import error_text
from draview.api.slices import ResourceSlice
from draview.api.status import API_GROUP, PLURALS, POOL_STATUS_KIND, SLICE_STATUS_KIND
from draview.api.world import World, build_world
from draview.cli.dra.common import CliError, UsageError
from draview.cli.dra.kubectl import Forbidden, Kubectl, NotFound, NotServed
from draview.cli.inputs import InputError, read_sources
from draview.cli.limits import limits_from_args
from draview.cli.profile_flags import given, profile_from_args
from draview.engine.model import EngineOptions
from draview.engine.pool import PoolResult
from draview.engine.profile import DEFAULT, Profile, ProfileError
from draview.engine.world import compute_world, node_assumption, world_objects

Origin = Literal["operator", "computed"]

# kind -> (kubectl resource, namespaced)
RESOURCES: dict[str, tuple[str, bool]] = {
    "ResourceSlice": ("resourceslices.resource.k8s.io", False),
    "ResourceClaim": ("resourceclaims.resource.k8s.io", True),
    "ResourceClaimTemplate": ("resourceclaimtemplates.resource.k8s.io", True),
    "DeviceClass": ("deviceclasses.resource.k8s.io", False),
    "DeviceTaintRule": ("devicetaintrules.resource.k8s.io", False),
    "Node": ("nodes", False),
    SLICE_STATUS_KIND: (f"{PLURALS[SLICE_STATUS_KIND]}.{API_GROUP}", False),
    POOL_STATUS_KIND: (f"{PLURALS[POOL_STATUS_KIND]}.{API_GROUP}", False),
}
# Optional kinds: a cluster may not serve them, or the user may not read them.
_OPTIONAL = {"DeviceTaintRule", "DeviceClass", "Node", SLICE_STATUS_KIND, POOL_STATUS_KIND}


def warn(message: str) -> None:
    print(f"kubectl-dra: warning: {message}", file=sys.stderr)


@dataclass
class Statuses:
    pools: list[dict[str, Any]]
    slices: list[dict[str, Any]]
    origin: Origin

    def slice_status(self, name: str) -> dict[str, Any] | None:
        return next((o for o in self.slices if o["metadata"]["name"] == name), None)

    def pool_status(self, driver: str, pool: str) -> dict[str, Any] | None:
        for o in self.pools:
            if o["spec"]["driver"] == driver and o["spec"]["pool"] == pool:
                return o
        return None


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
    """The raw objects, from a dump or through kubectl, each kind listed once."""

    kubectl: Kubectl | None
    dump: list[dict[str, Any]] | None = None
    live: bool = False
    _cache: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def offline(self) -> bool:
        return self.dump is not None

    def objects(self, kind: str) -> list[dict[str, Any]]:
        """Every object of a kind (all namespaces). Optional kinds that the server does not
        serve or the user may not list come back empty."""
        if kind in self._cache:
            return self._cache[kind]
        if self.dump is not None:
            found = [o for o in self.dump if o.get("kind") == kind]
        else:
            assert self.kubectl is not None
            resource, namespaced = RESOURCES[kind]
            try:
                found = self.kubectl.items(resource, *(["-A"] if namespaced else []))
            except NotServed:
                found = []
            except Forbidden as exc:
                if kind not in _OPTIONAL and kind != "ResourceClaim":
                    raise
                if kind == "ResourceClaim":
                    self._warn(f"cannot list ResourceClaims ({exc}); allocations are unknown")
                found = []
            for o in found:
                o.setdefault("kind", kind)
        self._cache[kind] = found
        return found

    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)
            warn(message)

    def prefetch(self, *kinds: str) -> None:
        """List several kinds at once: each kubectl call costs a process and a round trip."""
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
        assert self.kubectl is not None
        resource, _ = RESOURCES[kind]
        args = [resource, name] + (["-n", namespace] if namespace else [])
        obj: dict[str, Any] = self.kubectl.get_json(*args)
        return obj


@dataclass
class Source(Objects):
    """What the subcommands read: the objects, and what the engine makes of them (or the
    operator's status objects, when it runs)."""

    _world: World | None = None
    _results: list[PoolResult] | None = None
    _profile: Profile | None = None
    _profile_said: bool = False
    _statuses: Statuses | None = None

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
            source = cls(Kubectl.find(args.kubectl, args.kubeconfig, args.context), live=args.live)
        source._profile = named
        return source

    def profile(self) -> Profile:
        """Whose scheduler to mirror: the flags', else a live cluster's own, else the
        default. Said once on stderr, since the answer depends on it."""
        if self._profile is None:
            kubectl = None if self.offline else self.kubectl
            self._profile = kubectl.cluster_profile() if kubectl is not None else DEFAULT
            names = kubectl.gate_names if kubectl is not None else None
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

    def slice_models(self) -> list[ResourceSlice]:
        """Only the slices, normalised (no claims needed: works for restricted users)."""
        if self._world is not None:
            return self._world.slices
        return build_world(self.objects("ResourceSlice")).slices

    def node_labels(self, name: str) -> dict[str, str]:
        meta = (self.node(name) or {}).get("metadata")
        labels = meta.get("labels") if isinstance(meta, dict) else None
        if not isinstance(labels, dict):
            return {}
        return {str(k): str(v) for k, v in labels.items()}

    def world(self) -> World:
        if self._world is None:
            # The profile first: a cluster draview cannot judge is refused before any
            # list is made.
            self.profile()
            self.prefetch("ResourceSlice", "ResourceClaim", "DeviceTaintRule", "DeviceClass")
            objs = [
                *self.objects("ResourceSlice"),
                *self.objects("ResourceClaim"),
                *self.objects("DeviceTaintRule"),
                *self.objects("DeviceClass"),
            ]
            if _needs_nodes(self.objects("ResourceSlice")):
                # Which nodes a selector reaches, and what each declares, decide what each
                # node's allocator sees; without them the engine assumes nodes
                # (engine/world.node_assumption).
                nodes = self.objects("Node")
                if not nodes and not self.offline:
                    self._warn("cannot list Nodes: node selectors are assumed to match")
                objs.extend(nodes)
            self._world = build_world(objs)
            for problem in self._world.problems:
                self._warn(str(problem))
            if self.offline and (note := node_assumption(self._world)) is not None:
                self._warn(note)
        return self._world

    def results(self) -> list[PoolResult]:
        """The engine's results for every pool (always computed, for `why`)."""
        if self._results is None:
            self._results = compute_world(self.world(), EngineOptions(profile=self.profile()))
        return self._results

    def statuses(self) -> Statuses:
        if self._statuses is None:
            self._statuses = self._load_statuses()
        return self._statuses

    def _load_statuses(self) -> Statuses:
        if not self.live and not self.offline:
            self.prefetch(POOL_STATUS_KIND, SLICE_STATUS_KIND, "ResourceSlice")
            pools = self.objects(POOL_STATUS_KIND)
            slices = self.objects(SLICE_STATUS_KIND)
            if pools or slices:
                pools.sort(key=lambda o: (o["spec"]["driver"], o["spec"]["pool"]))
                slices.sort(key=lambda o: o["metadata"]["name"])
                return Statuses(pools, slices, "operator")
        objs = world_objects(self.world(), EngineOptions(profile=self.profile()))
        pools = [o for o in objs if o["kind"] == POOL_STATUS_KIND]
        pools.sort(key=lambda o: (o["spec"]["driver"], o["spec"]["pool"]))
        return Statuses(pools, [o for o in objs if o["kind"] == SLICE_STATUS_KIND], "computed")

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
        if self.kubectl is None:
            return "default"
        proc = self.kubectl.run("config", "view", "--minify", "-o", "jsonpath={..namespace}")
        return (proc.stdout.strip() if proc.returncode == 0 else "") or "default"
