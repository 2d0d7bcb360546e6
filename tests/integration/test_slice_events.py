"""Driver authors see pool problems where they look: `kubectl describe resourceslice`."""

from __future__ import annotations

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
