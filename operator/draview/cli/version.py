"""`draview version` (and `--version`): which draview this is, which Kubernetes releases
it judges, on which Python and dependencies. `kubectl dra version` adds the cluster's
side (cli/dra/version.py).

The `-o json|yaml` object is a documented schema (docs/kubectl-dra.md): every key is
always there, so that scripts and bug reports can rely on it.
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import platform
import re
import sys
from typing import Any

from draview.api.status import API_VERSION
from draview.cli.output import dump
from draview.engine.profile import DEFAULT, RELEASES

DIST = "draview"
KIND = "Version"
# Imported by draview itself, though it comes with kubernetes-asyncio: its version
# matters to the operator's requests as much as the declared ones do.
ALSO = ("aiohttp",)


def package_version() -> str:
    try:
        return metadata.version(DIST)
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def _installed(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def dependencies() -> dict[str, str]:
    """name -> installed version of every runtime dependency the package declares (not
    the extras, such as test), plus ALSO."""
    try:
        declared = metadata.requires(DIST) or []
    except metadata.PackageNotFoundError:
        declared = []
    names = [
        re.split(r"[\s<>=!~;\[(]", req, maxsplit=1)[0] for req in declared if "extra ==" not in req
    ]
    return {name: _installed(name) for name in sorted({*names, *ALSO}, key=str.lower)}


def facts() -> dict[str, Any]:
    """What this installation is; the object `-o json|yaml` prints."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "draview": package_version(),
        "kubernetesReleases": list(RELEASES),
        "defaultRelease": DEFAULT.release,
        "python": platform.python_version(),
        "platform": f"{platform.system()}-{platform.machine()}".lower(),
        "dependencies": dependencies(),
    }


def one_line() -> str:
    """What --version prints."""
    return f"draview {package_version()} (judges Kubernetes {', '.join(RELEASES)})"


def rows(info: dict[str, Any]) -> list[tuple[str, str]]:
    """The human-readable lines of `facts()`, as (label, value)."""
    deps = ", ".join(f"{n} {v}" for n, v in info["dependencies"].items())
    return [
        ("draview", info["draview"]),
        (
            "Kubernetes releases",
            f"{', '.join(info['kubernetesReleases'])} (default {info['defaultRelease']})",
        ),
        ("Python", f"{info['python']} ({info['platform']})"),
        ("Dependencies", deps),
    ]


def render(pairs: list[tuple[str, str]]) -> str:
    width = max(len(label) for label, _ in pairs) + 2
    return "".join(f"{label + ':':<{width}}{value}\n" for label, value in pairs)


def print_version(info: dict[str, Any], output: str | None, pairs: list[tuple[str, str]]) -> None:
    sys.stdout.write(dump(info, output) if output in ("json", "yaml") else render(pairs))


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "version",
        help="print draview's version and the Kubernetes releases it judges",
        description="Print draview's version, the Kubernetes releases it judges, and the "
        "Python and dependency versions it runs with.",
    )
    p.add_argument("-o", "--output", choices=("json", "yaml"), help="output format")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    info = facts()
    print_version(info, args.output, rows(info))
    return 0
