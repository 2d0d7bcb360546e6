"""Driver authors see pool problems where they look: `kubectl describe resourceslice`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from operator_helpers import rslice, uniq
from operator_proc import Operator

from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster


def test_invalid_and_incomplete_pools_show_in_kubectl_describe_resourceslice(
    crds: KubeCluster, tmp_path: Path
) -> None:
    dup, half = uniq("dup"), uniq("half")
    names = [f"{dup}-a", f"{dup}-b", f"{half}-a"]
    crds.create(rslice(names[0], dup, [{"name": "gpu-0"}], count=2))
    crds.create(rslice(names[1], dup, [{"name": "gpu-0"}], count=2))
    crds.create(rslice(names[2], half, [{"name": "gpu-0"}], count=2))
    args = ("--leader-elect", "false", "--pending-threshold", "1", "--explain-interval", "1")
    op = Operator(crds.kubeconfig, args).start(tmp_path)
    try:
        op.wait_ready()

        def described(name: str, reason: str) -> str | None:
            out = crds.check("describe", "resourceslice", name)
            return out if reason in out else None

        for name in names[:2]:
            out = crds.wait_for(
                f"DuplicateDevice on {name}",
                lambda n=name: described(n, "DuplicateDevice"),
                timeout=60,
            )
            assert "Warning" in out and "gpu-0" in out
        out = crds.wait_for(
            "PoolIncomplete", lambda: described(names[2], "PoolIncomplete"), timeout=60
        )
        assert "1 of 2" in out or "1/2" in out or "slices" in out
    finally:
        assert op.stop() == 0, op.logs()
        for name in names:
            crds.check("delete", "resourceslice", name, "--ignore-not-found")


def test_an_incomplete_update_shows_on_the_slices_of_its_newest_generation(
    crds: KubeCluster, tmp_path: Path
) -> None:
    """make demo's npu-node-1: generation 1 whole and stale, generation 2 one slice of
    two. `kubectl describe` of the slice the driver just published shows why the pool
    serves nothing; the old generation's slices, which sort first, get no Event."""
    pool = uniq("update")
    old = [f"{pool}-gen1-a", f"{pool}-gen1-b"]
    new = f"{pool}-gen2-a"
    crds.create(
        *(rslice(n, pool, [{"name": f"npu-{i}"}], count=2) for i, n in enumerate(old)),
        rslice(new, pool, [{"name": "npu-0"}], count=2, generation=2),
    )
    args = ("--leader-elect", "false", "--pending-threshold", "1", "--explain-interval", "1")
    op = Operator(crds.kubeconfig, args).start(tmp_path)
    try:
        op.wait_ready()

        def reasons(name: str) -> list[str]:
            selector = f"involvedObject.name={name}"
            out = crds.check(
                "get", "events", "-n", "default", "-o", "json", "--field-selector", selector
            )
            return [str(e.get("reason")) for e in json.loads(out)["items"]]

        crds.wait_for(
            f"PoolIncomplete on {new}", lambda: "PoolIncomplete" in reasons(new), timeout=60
        )
        out = crds.check("describe", "resourceslice", new)
        assert "1 of 2" in out and "generation 2" in out, out
        # The reporter posts every Event of a problem in one pass: had the old slices
        # been chosen, their Events would be there by now.
        for name in old:
            assert reasons(name) == [], name
    finally:
        assert op.stop() == 0, op.logs()
        crds.check("delete", "resourceslice", *old, new, "--ignore-not-found")
