"""`kubectl dra version`: `draview version`, plus kubectl's and the cluster's side: the
server's release and the profile draview detects for it (release, allocator, DRA gates:
what the operator logs at start-up as "judging as"), or why it cannot be read.

As `kubectl version`: exit 1 when the cluster cannot be read (everything else is
printed all the same); `--client` asks no cluster.
"""

from __future__ import annotations

import argparse
from typing import Any

from draview.cli.dra.cluster import Cluster
from draview.cli.dra.common import CliError
from draview.cli.dra.kubectl import Kubectl
from draview.cli.dra.source import Source, connect, warn
from draview.cli.profile_flags import given
from draview.cli.version import facts, print_version, rows
from draview.engine.profile import Profile


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "version",
        parents=[common],
        help="print draview's version and the profile it detects for the cluster",
        description="Print draview's version, the Kubernetes releases it judges, the Python "
        "and dependency versions, kubectl's version and, for the cluster of the current "
        "context, its release and the profile draview judges it by (release, allocator, "
        "DRA feature gates and where they were read). Exit 1 when the cluster cannot be "
        "read; --client asks no cluster.",
    )
    p.add_argument("--client", action="store_true", help="only this machine: ask no cluster")
    p.set_defaults(func=run)


def _unread(error: str | None = None) -> dict[str, Any]:
    """The cluster's part of the object: every key always there, `error` when unread."""
    return {
        "serverVersion": None,
        "profile": None,
        "label": None,
        "unknownGates": [],
        "ignoredGates": [],
        "error": error,
    }


def _cluster(cluster: Cluster) -> dict[str, Any]:
    out = _unread()
    try:
        out["serverVersion"] = cluster.versions()[1]
        profile: Profile = cluster.cluster_profile()
    except CliError as exc:
        out["error"] = str(exc)
        return out
    out["profile"] = profile.as_status()
    out["label"] = profile.label()
    if cluster.gate_names is not None:
        out["unknownGates"] = list(cluster.gate_names.unknown)
        out["ignoredGates"] = list(cluster.gate_names.ignored)
    return out


def _cluster_rows(cluster: dict[str, Any]) -> list[tuple[str, str]]:
    if cluster["error"] is not None:
        return [("Cluster profile", f"cannot read it: {cluster['error']}")]
    profile = cluster["profile"]
    pairs = [
        ("Server", str(cluster["serverVersion"])),
        (
            "Cluster profile",
            f"{cluster['label']} (allocator {profile['allocator']}, gates: {profile['source']})",
        ),
    ]
    if cluster["unknownGates"]:
        unknown = ", ".join(cluster["unknownGates"])
        pairs.append(("Unknown gates", f"{unknown} (draview does not know them: judged without)"))
    if cluster["ignoredGates"]:
        count = len(cluster["ignoredGates"])
        pairs.append(("Ignored gates", f"{count} that are not DRA gates (-o yaml lists them)"))
    return pairs


def _kubectl_version(args: argparse.Namespace) -> str | None:
    """kubectl's own version when there is a kubectl (the plugin does not need one)."""
    try:
        return Kubectl.find(args.kubectl, args.kubeconfig, args.context).versions()[0]
    except CliError:
        return None


def run(args: argparse.Namespace, source: Source | None = None) -> int:
    if given(args):  # they name a profile to judge as; this command reports the cluster's
        warn("--kubernetes-version and --feature-gates are not used by version")
    info = facts()
    info["kubectl"] = None
    info["cluster"] = None
    pairs = rows(info)
    code = 0
    if not args.client and not args.filename:  # a dump (-f) has no cluster to ask
        info["kubectl"] = _kubectl_version(args)
        try:
            cluster = connect(args)
        except CliError as exc:  # no kubectl (--kubectl), no kubeconfig
            info["cluster"] = _unread(str(exc))
            pairs += [("kubectl", str(info["kubectl"])), *_cluster_rows(info["cluster"])]
            code = 1
        else:
            info["cluster"] = found = _cluster(cluster)
            pairs += [("kubectl", str(info["kubectl"])), *_cluster_rows(found)]
            code = 1 if found["error"] is not None else 0
    print_version(info, args.output, pairs)
    return code
