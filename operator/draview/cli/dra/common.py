"""Flags every subcommand takes (kubectl's), errors and exit codes."""

from __future__ import annotations

import argparse
from typing import Any

from draview.cli.limits import add_limit_flags
from draview.cli.profile_flags import add_profile_flags

EXIT_OK = 0
EXIT_ERROR = 1  # not found, runtime error
EXIT_USAGE = 2


class CliError(Exception):
    """A failure reported as one line on stderr with exit code 1."""


class UsageError(CliError):
    """Bad arguments: exit code 2."""


DEFAULTS: dict[str, Any] = {
    "kubeconfig": None,
    "context": None,
    "namespace": None,
    "all_namespaces": False,
    "output": None,
    "kubectl": None,
    "filename": [],
    "live": False,
    "kubernetes_version": None,
    "feature_gates": None,
}


def common_parser() -> argparse.ArgumentParser:
    """kubectl's flags. Defaults are suppressed so the flags may come before or after the
    subcommand (`kubectl dra --context x get pools` and `kubectl dra get pools --context x`);
    `fill_defaults` sets what was not given."""
    p = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    g = p.add_argument_group("kubectl options")
    g.add_argument("--kubeconfig", help="path to the kubeconfig file")
    g.add_argument("--context", help="kubeconfig context to use")
    g.add_argument("-n", "--namespace", help="namespace (default: the context's, else default)")
    g.add_argument("-A", "--all-namespaces", action="store_true", help="across all namespaces")
    g.add_argument(
        "-o",
        "--output",
        choices=("wide", "yaml", "json"),
        help="output format: wide, yaml or json (default: human-readable)",
    )
    g.add_argument(
        "--kubectl", metavar="PATH", help="kubectl binary (default $DRAVIEW_KUBECTL, else kubectl)"
    )
    g.add_argument(
        "-f",
        "--filename",
        action="append",
        metavar="DUMP",
        help="read a cluster dump instead of a cluster (repeatable; - for stdin), e.g. "
        "`kubectl get resourceslices,resourceclaims,deviceclasses,devicetaintrules,nodes "
        "-A -o yaml`",
    )
    g.add_argument(
        "--live",
        action="store_true",
        help="compute availability from slices and claims even when the draview operator "
        "publishes ResourceSliceStatus/ResourcePoolStatus objects",
    )
    add_profile_flags(p.add_argument_group("cluster profile"), suppress=True, live=True)
    add_limit_flags(g, suppress=True)
    return p


def fill_defaults(args: argparse.Namespace) -> argparse.Namespace:
    for key, value in DEFAULTS.items():
        if not hasattr(args, key):
            setattr(args, key, list(value) if isinstance(value, list) else value)
    return args
