"""`e2e/node/down` leaves nothing behind on the host: no process of the node, no mount under
its directories, no cgroup of its Pods, no interface, network namespace or iptables rule
it made, and the sysctls the kubelet changed back as `up` found them. Runs last: it stops
the node the other tests used."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from node import NODE_DIR, state_dir

pytestmark = pytest.mark.cluster


def lines(*cmd: str) -> list[str]:
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return [line for line in out.stdout.splitlines() if line.strip()]


def test_down_leaves_nothing_behind() -> None:
    state = state_dir()
    recorded = (state / "sysctls").read_text().split()
    assert recorded, "up recorded no sysctls"
    down = subprocess.run(
        [str(NODE_DIR / "down")], capture_output=True, text=True, timeout=300, check=False
    )
    assert down.returncode == 0, down.stderr

    processes = lines("ps", "-eo", "args")
    ours = [p for p in processes if str(state) in p or "draview-node" in p or "/node-bin/" in p]
    assert not ours, ours

    mounts = [m for m in Path("/proc/self/mountinfo").read_text().splitlines() if str(state) in m]
    assert not mounts, mounts

    cgroups = [str(p) for p in Path("/sys/fs/cgroup").glob("*/draview-node")]
    assert not cgroups, cgroups

    links = lines("ip", "-o", "link", "show")
    assert not [lk for lk in links if "draview" in lk or " veth" in lk], links
    assert not [n for n in lines("ip", "netns", "list") if n.startswith("cni-")]

    for table in ("filter", "nat", "mangle"):
        rules = lines("iptables", "-w", "-t", table, "-S")
        left = [r for r in rules if "KUBE-" in r or "draview-node" in r]
        assert not left, (table, left)

    for pair in recorded:
        key, value = pair.split("=", 1)
        assert lines("sysctl", "-n", key) == [value], key
