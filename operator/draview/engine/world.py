"""Compute every pool of a snapshot: what `draview analyze` prints."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from draview.api.node_info import NodeGroups, NodeInfo, assumed_nodes
from draview.api.world import World
from draview.engine.aborts import NO_ABORTS, Aborts, find_aborts
from draview.engine.allocations import index_allocations
from draview.engine.model import AllocRef, EngineOptions, PoolKey
from draview.engine.objects import result_objects
from draview.engine.pool import PoolResult, compute_pool
from draview.engine.pools import group_slices
from draview.engine.rules import rules_for


def _problems(world: World) -> dict[PoolKey, list[str]]:
    """The input problems of each pool, as its status lists them."""
    out: dict[PoolKey, list[str]] = defaultdict(list)
    for p in world.problems:
        if p.pool is not None:
            out[p.pool].append(str(p))
    return out


def compute_world(
    world: World,
    options: EngineOptions | None = None,
    earlier: Sequence[PoolResult] = (),
    changed: Collection[PoolKey] | None = None,
    allocations: Mapping[PoolKey, Sequence[AllocRef]] | None = None,
) -> list[PoolResult]:
    """Results for every pool, sorted by (driver, pool). `earlier`: results for the same
    slices and nodes, whose slice-only work each pool reuses; with `changed`, the pools
    whose allocations may differ from `earlier`'s: every other pool keeps its earlier
    result as it is (where pools are judged apart, from 1.35). `allocations`: the claims'
    results by pool (index_allocations(world.claims)), when the caller holds them."""
    by_pool = group_slices(world.slices)
    problems = _problems(world)
    if allocations is None:
        allocations = index_allocations(world.claims)
    # A pool whose every slice is unreadable still shows, invalid: its devices are not
    # allocatable, and vanishing would hide that from whoever watches the pool.
    unreadable = {p.pool for p in world.problems if p.pool and p.kind == "ResourceSlice"}
    keys = sorted(by_pool.keys() | unreadable)
    nodes = _same_nodes(_nodes(world), earlier)

    rules = rules_for((options or EngineOptions()).profile)
    kept = (
        {r.key: r for r in earlier}
        if changed is not None and rules.invalid_pool_is_node_local
        else {}
    )

    def judged(aborts: Aborts, before: Sequence[PoolResult] = ()) -> list[PoolResult]:
        prepared = {r.key: r.prepared for r in before}
        out = []
        for key in keys:
            same = kept.get(key)
            if same is not None and changed is not None and key not in changed:
                out.append(same)
                continue
            out.append(
                compute_pool(
                    key,
                    by_pool.get(key, []),
                    allocations.get(key, ()),
                    world.taint_rules,
                    problems.get(key, ()),
                    options,
                    prepared=prepared.get(key),
                    nodes=nodes,
                    aborts=aborts,
                )
            )
        return out

    results = judged(NO_ABORTS, earlier)
    if rules.invalid_pool_is_node_local:
        return results
    # 1.34: a pool's devices depend on the invalid pools of every other (aborts.py).
    aborts = find_aborts(
        (
            (r.key, r.prepared.views, r.prepared.flat, r.errors.allocator)
            for r in results
            if r.prepared
        ),
        rules.binding_pools_last,
    )
    return judged(aborts, results) if aborts else results


def _nodes(world: World) -> Sequence[NodeInfo]:
    """The nodes every pool is judged for: the world's, or those its slices imply."""
    if world.nodes is None:
        return assumed_nodes(world.slices)
    # Each node its own group: the labels by name are mapped once, not per pool.
    return NodeGroups(
        world.nodes,
        {n.name: n.labels for n in world.nodes},
        {n.name: n.declared for n in world.nodes if n.declared is not None},
    )


def _same_nodes(nodes: Sequence[NodeInfo], earlier: Sequence[PoolResult]) -> Sequence[NodeInfo]:
    """The earlier results' nodes when they are these: a pool's prepared views serve only
    the very nodes object they were made for (PreparedPool.serves), and `fit` judges the
    world again with the same nodes built anew."""
    for r in earlier:
        if r.prepared is not None:
            before = r.prepared.nodes
            if before is not nodes and type(before) is type(nodes) and before == nodes:
                return before
            break
    return nodes


def world_objects(world: World, options: EngineOptions | None = None) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for result in compute_world(world, options):
        objects.extend(result_objects(result))
    pools = [o for o in objects if o["kind"] == "ResourcePoolStatus"]
    slices = [o for o in objects if o["kind"] != "ResourcePoolStatus"]
    pools.sort(key=lambda o: o["metadata"]["name"])
    slices.sort(key=lambda o: o["metadata"]["name"])
    return pools + slices


def node_assumption(world: World) -> str | None:
    """What was assumed about nodes, when the input carries no Node objects and some
    slice reaches nodes by allNodes or a selector (None otherwise: nothing was)."""
    if world.nodes is not None:
        return None
    selects = any(
        not s.node_name
        and (
            s.all_nodes
            or s.node_selector is not None
            or any(not d.node_name for d in s.devices if s.per_device_node_selection)
        )
        for s in world.slices
    )
    if not selects:
        return None
    named = len(assumed_nodes(world.slices))
    return (
        f"the input has no Node objects: assumed {named} label-less node(s), those the "
        "slices name, and one more node that matches every node selector; add the Nodes "
        "(kubectl get nodes -o yaml) for each node's own view"
    )
