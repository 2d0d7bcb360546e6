"""Profiles (a release and its DRA gates) and the rules each one turns on or off.

The gate tables come from each release's kube_features.go and the implementation choice
from each release's structured package; tests/fidelity checks the rules against each
release's allocator. These tests pin what the tables say and what the engine does with a
rule off, on small worlds.
"""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest
from builders import claim, device, result, rslice, taint_rule
from engine_helpers import pool, states

from draview.engine.profile import (
    DEFAULT,
    RELEASES,
    UNREAD,
    Profile,
    ProfileError,
    all_gates_on,
    cluster_profile,
    gates_from_metrics,
    make_profile,
    parse_gates,
    parse_release,
)
from draview.engine.rules import TABLE, Rules, differences, rules_for

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "release"),
    [("1.35", "1.35"), ("v1.35.4", "1.35"), ("1.37.2+k3s1", "1.37"), ("v1.34.0-eks-1", "1.34")],
)
def test_release_forms(text: str, release: str) -> None:
    assert parse_release(text) == release


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1.33", "Kubernetes 1.33 is not supported: it serves no resource.k8s.io/v1"),
        ("1.38", "Kubernetes 1.38 is not supported; draview supports 1.34 to 1.37"),
        ("latest", "'latest' is not a Kubernetes version"),
    ],
)
def test_unsupported_releases_are_one_line(text: str, message: str) -> None:
    with pytest.raises(ProfileError, match=re.escape(message)) as info:
        parse_release(text)
    assert "\n" not in str(info.value)


def test_releases_match_the_build_table() -> None:
    """e2e/releases (what the cluster and oracle build) names the same releases."""
    lines = (REPO / "e2e" / "releases").read_text().splitlines()
    built = [ln.split()[0] for ln in lines if ln and ln[0].isdigit()]
    assert tuple(built) == RELEASES


def test_gates_parse_like_feature_gates() -> None:
    assert parse_gates("DRADeviceTaints=true, DRAPartitionableDevices=False") == {
        "DRADeviceTaints": True,
        "DRAPartitionableDevices": False,
    }
    with pytest.raises(ProfileError, match=r"want Name=true"):
        parse_gates("DRADeviceTaints")
    with pytest.raises(ProfileError, match=r"'yes' is not true or false"):
        parse_gates("DRADeviceTaints=yes")


def test_gates_a_release_does_not_have_or_locks_are_refused() -> None:
    with pytest.raises(
        ProfileError, match=r"DRAListTypeAttributes does not exist in Kubernetes 1\.35"
    ):
        make_profile("1.35", {"DRAListTypeAttributes": True})
    with pytest.raises(ProfileError, match=r"DRAAdminAccess is locked to true in Kubernetes 1\.36"):
        make_profile("1.36", {"DRAAdminAccess": False})
    # Gates that do not touch DRA are none of draview's business.
    assert make_profile("1.35", {"SomeOtherGate": True}).changed() == {}


@pytest.mark.parametrize(
    ("profile", "implementation"),
    [
        # 1.34's default DRAResourceClaimDeviceStatus is a Feature incubating lacks.
        (make_profile("1.34"), "experimental"),
        (make_profile("1.35"), "incubating"),
        (make_profile("1.36"), "incubating"),
        (all_gates_on("1.36"), "incubating"),  # 1.36 passes list types to CEL only
        (make_profile("1.37"), "incubating"),
        (all_gates_on("1.37"), "experimental"),
        (all_gates_on("1.35"), "experimental"),
    ],
)
def test_the_implementation_the_scheduler_picks(profile: Profile, implementation: str) -> None:
    assert profile.implementation == implementation


def test_default_release_gates_differ_where_the_releases_do() -> None:
    assert differences(make_profile("1.35")) == [
        "taints",
        "taint_rules",
        "partitionable",
        "shareable",
        "pools_sorted",
        "search_resumes",
        "list_type_attributes",
        "node_slices_first",
        "shares_debit_counters",
        "refusals_release_counters",
        "counters_by_pool_id",
        # DRADeviceBindingConditions is alpha: such devices are never handed out, and
        # 1.35's incubating GatherPools does not put their pools last.
        "binding_conditions",
        "binding_pools_last",
        "includes_function",
    ]
    assert differences(make_profile("1.36")) == ["taint_rules", "list_type_attributes"]
    # 1.37 reads counter slices per node, counts static capacity for "all", works ranges
    # in milli-units and skips slices with compatibility groups (alpha, off); its CEL
    # reads list attributes whatever the gate, its constraints compare lists as sets only
    # with the gate, and derived attributes need their own gate.
    assert differences(make_profile("1.37")) == [
        "counter_slices_everywhere",
        "shares_debit_once",
        "all_mode_static_capacity",
        "fractional_capacity_range",
        "compatibility_groups_skip_slices",
        "distinct_every_device",
        "derived_attributes_refused",
    ]
    assert differences(all_gates_on("1.37")) == [
        "counter_slices_everywhere",
        "shares_debit_once",
        "all_mode_static_capacity",
        "fractional_capacity_range",
        "compatibility_groups",
        "node_operations_checked",
        "optional_node_operations",
        "list_constraints",
        "distinct_every_device",
        "derived_attributes",
    ]
    assert "invalid_pool_is_node_local" in differences(make_profile("1.34"))
    assert differences(all_gates_on("1.36")) == []
    assert make_profile("1.37") == DEFAULT
    assert make_profile("1.35").label() == "Kubernetes 1.35, default gates"
    assert make_profile("1.35", {"DRADeviceTaints": True}).label() == (
        "Kubernetes 1.35, gates DRADeviceTaints=true"
    )


def test_every_rule_has_its_row_in_the_table() -> None:
    assert list(TABLE) == [f.name for f in fields(Rules)]
    assert all(len(row) == 3 and all(row) for row in TABLE.values())


def test_status_names_the_profile() -> None:
    status = make_profile("1.35", source="cluster").as_status()
    assert status["kubernetesVersion"] == "1.35"
    assert status["allocator"] == "incubating"
    assert status["source"] == "cluster"
    gates = status["featureGates"]
    assert isinstance(gates, dict) and gates["DRAPartitionableDevices"] is False


# -- the rules on small worlds ------------------------------------------------------------

TAINT = [{"key": "maintenance", "effect": "NoSchedule"}]


def test_taints_block_only_where_the_gate_is_on() -> None:
    s = rslice("s", [device("gpu-0", taints=TAINT)])
    assert states(pool(s))["gpu-0"] == ("Unavailable", "Tainted")
    assert states(pool(s, profile=make_profile("1.36")))["gpu-0"] == ("Unavailable", "Tainted")
    assert states(pool(s, profile=make_profile("1.35")))["gpu-0"] == ("Available", None)


def test_taint_rules_apply_only_where_the_tracker_applies_them() -> None:
    s = rslice("s", [device("gpu-0")])
    rule = taint_rule("drain")
    assert states(pool(s, rule))["gpu-0"] == ("Unavailable", "Tainted")
    # 1.36 taints devices but its DRADeviceTaintRules gate is off by default.
    assert states(pool(s, rule, profile=make_profile("1.36")))["gpu-0"] == ("Available", None)
    on = make_profile("1.36", {"DRADeviceTaintRules": True})
    assert states(pool(s, rule, profile=on))["gpu-0"] == ("Unavailable", "Tainted")


def test_without_consumable_capacity_a_share_takes_the_device_whole() -> None:
    s = rslice("s", [device("nic-0", shareable=True, capacity={"bandwidth": "10G"})])
    c = claim("c", result("nic-0", share="a", consumed={"bandwidth": "1G"}))
    assert states(pool(s, c))["nic-0"] == ("PartiallyAllocated", None)
    assert states(pool(s, c, profile=make_profile("1.35")))["nic-0"] == ("Allocated", None)


def test_without_partitionable_devices_counters_and_their_slices_are_skipped() -> None:
    counters = rslice("counters", [], count=2, counter_sets={"gpu-0-set": {"memory": "80Gi"}})
    devices = rslice(
        "devices",
        [
            device("whole"),
            device("half", counters={"gpu-0-set": {"memory": "40Gi"}}),
        ],
        count=2,
    )
    on = pool(counters, devices)
    assert states(on, "devices") == {"whole": ("Available", None), "half": ("Available", None)}
    off = pool(counters, devices, profile=make_profile("1.35"))
    # GatherPools skips the counter slice, yet it still counts towards the two slices:
    # the pool is complete, the plain device serves, the partition never does.
    assert states(off, "devices") == {
        "whole": ("Available", None),
        "half": ("Unavailable", "PartitionableDevicesDisabled"),
    }


def test_a_profile_is_checked_by_the_rules_not_by_its_number() -> None:
    # 1.35 with the gates turned on behaves like a release that has them on by default.
    s = rslice("s", [device("gpu-0", taints=TAINT)])
    on = make_profile("1.35", {"DRADeviceTaints": True})
    assert rules_for(on).taints
    assert states(pool(s, profile=on))["gpu-0"] == ("Unavailable", "Tainted")


METRICS = """# HELP kubernetes_feature_enabled [BETA] The stage and enablement of a k8s feature.
# TYPE kubernetes_feature_enabled gauge
kubernetes_feature_enabled{name="DRAAdminAccess",stage="BETA"} 1
kubernetes_feature_enabled{name="DRADeviceTaints",stage="ALPHA"} 1
kubernetes_feature_enabled{name="DRAPartitionableDevices",stage="ALPHA"} 0
kubernetes_feature_enabled{stage="",name="SomethingElse"} 1
apiserver_request_total{code="200"} 5
"""


def test_gates_are_read_from_the_api_servers_metric() -> None:
    assert gates_from_metrics(METRICS) == {
        "DRAAdminAccess": True,
        "DRADeviceTaints": True,
        "DRAPartitionableDevices": False,
        "SomethingElse": True,
    }
    live = cluster_profile("v1.35.4", METRICS)
    assert (live.release, live.source) == ("1.35", "cluster")
    assert live.gate("DRADeviceTaints") and rules_for(live).taints
    # Forbidden (None) or without the metric: the release's defaults, and it says so.
    for text in (None, "apiserver_request_total 5\n"):
        unread = cluster_profile("v1.35.4", text)
        assert unread.source == UNREAD and unread.changed() == {}
    with pytest.raises(ProfileError, match=r"Kubernetes 1\.33 is not supported"):
        cluster_profile("v1.33.9", METRICS)
