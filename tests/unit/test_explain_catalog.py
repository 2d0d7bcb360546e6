"""The catalog explanations read, kept up to date a pool at a time, explains exactly as
one built afresh from the same pools; explanations in steps answer as in one piece."""

from __future__ import annotations

from typing import Any

from builders import DRIVER, claim, device, device_class, result, rslice, taint_rule, world

from draview.api.claims import ResourceClaim
from draview.engine.pool import PoolResult
from draview.engine.world import compute_world
from draview.explain import Catalog, Explainer
from draview.explain.steps import finish

CLASS = device_class()


def pending(name: str, count: int = 1, **exactly: Any) -> ResourceClaim:
    obj = claim(name)
    obj["spec"]["devices"]["requests"][0]["exactly"].update(count=count, **exactly)
    return ResourceClaim.from_object(obj)


CLAIMS = [
    pending("one"),
    pending("two", 2),
    pending("four", 4),
    pending("h100", selectors=[{"cel": {"expression": "device.attributes['model'] == 'H100'"}}]),
]


def pools(*objects: dict[str, Any]) -> tuple[list[PoolResult], Any]:
    w = world(CLASS, *objects)
    return compute_world(w), w


def summaries(catalog: Catalog, w: Any) -> list[tuple[str, str]]:
    ex = Explainer()
    out = []
    for c in CLAIMS:
        exp = finish(
            ex.explain_steps(
                c,
                catalog.devices,
                w.classes,
                results=catalog.results.values(),
                rules=w.taint_rules,
                gather=catalog.gather,
                shaky=catalog.shaky,
            )
        )
        out.append((exp.verdict, exp.summary))
    return out


def test_a_catalog_kept_up_to_date_explains_as_one_built_afresh() -> None:
    before, _ = pools(
        rslice("a", [device("gpu-0", model="H100"), device("gpu-1")], pool="a", node="n-a"),
        rslice("b", [device("gpu-0"), device("gpu-1")], pool="b", node="n-b"),
        rslice("c", [device("gpu-0")], pool="c", node="n-c"),
        claim("busy", result("gpu-0", pool="b")),
    )
    catalog = Catalog.build(before)
    # Then: a's H100 is taken, c is gone, d is new, and b is as it was.
    after, w = pools(
        rslice("a", [device("gpu-0", model="H100"), device("gpu-1")], pool="a", node="n-a"),
        rslice("b", [device("gpu-0"), device("gpu-1")], pool="b", node="n-b"),
        rslice("d", [device("gpu-0"), device("gpu-1"), device("gpu-2")], pool="d", node="n-d"),
        claim("busy", result("gpu-0", pool="b")),
        claim("took", result("gpu-0", pool="a")),
    )
    changed = {r.key[1]: r for r in after}
    catalog.put(changed["a"])
    catalog.drop((DRIVER, "c"))
    catalog.put(changed["d"])
    fresh = Catalog.build(after)
    assert summaries(catalog, w) == summaries(fresh, w)
    assert summaries(catalog, w) != summaries(Catalog.build(before), w)
    assert sorted(d.id for d in catalog.devices.devices) == sorted(
        d.id for d in fresh.devices.devices
    )
    assert catalog.gather.nodes() == fresh.gather.nodes() == ("n-a", "n-b", "n-d")
    assert (DRIVER, "c") not in catalog.devices.pools and len(catalog) == 3


def test_taints_follow_the_rules_the_catalog_is_built_with() -> None:
    results, w = pools(
        rslice("a", [device("gpu-0")], pool="a", node="n-a"),
        taint_rule("broken", driver=DRIVER),
    )
    assert all(d.taints for d in Catalog.build(results, w.taint_rules).devices.devices)
    assert not any(d.taints for d in Catalog.build(results).devices.devices)


def test_an_explanation_in_steps_answers_as_in_one_piece() -> None:
    results, w = pools(
        *(
            rslice(f"s{i}", [device(f"gpu-{j}") for j in range(8)], pool=f"p{i}", node=f"n{i}")
            for i in range(20)
        ),
    )
    catalog = Catalog.build(results)
    ex = Explainer()
    for c in [*CLAIMS, pending("many", 9)]:
        steps = ex.explain_steps(c, catalog.devices, w.classes, results=results)
        taken = 0
        while True:
            try:
                next(steps)
                taken += 1
            except StopIteration as end:
                exp = end.value
                break
        whole = ex.explain(c, catalog.devices, w.classes, results=results)
        assert (exp.verdict, exp.summary) == (whole.verdict, whole.summary)
        if exp.verdict != "Error":  # an error on the first node ends the search there
            assert taken > 20  # one step per node searched, at least
