"""`fit`: how many copies of a workload fit, one after another, and where."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import claim, counter_pool, device, device_class, result, rslice, world

from draview.api.workload import WorkloadError, read_workload
from draview.api.world import build_world, iter_objects
from draview.engine.model import EngineOptions
from draview.engine.profile import make_profile
from draview.explain.fit import FitError, Overgrown, fit
from draview.explain.fit_memo import FitMemo

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def template(name: str = "one-gpu", count: int = 1, **exactly: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu.example.com",
                                "count": count,
                                **exactly,
                            },
                        }
                    ]
                }
            }
        },
    }


def pod(*templates: str, name: str = "trainer", kind: str = "Pod") -> dict[str, Any]:
    claims = [{"name": f"c{i}", "resourceClaimTemplateName": t} for i, t in enumerate(templates)]
    spec = {"containers": [{"name": "main", "image": "x"}], "resourceClaims": claims}
    if kind != "Pod":
        spec = {"template": {"spec": spec}}
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def nobody(kind: str, namespace: str, name: str) -> None:
    return None


def two_nodes() -> list[dict[str, Any]]:
    return [
        device_class(),
        rslice("a", [device("gpu-0"), device("gpu-1")], pool="node-a", node="node-a"),
        rslice(
            "b", [device("gpu-0"), device("gpu-1"), device("gpu-2")], pool="node-b", node="node-b"
        ),
        claim("busy", result("gpu-0", pool="node-a")),
    ]


def test_node_local_devices_fit_one_chain_per_node() -> None:
    w = read_workload([template()], nobody)
    got = fit(world(*two_nodes()), w)
    assert (got.copies, got.max_copies, got.bounded) == (4, 4, False)
    assert {n.name: n.copies for n in got.nodes} == {"node-a": 1, "node-b": 3}
    a = next(n for n in got.nodes if n.name == "node-a")
    assert [(d.pool, d.device) for d in a.devices] == [("node-a", "gpu-1")]
    assert got.stopped == "unallocatable"
    assert "needs 1, 0 of 5 matching devices free (5 Allocated)" in got.blocker


def test_a_memo_half_brought_up_to_date_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """An asking that fails part way (a bug, a thread cancelled) leaves nothing half
    renewed for the next one: the memo starts over and answers as a new question."""
    import draview.explain.fit_search as search
    from draview.explain.fit_memo import FitMemo

    w = read_workload([template()], nobody)
    memo = FitMemo()
    fit(world(*two_nodes()), w, memo=memo)
    assert memo.question is not None
    fewer = [*two_nodes(), claim("more", result("gpu-1", pool="node-a"))]
    real = search.Question.renew

    def broken(self: Any, *args: Any) -> Any:
        real(self, *args)
        raise RuntimeError("bug")

    monkeypatch.setattr(search.Question, "renew", broken)
    with pytest.raises(RuntimeError):
        fit(world(*fewer), w, memo=memo)
    assert memo.question is None and memo.board is None
    monkeypatch.undo()
    got = fit(world(*fewer), w, memo=memo)
    assert (got.copies, {n.name: n.copies for n in got.nodes}) == (3, {"node-b": 3})


def _changed(pool: str, device: str = "gpu-1") -> list[dict[str, Any]]:
    """two_nodes with one more device of `pool` taken."""
    return [*two_nodes(), claim("more", result(device, pool=pool))]


def _asked_again(
    memo: Any,
    pool: str,
    small: bool = False,
    budget: int | None = None,
    before: list[dict[str, Any]] | None = None,
    after: list[dict[str, Any]] | None = None,
    hint: list[tuple[str, str]] | None = None,
) -> tuple[bool, Any, bool]:
    """`before` (two_nodes) asked with `memo`, then `after` (a device of `pool` taken),
    every other pool's result the same object: what memo.small said first, the answer,
    and whether the small asking stopped short (Overgrown, the memo kept)."""
    from draview.engine.allocations import index_allocations
    from draview.engine.world import compute_world

    first = world(*(before or two_nodes()))
    results = compute_world(first)
    fit(first, _one_gpu(), results=results, memo=memo)
    then = world(*(after or _changed(pool)))
    base = index_allocations(then.claims)
    again = compute_world(then, None, results, {("gpu.example.com", pool)}, base)
    assert sum(a is not r for a, r in zip(again, results, strict=True)) == 1
    said = memo.small([("gpu.example.com", pool)], 8)
    kw = {} if budget is None else {"budget": budget}
    ask = {"results": again, "allocations": base, "memo": memo, "changed": hint, **kw}
    try:
        return said, fit(then, _one_gpu(), small=small, **ask), False
    except Overgrown as exc:
        if not exc.kept:
            raise
        # Asked again where time does not matter, from where it stopped.
        return said, fit(then, _one_gpu(), **ask), True


def _same(got: Any, fresh: Any) -> None:
    assert (got.copies, got.blocker, got.first_node) == (
        fresh.copies,
        fresh.blocker,
        fresh.first_node,
    )
    assert [(n.name, n.copies) for n in got.nodes] == [(n.name, n.copies) for n in fresh.nodes]


def test_a_small_asking_again_answers_as_a_new_question() -> None:
    memo = FitMemo()
    said, got, stopped = _asked_again(memo, "node-b", small=True)
    assert said and not stopped, "one node-local pool judged again is small"
    _same(got, fit(world(*_changed("node-b")), _one_gpu()))
    assert got.copies == 3 and memo.reused, "node-a kept its reach"
    assert not memo.small([("gpu.example.com", "node-a")], 0), "one node is more than none"
    assert not memo.small([("gpu.example.com", "elsewhere")], 8), "a pool not asked about"


def test_a_small_asking_whose_groups_change_goes_on_where_it_stopped() -> None:
    """node-a's last device taken: no copy can go there, so it no longer gathers a pool
    the copies care for and the groups are made again, a pass over every node. Told
    to stay small, fit stops there (Overgrown, the memo kept); asked again, it goes on
    and answers as a new question."""
    memo = FitMemo()
    said, got, stopped = _asked_again(memo, "node-a", small=True)
    assert said and stopped and not memo.regroup
    _same(got, fit(world(*_changed("node-a")), _one_gpu()))
    assert got.copies == 3 and memo.reused, "node-b kept its reach"


def test_a_network_pool_filled_and_freed_splits_and_joins_the_groups() -> None:
    """A pool reached from node-a and node-b (by their rack label) makes them one group
    while it has a free device; its last one taken, each is a group of its own, and
    freed, one again. Each time the small asking stops short and goes on in the
    groups made again: kept apart, two nodes would both count the one free device."""

    def node(name: str, rack: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"rack": rack}},
        }

    rack = {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
    objs = [
        device_class(),
        node("node-a", "r1"),
        node("node-b", "r1"),
        node("node-c", "r2"),
        *(rslice(n, [device("gpu-0")], pool=n, node=n) for n in ("node-a", "node-b", "node-c")),
        rslice(
            "net",
            [device("net-0")],
            pool="net",
            node=None,
            nodeSelector={"nodeSelectorTerms": [rack]},
        ),
    ]
    taken = [*objs, claim("more", result("net-0", pool="net"))]
    for before, after in ((objs, taken), (taken, objs)):
        memo = FitMemo()
        said, got, stopped = _asked_again(memo, "net", True, None, before, after)
        fresh = FitMemo()
        _same(got, fit(world(*after), _one_gpu(), memo=fresh))
        assert said and stopped
        assert memo.groups == fresh.groups
        # Filled, each node is a group; free, node-a and node-b are one.
        assert (len(memo.groups or ()), got.copies) == ((3, 3) if after is taken else (2, 4))


def test_the_pools_judged_again_are_taken_from_a_hint_only_where_it_holds() -> None:
    """Told which pools were judged again (a probe knows), fit compares only those;
    a hint naming a pool it does not hold is not trusted, and every pool is compared."""
    fresh = fit(world(*_changed("node-b")), _one_gpu())
    for hint in ([("gpu.example.com", "node-b")], [("gpu.example.com", "elsewhere")]):
        _, got, _ = _asked_again(FitMemo(), "node-b", True, hint=hint)
        _same(got, fresh)


def test_a_small_asking_that_would_grow_clears_the_memo() -> None:
    """The question cannot be kept (another budget makes it another question): told to
    stay small, fit raises Overgrown and leaves nothing kept; asked again, it answers
    as a new question."""
    memo = FitMemo()
    with pytest.raises(Overgrown):
        _asked_again(memo, "node-b", small=True, budget=10_000)
    assert memo.question is None and memo.board is None
    _, got, _ = _asked_again(memo, "node-b", budget=10_000)
    _same(got, fit(world(*_changed("node-b")), _one_gpu()))


def _one_gpu() -> Any:
    return read_workload([template()], nobody)


def test_count_stops_there() -> None:
    got = fit(world(*two_nodes()), read_workload([template()], nobody), count=2)
    assert (got.copies, got.max_copies, got.stopped) == (2, 2, "count")


def test_a_pod_takes_all_of_its_claims_on_one_node() -> None:
    # Two claims of two devices each: only node-b holds four free devices... it holds
    # three, so no copy fits, although each claim alone would.
    objs = [*two_nodes(), template("pair", count=2)]
    w = read_workload([pod("pair", "pair"), *objs[-1:]], nobody)
    got = fit(world(*objs[:-1]), w)
    assert (got.copies, got.max_copies) == (0, 0)
    assert got.blocker.startswith("each claim of the copy would fit alone")


def test_a_deployment_reads_its_pod_template() -> None:
    w = read_workload([pod("one-gpu", kind="Deployment"), template()], nobody)
    assert w.kind == "Deployment" and len(w.claims) == 1
    assert fit(world(*two_nodes()), w).copies == 4


def test_a_multi_host_pool_counts_exactly_where_first_fit_decides() -> None:
    objs = list(iter_objects(yaml.safe_load_all((EXAMPLES / "tpu-multihost.yaml").read_text())))
    objs += [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
        }
        for n in ("node-1", "node-2", "node-5", "node-6")
    ]
    tmpl = template()
    tmpl["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "tpu.example.com"
    got = fit(build_world(objs), read_workload([tmpl], nobody))
    # node-5 and node-6 each meet their own 2x2 device before the 2x4 one over both,
    # whichever goes first: two copies, and the 2x4 one is then out of counters.
    assert (got.copies, got.max_copies, got.bounded) == (2, 2, False)
    assert {n.name: n.copies for n in got.nodes} == {
        "node-1": 0,
        "node-2": 0,
        "node-5": 1,
        "node-6": 1,
    }
    assert "InsufficientSharedCapacity" in got.blocker


def shared_pool() -> list[dict[str, Any]]:
    """One pool over two nodes: `big` (either node) takes the whole counter, `small-*`
    (node-x only, met first there) half of it each."""
    half = {"fabric": {"c": "1"}}
    counters, devices = counter_pool(
        "fabric",
        [
            {**device("small-0", counters=half), "nodeName": "node-x"},
            {**device("small-1", counters=half), "nodeName": "node-x"},
            {**device("big", counters={"fabric": {"c": "2"}}), "allNodes": True},
        ],
        {"fabric": {"c": "2"}},
        pool="fabric",
        node=None,
        perDeviceNodeSelection=True,
    )
    counters["spec"].pop("perDeviceNodeSelection")
    counters["spec"]["allNodes"] = True
    nodes = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}} for n in ("node-x", "node-y")
    ]
    return [device_class(), counters, devices, *nodes]


def test_placement_decides_on_a_pool_two_nodes_share() -> None:
    got = fit(world(*shared_pool()), read_workload([template()], nobody))
    # On node-y first: `big`, and nothing is left. On node-x first: both small ones.
    assert (got.copies, got.max_copies, got.bounded) == (1, 2, False)
    assert got.placement_dependent
    assert {n.name: (n.copies, n.max_copies) for n in got.nodes} == {
        "node-x": (2, 2),
        "node-y": (1, 1),
    }


def test_the_budget_gives_a_proven_lower_bound() -> None:
    objs = [device_class(), rslice("a", [device(f"gpu-{i}") for i in range(30)], node="node-a")]
    got = fit(world(*objs), read_workload([template()], nobody), budget=10)
    assert got.bounded and got.max_copies is None
    assert 1 <= got.copies <= 10
    assert got.stopped == "budget"
    whole = fit(world(*objs), read_workload([template()], nobody))
    assert (whole.copies, whole.max_copies, whole.bounded) == (30, 30, False)


def test_an_error_the_walk_meets_later_aborts_the_next_copy() -> None:
    cls = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com"},
        "spec": {
            "selectors": [
                {"cel": {"expression": "device.attributes['gpu.example.com'].model == 'A'"}}
            ]
        },
    }
    objs = [cls, rslice("a", [device("gpu-0", model="A"), device("gpu-1")], node="node-a")]
    got = fit(world(*objs), read_workload([template()], nobody))
    assert (got.copies, got.max_copies, got.stopped) == (1, 1, "aborts")
    assert "CEL runtime error" in got.blocker or "no such key" in got.blocker


@pytest.mark.parametrize("release", ["1.34", "1.35", "1.36", "1.37"])
def test_every_release_counts_node_local_devices_alike(release: str) -> None:
    got = fit(
        world(*two_nodes()),
        read_workload([template()], nobody),
        EngineOptions(profile=make_profile(release)),
    )
    assert (got.copies, got.max_copies) == (4, 4)


def test_a_shared_claim_pins_copies_to_where_it_is() -> None:
    objs = two_nodes()
    shared = claim("shared", result("gpu-2", pool="node-b"))
    p = pod("one-gpu")
    p["spec"]["resourceClaims"].append({"name": "s", "resourceClaimName": "shared"})
    w = read_workload([p, template()], lambda k, ns, n: shared if n == "shared" else None)
    got = fit(world(*objs, shared), w)
    assert [n.name for n in got.nodes if n.copies] == ["node-b"]
    assert got.copies == 2


def test_bad_workloads_are_one_line() -> None:
    with pytest.raises(WorkloadError, match=r"no spec\.resourceClaims"):
        read_workload(
            [{"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}], nobody
        )
    with pytest.raises(WorkloadError, match="not found") as missing:
        read_workload([pod("absent")], nobody)
    assert missing.value.missing
    with pytest.raises(WorkloadError, match="no workload"):
        read_workload([{"kind": "ConfigMap", "metadata": {"name": "x"}}], nobody)
    bad = template()
    bad["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "nope"
    with pytest.raises(FitError, match='deviceclass "nope" not found'):
        fit(world(*two_nodes()), read_workload([bad], nobody))


def test_admin_access_shares_a_device_another_claim_of_the_pod_takes() -> None:
    # allocatingDevices is per claim: admin access is refused a device only where its
    # own claim takes it, so one GPU serves a Pod of a claim and an admin claim.
    admin = template("inspect", adminAccess=True)
    p = pod("one-gpu", "inspect")
    objs = [device_class(), rslice("a", [device("gpu-0")], pool="node-a", node="node-a")]
    got = fit(world(*objs), read_workload([p, template(), admin], nobody))
    assert (got.copies, got.max_copies) == (1, 1)
    assert sorted((d.claim, d.device, d.admin_access) for d in got.first) == [
        ("trainer-c0", "gpu-0", False),
        ("trainer-c1", "gpu-0", True),
    ]


def test_the_next_copy_of_a_pinned_pod_says_the_shared_claim_pins_it() -> None:
    objs = two_nodes()
    shared = claim("shared", result("gpu-2", pool="node-b"))
    p = pod("one-gpu")
    p["spec"]["resourceClaims"].append({"name": "s", "resourceClaimName": "shared"})
    w = read_workload([p, template()], lambda k, ns, n: shared if n == "shared" else None)
    got = fit(world(*objs, shared), w)
    # node-a still has gpu-1 free, but the copies must run where `shared` is.
    assert got.blocker == (
        "the copy's own claims would fit, but not on a node that reaches shared, "
        "which every copy shares"
    )


def test_an_unallocated_shared_claim_goes_with_the_first_copy_and_pins_the_rest() -> None:
    pend = claim("pend")  # asks one GPU, not allocated
    p = pod("one-gpu")
    p["spec"]["resourceClaims"].append({"name": "s", "resourceClaimName": "pend"})
    w = read_workload([p, template()], lambda k, ns, n: pend if n == "pend" else None)
    got = fit(world(*two_nodes(), pend), w)
    # The first copy takes two GPUs (its own and `pend`): only node-b has two; the next
    # copies must reach `pend` there, and one GPU is left for them.
    assert (got.copies, got.max_copies) == (2, 2)
    assert {d.claim for d in got.first} == {"trainer-c0", "pend"}
    assert got.first_node == "node-b"


def test_the_device_limit_holds_for_each_claim_of_a_pod() -> None:
    # The allocator counts its limit of 32 results per claim, and checks it on every
    # node before it searches. Found by bench/fidelity --fit (1.37, seed 2798).
    nic = "nic.example.com"
    objs = [
        device_class(),
        device_class(nic, nic),
        rslice("a", [device(f"gpu-{i}") for i in range(40)], pool="node-a", node="node-a"),
        rslice("b", [device("gpu-0"), device("gpu-1")], pool="node-b", node="node-b"),
        rslice("n", [device("nic-0")], pool="node-b-nic", node="node-b", driver=nic),
    ]
    # Two claims of 20 fit together on node-a: 40 results in all, 20 a claim.
    twenty = template("twenty", count=20)
    got = fit(world(*objs), read_workload([pod("twenty", "twenty"), twenty], nobody))
    assert (got.copies, got.max_copies) == (1, 1), got.blocker
    # Every GPU, and a NIC: node-b would hold both claims, but on node-a the first claim
    # alone is 40 devices, and that error ends the attempt on every node.
    every = template("every", allocationMode="All")
    del every["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"]
    one_nic = template("one-nic")
    one_nic["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = nic
    got = fit(world(*objs), read_workload([pod("every", "one-nic"), every, one_nic], nobody))
    assert (got.copies, got.max_copies, got.stopped) == (0, 0, "aborts"), got.blocker
    assert "more than a claim holds (32)" in got.blocker
