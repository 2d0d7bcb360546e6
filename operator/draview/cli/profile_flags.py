"""--kubernetes-version and --feature-gates: which scheduler `analyze` and `kubectl dra`
mirror when they compute availability themselves."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from draview.engine.profile import (
    DEFAULT,
    RELEASES,
    Profile,
    make_profile,
    parse_gates,
    sort_gates,
)

HELP_VERSION = (
    f"judge as the scheduler of this Kubernetes release ({', '.join(RELEASES)}) with its "
    f"default feature gates (default: {DEFAULT.release} with its default gates"
)


def add_profile_flags(group: Any, *, suppress: bool = False, live: bool = False) -> None:
    """Add the two flags to a parser or argument group. `live`: the help says that without
    them a cluster is asked."""
    default: Any = argparse.SUPPRESS if suppress else None
    asked = "; against a cluster: the cluster's own release and gates)" if live else ")"
    group.add_argument(
        "--kubernetes-version",
        metavar="VERSION",
        default=default,
        help=HELP_VERSION + asked,
    )
    group.add_argument(
        "--feature-gates",
        metavar="NAME=BOOL,...",
        default=default,
        help="DRA feature gates over the release's defaults, as kube-scheduler's "
        "--feature-gates (e.g. DRAPartitionableDevices=true)",
    )


def given(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "kubernetes_version", None) or getattr(args, "feature_gates", None))


def profile_from_args(
    args: argparse.Namespace, warn: Callable[[str], None] | None = None
) -> Profile:
    """The profile the flags name (ProfileError, one line, when they name none: a
    misspelt DRA gate among them). Gates that are not DRA gates are left out, and said
    to `warn`."""
    version = getattr(args, "kubernetes_version", None)
    gates = parse_gates(getattr(args, "feature_gates", None) or "")
    if not version and not gates:
        return DEFAULT
    # Gates go over the release's defaults: the named release's, else the default one's.
    profile = make_profile(version or DEFAULT.release, gates, "flags" if gates else "defaults")
    if warn is not None and (note := sort_gates(profile.release, gates).ignored_note()):
        warn(note)
    return profile
