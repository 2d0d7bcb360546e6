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
    "request_timeout": None,
    "chunk_size": 500,
    "filename": [],
    "live": False,
    "kubernetes_version": None,
    "feature_gates": None,
}


_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """kubectl's --request-timeout: a number of seconds, or Go durations such as `1m30s`;
    0 means no limit."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    total, number = 0.0, ""
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isdigit() or ch == ".":
            number += ch
            i += 1
            continue
        unit = "ms" if text.startswith("ms", i) else ch
        if unit not in _UNITS or not number:
            raise ValueError(f"{text!r} is not a duration (examples: 30s, 2m, 1h, 0)")
        total += float(number) * _UNITS[unit]
        number = ""
        i += len(unit)
    if number:
        raise ValueError(f"{text!r} is not a duration: a unit must follow {number}")
    return total


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
        "--kubectl",
        metavar="PATH",
        help="read the cluster through this kubectl binary instead of asking the API server "
        "directly (also $DRAVIEW_KUBECTL): for credentials only kubectl understands",
    )
    g.add_argument(
        "--request-timeout",
        metavar="DURATION",
        help="how long one request to the API server may take (1s, 2m, 3h; 0: no limit, "
        "the default)",
    )
    g.add_argument(
        "--chunk-size",
        type=int,
        metavar="N",
        help="read large lists in pages of N objects (default 500; 0: in one piece)",
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
