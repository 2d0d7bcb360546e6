"""The cluster a judgement is made for: a Kubernetes release and its DRA feature gates.

"The scheduler" is not one program: each release's kube-scheduler hands the allocator
(k8s.io/dynamic-resource-allocation/structured) the Features its gates turn on, and
`structured.NewAllocator` picks the first implementation (stable, incubating, experimental)
that supports all of them. A `Profile` says which release and gates draview mirrors; the
engine asks it, never a release number, whether a rule applies (`rules.py` names each rule).

The gate tables are read from pkg/features/kube_features.go of each release (the entry of
the newest version not after the release); the implementation table from the
SupportedFeatures of structured/internal/{stable,incubating,experimental} of that release's
k8s.io/dynamic-resource-allocation.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from draview.api.status import ProfileStatus

RELEASES: Final = ("1.34", "1.35", "1.36", "1.37")
NEWEST: Final = RELEASES[-1]

# gate -> (default, stage, locked to its default) per release; only gates the allocator,
# the scheduler's view of slices and claims, or draview's served versions depend on. Each
# release is written as what changed since the one before.
_T, _F = True, False
_134: Final[dict[str, tuple[bool, str, bool]]] = {
    "DRAAdminAccess": (_T, "beta", _F),
    "DRAConsumableCapacity": (_F, "alpha", _F),
    "DRADeviceBindingConditions": (_F, "alpha", _F),
    "DRADeviceTaints": (_F, "alpha", _F),
    "DRAExtendedResource": (_F, "alpha", _F),
    "DRAPartitionableDevices": (_F, "alpha", _F),
    "DRAPrioritizedList": (_T, "beta", _F),
    "DRAResourceClaimDeviceStatus": (_T, "beta", _F),
    "DRASchedulerFilterTimeout": (_T, "beta", _F),
    "DynamicResourceAllocation": (_T, "ga", _F),
}
_135 = {
    **_134,
    "DRADeviceTaintRules": (_F, "alpha", _F),
    "DynamicResourceAllocation": (_T, "ga", _T),
}
_136 = {
    **_135,
    "DRAAdminAccess": (_T, "ga", _T),
    "DRAConsumableCapacity": (_T, "beta", _F),
    "DRADeviceBindingConditions": (_T, "beta", _F),
    "DRADeviceTaintRules": (_F, "beta", _F),
    "DRADeviceTaints": (_T, "beta", _F),
    "DRAExtendedResource": (_T, "beta", _F),
    "DRAListTypeAttributes": (_F, "alpha", _F),
    "DRANodeAllocatableResources": (_F, "alpha", _F),
    "DRAPartitionableDevices": (_T, "beta", _F),
    "DRAPrioritizedList": (_T, "ga", _F),
    "DRAResourceClaimGranularStatusAuthorization": (_T, "beta", _F),
    "DRAResourcePoolStatus": (_F, "alpha", _F),
    "DRAWorkloadResourceClaims": (_F, "alpha", _F),
}
_137 = {
    **_136,
    "DRADerivedAttributes": (_F, "alpha", _F),
    "DRADeviceCompatibilityGroups": (_F, "alpha", _F),
    "DRADeviceTaintRules": (_T, "ga", _F),
    "DRADeviceTaints": (_T, "ga", _F),
    "DRAExtendedResource": (_T, "ga", _T),
    "DRAFractionalCapacityRange": (_T, "beta", _F),
    "DRAOptionalNodeOperations": (_F, "alpha", _F),
    "DRAPartitionableDevicesType": (_F, "alpha", _F),
    "DRAPrioritizedList": (_T, "ga", _T),
    "DRAResourceClaimDeviceStatus": (_T, "ga", _T),
    "DRAWorkloadResourceClaims": (_F, "beta", _F),
}
_GATES: Final[dict[str, dict[str, tuple[bool, str, bool]]]] = {
    "1.34": _134,
    "1.35": _135,
    "1.36": _136,
    "1.37": _137,
}

# The allocator's Features (structured.Features), named as in Go, that each implementation
# of each release supports; NewAllocator takes the first that covers every enabled one.
_ALL_134 = frozenset(
    {
        "AdminAccess",
        "PrioritizedList",
        "PartitionableDevices",
        "DeviceTaints",
        "DeviceBinding",
        "DeviceStatus",
        "ConsumableCapacity",
    }
)
_BASE = frozenset({"AdminAccess", "PrioritizedList", "PartitionableDevices", "DeviceTaints"})
_INCUBATING_136 = _BASE | {"DeviceBindingAndStatus", "ConsumableCapacity"}
_IMPLEMENTATIONS: Final[dict[str, tuple[tuple[str, frozenset[str]], ...]]] = {
    "1.34": (("stable", frozenset()), ("incubating", _BASE), ("experimental", _ALL_134)),
    "1.35": (
        ("stable", frozenset()),
        ("incubating", _BASE),
        ("experimental", _BASE | {"DeviceBindingAndStatus", "ConsumableCapacity"}),
    ),
    "1.36": (
        ("stable", _BASE),
        ("incubating", _INCUBATING_136),
        ("experimental", _INCUBATING_136 | {"ListTypeAttributes"}),
    ),
    "1.37": (
        ("stable", _BASE),
        ("incubating", _INCUBATING_136 | {"FractionalCapacityRange"}),
        (
            "experimental",
            _INCUBATING_136
            | {
                "FractionalCapacityRange",
                "ListTypeAttributes",
                "OptionalNodeOperations",
                "DerivedAttributes",
                "CompatibilityGroups",
            },
        ),
    ),
}


class ProfileError(ValueError):
    """A release or gate list that names no cluster draview can mirror (one line)."""


def parse_release(text: str) -> str:
    """'1.35', 'v1.35.4' or '1.35.4+k3s1' -> '1.35'; anything else is a ProfileError."""
    raw = text.strip()
    parts = raw.lstrip("v").split("+")[0].split("-")[0].split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        raise ProfileError(f"{raw!r} is not a Kubernetes version (want 1.35 or v1.35.4)")
    release = f"{int(parts[0])}.{int(parts[1])}"
    if release in RELEASES:
        return release
    if (int(parts[0]), int(parts[1])) < (1, 34):
        raise ProfileError(
            f"Kubernetes {release} is not supported: it serves no resource.k8s.io/v1; "
            f"draview supports {RELEASES[0]} to {NEWEST}"
        )
    raise ProfileError(
        f"Kubernetes {release} is not supported; draview supports {RELEASES[0]} to {NEWEST}"
    )


def parse_gates(text: str) -> dict[str, bool]:
    """Read 'Name=true,Other=false' the way --feature-gates does."""
    gates: dict[str, bool] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip().lower()
        if not sep or not name:
            raise ProfileError(f"feature gate {item!r}: want Name=true or Name=false")
        if value not in ("true", "false"):
            raise ProfileError(f"feature gate {name}: {value!r} is not true or false")
        gates[name] = value == "true"
    return gates


# What a DRA gate's name starts with: an unknown name like this is a typo or a gate
# draview does not know yet, never a gate it may pass over unnamed.
_DRA_PREFIXES: Final = ("DRA", "DynamicResource")
_EVERY_GATE: Final = frozenset(name for table in _GATES.values() for name in table)


def nearest_gate(name: str, release: str) -> str | None:
    """The release's DRA gate `name` most likely misspells (case, a letter or two)."""
    by_lower = {n.lower(): n for n in _GATES[release]}
    close = difflib.get_close_matches(name.lower(), by_lower, n=1, cutoff=0.8)
    return by_lower[close[0]] if close else None


@dataclass(frozen=True, slots=True)
class GateNames:
    """The names of a gate list that are not DRA gates of a release, sorted out."""

    release: str
    # Look like DRA gates (a DRA name, a near miss of one, a gate of another release)
    # but are none of this release's: a typo, or a gate draview does not know.
    unknown: tuple[str, ...]
    # Not DRA gates at all (a cluster reports every gate it has): they bear on nothing
    # draview judges.
    ignored: tuple[str, ...]

    def problems(self, reported: bool = False) -> list[str]:
        """One phrase per unknown name: given by a user, with the name it most likely
        misspells; `reported` by a cluster (which has the gate), what draview lacks."""
        if reported:
            return [
                f"the cluster reports feature gate {n}, which draview does not know for "
                f"Kubernetes {self.release} (newer than this draview?)"
                for n in self.unknown
            ]
        return [unknown_gate(n, self.release) for n in self.unknown]

    def ignored_note(self) -> str | None:
        if not self.ignored:
            return None
        return (
            f"ignoring {len(self.ignored)} feature gate(s) that are not DRA gates "
            f"(draview judges by DRA gates only): {', '.join(self.ignored)}"
        )


def sort_gates(release: str, names: Iterable[str]) -> GateNames:
    known = _GATES[release]
    unknown: list[str] = []
    ignored: list[str] = []
    for name in sorted(set(names) - known.keys()):
        dra = name.startswith(_DRA_PREFIXES) or name in _EVERY_GATE
        (unknown if dra or nearest_gate(name, release) else ignored).append(name)
    return GateNames(release, tuple(unknown), tuple(ignored))


def unknown_gate(name: str, release: str) -> str:
    """Why a gate name is not one of the release's, and what it may have meant."""
    text = f"feature gate {name} does not exist in Kubernetes {release}"
    elsewhere = [r for r in RELEASES if name in _GATES[r]]
    if elsewhere:
        return f"{text} (it does in {', '.join(elsewhere)})"
    if (guess := nearest_gate(name, release)) is not None:
        return f"{text}: did you mean {guess}?"
    return f"{text} (its DRA gates: {', '.join(known_gates(release))})"


def check_gate_names(gates: Iterable[str]) -> None:
    """Before the release is known (`draview run` asks the cluster): a name that no
    supported release has and that looks like a DRA gate is a ProfileError."""
    for name in sorted(set(gates) - _EVERY_GATE):
        if name.startswith(_DRA_PREFIXES) or nearest_gate(name, NEWEST) is not None:
            raise ProfileError(unknown_gate(name, NEWEST))


def default_gates(release: str) -> dict[str, bool]:
    return {name: spec[0] for name, spec in _GATES[release].items()}


def known_gates(release: str) -> tuple[str, ...]:
    return tuple(sorted(_GATES[release]))


@dataclass(frozen=True, slots=True)
class Profile:
    """A release and the value of every DRA gate it knows; `source` says where they came
    from ('defaults', 'flags', 'cluster', or 'defaults (cluster gates unreadable)')."""

    release: str
    gate_values: tuple[tuple[str, bool], ...]
    source: str = "defaults"

    def gate(self, name: str) -> bool:
        for gate, value in self.gate_values:
            if gate == name:
                return value
        return False

    @property
    def gates(self) -> dict[str, bool]:
        return dict(self.gate_values)

    def changed(self) -> dict[str, bool]:
        """The gates that differ from the release's defaults."""
        defaults = default_gates(self.release)
        return {n: v for n, v in self.gate_values if defaults.get(n) != v}

    @property
    def features(self) -> frozenset[str]:
        """structured.Features as this release's kube-scheduler fills them (AllocatorFeatures
        in plugins/dynamicresources; in 1.34 inline in PreFilter)."""
        g = self.gate
        on: set[str] = set()
        pairs = {
            "AdminAccess": g("DRAAdminAccess"),
            "PrioritizedList": g("DRAPrioritizedList"),
            "PartitionableDevices": g("DRAPartitionableDevices"),
            "DeviceTaints": g("DRADeviceTaints"),
            "ConsumableCapacity": g("DRAConsumableCapacity"),
        }
        if self.release == "1.34":
            pairs["DeviceBinding"] = g("DRADeviceBindingConditions")
            pairs["DeviceStatus"] = g("DRAResourceClaimDeviceStatus")
        else:
            pairs["DeviceBindingAndStatus"] = g("DRADeviceBindingConditions") and g(
                "DRAResourceClaimDeviceStatus"
            )
        if self.release == "1.37":
            # 1.36 passes DRAListTypeAttributes to the CEL cache only; 1.37 to both.
            pairs["FractionalCapacityRange"] = g("DRAFractionalCapacityRange")
            pairs["ListTypeAttributes"] = g("DRAListTypeAttributes")
            pairs["OptionalNodeOperations"] = g("DRAOptionalNodeOperations")
            pairs["DerivedAttributes"] = g("DRADerivedAttributes")
            pairs["CompatibilityGroups"] = g("DRADeviceCompatibilityGroups")
        on.update(name for name, enabled in pairs.items() if enabled)
        return frozenset(on)

    def _picked(self) -> tuple[str, frozenset[str]]:
        """The implementation NewAllocator picks and the Features it supports."""
        wanted = self.features
        for name, supported in _IMPLEMENTATIONS[self.release]:
            if wanted <= supported:
                return name, supported
        return "none", frozenset()  # NewAllocator fails: nothing supports these features

    @property
    def implementation(self) -> str:
        return self._picked()[0]

    def supports(self, feature: str) -> bool:
        """Whether the implementation NewAllocator picks knows `feature` at all (one that
        does not simply ignores the fields the feature adds)."""
        return feature in self._picked()[1]

    @property
    def mirrored(self) -> bool:
        """Whether draview mirrors this release's allocator implementation (each such pair
        is checked against that allocator by tests/fidelity/test_profiles.py). Where it
        does not (an implementation a release's scheduler never picks for the gates
        draview knows), the rules draview knows for the release (engine/rules.py) are
        used."""
        return (self.release, self.implementation) in MIRRORED

    def caveat(self) -> str | None:
        """One line for users where the answers may differ from the scheduler's."""
        if self.mirrored:
            return None
        return (
            f"Kubernetes {self.release}'s allocator ({self.implementation}, as its scheduler "
            "picks it for these gates) is not fully mirrored yet: the answers follow "
            f"draview's rules for {self.release} and may differ from that scheduler's"
        )

    def label(self) -> str:
        """One phrase for output: 'Kubernetes 1.35, default gates' or with the changes."""
        return _label(self)

    def as_status(self) -> ProfileStatus:
        """What a ResourcePoolStatus records of the profile it was judged with: one dict
        per profile, shared by every pool (never mutated)."""
        return _status(self)


# (release, implementation) pairs the engine mirrors; the rest get Profile.caveat().
MIRRORED: Final = frozenset(
    {
        ("1.34", "experimental"),
        ("1.35", "incubating"),
        ("1.35", "experimental"),
        ("1.36", "incubating"),
        ("1.37", "incubating"),
        ("1.37", "experimental"),
    }
)

# The gates whose value changes what the allocator does (Features, the CEL environment,
# the slice tracker); the rest are recorded nowhere.
MATTERS: Final = frozenset(
    {
        "DRAAdminAccess",
        "DRAConsumableCapacity",
        "DRADerivedAttributes",
        "DRADeviceBindingConditions",
        "DRADeviceCompatibilityGroups",
        "DRADeviceTaintRules",
        "DRADeviceTaints",
        "DRAFractionalCapacityRange",
        "DRAListTypeAttributes",
        "DRAOptionalNodeOperations",
        "DRAPartitionableDevices",
        "DRAPrioritizedList",
        "DRAResourceClaimDeviceStatus",
    }
)


@lru_cache(maxsize=32)
def _label(profile: Profile) -> str:
    """Profile.label, made once per profile: a capacity probe's answer says it at every
    asking."""
    changed = profile.changed()
    if not changed:
        return f"Kubernetes {profile.release}, default gates"
    text = ",".join(f"{n}={'true' if v else 'false'}" for n, v in sorted(changed.items()))
    return f"Kubernetes {profile.release}, gates {text}"


@lru_cache(maxsize=32)
def _status(profile: Profile) -> ProfileStatus:
    return {
        "kubernetesVersion": profile.release,
        "allocator": profile.implementation,
        "mirrored": profile.mirrored,
        "featureGates": {n: v for n, v in profile.gate_values if n in MATTERS},
        "source": profile.source,
    }


def make_profile(
    release: str | None = None,
    gates: Mapping[str, bool] | None = None,
    source: str | None = None,
    *,
    strict: bool = True,
) -> Profile:
    """The profile of `release` (default the newest) with `gates` over its defaults.

    strict: a name that looks like a DRA gate but is none of the release's (`sort_gates`:
    a typo is most useful as an error), or a locked gate set away from its default, is a
    ProfileError (kube-apiserver refuses to start on either). Live, where the cluster
    reports gates, strict is off and such names are left out; callers say which
    (`sort_gates`). Names that are not DRA gates are left out either way.
    """
    rel = parse_release(release) if release else NEWEST
    values = default_gates(rel)
    if strict and gates and (problems := sort_gates(rel, gates).problems()):
        raise ProfileError("; ".join(problems))
    for name, value in (gates or {}).items():
        spec = _GATES[rel].get(name)
        if spec is None:
            continue
        if strict and spec[2] and value != spec[0]:
            raise ProfileError(
                f"feature gate {name} is locked to {str(spec[0]).lower()} in Kubernetes {rel}"
            )
        values[name] = value
    if source is None:
        source = "flags" if gates else "defaults"
    return Profile(rel, tuple(sorted(values.items())), source)


def all_gates_on(release: str) -> Profile:
    """Every DRA gate of the release on: what e2e/cluster starts its control plane with."""
    return make_profile(release, {n: True for n in _GATES[release]}, "all gates", strict=False)


# What draview judges with unless told otherwise: the newest release with its default
# gates, as a cluster of that release runs unless its operators changed them.
DEFAULT: Final = make_profile(NEWEST)


_METRIC = re.compile(r"^kubernetes_feature_enabled\{([^}]*)\}\s+(\S+)", re.MULTILINE)
_NAME = re.compile(r'(?:^|,)\s*name="([^"]+)"')


def gates_from_metrics(text: str) -> dict[str, bool]:
    """The gates an API server reports in its `kubernetes_feature_enabled` metric
    (Prometheus text from /metrics); empty when the metric is absent."""
    gates: dict[str, bool] = {}
    for match in _METRIC.finditer(text):
        name = _NAME.search(match.group(1))
        if name is None:
            continue
        try:
            gates[name.group(1)] = float(match.group(2)) != 0
        except ValueError:
            continue
    return gates


def cluster_profile(git_version: str, metrics: str | None) -> Profile:
    """The profile of a live cluster: its release from /version, its gates from
    /metrics. Without readable gates, the release's defaults, and the source says so.
    A release draview does not support is a ProfileError."""
    release = parse_release(git_version)
    gates = gates_from_metrics(metrics) if metrics is not None else {}
    if not gates:
        return make_profile(release, source=UNREAD)
    return make_profile(release, gates, "cluster", strict=False)


# The source of a live profile whose gates could not be read.
UNREAD: Final = "defaults (cluster gates unreadable)"
