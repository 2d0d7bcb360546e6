"""Feature gate names draview does not know are named, never judged by in silence: a
misspelt DRA gate on the command line is an error naming the gate it most likely
means; a DRA gate the cluster reports but draview does not know is a warning; gates that
are not DRA gates are listed as ignored in one line."""

from __future__ import annotations

import logging
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from draview.cli.dra import main as kubectl_dra
from draview.cli.dra.kubectl import Kubectl
from draview.cli.dra.source import Source
from draview.cli.main import main
from draview.controller import startup
from draview.engine.profile import (
    ProfileError,
    check_gate_names,
    make_profile,
    nearest_gate,
    sort_gates,
)

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "gpus.yaml")


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("DRAPartitionableDevice", "DRAPartitionableDevices"),
        ("draPartitionableDevices", "DRAPartitionableDevices"),
        ("PartitionableDevices", "DRAPartitionableDevices"),
        ("DRADeviceTaint", "DRADeviceTaints"),
    ],
)
def test_a_misspelt_dra_gate_is_an_error_that_names_the_likely_one(typo: str, meant: str) -> None:
    assert nearest_gate(typo, "1.37") == meant
    with pytest.raises(ProfileError) as info:
        make_profile("1.37", {typo: True})
    assert str(info.value) == (
        f"feature gate {typo} does not exist in Kubernetes 1.37: did you mean {meant}?"
    )


def test_a_gate_of_another_release_says_which() -> None:
    with pytest.raises(ProfileError, match=r"DRADerivedAttributes does not exist in Kubernetes "):
        make_profile("1.35", {"DRADerivedAttributes": True})
    with pytest.raises(ProfileError, match=r"\(it does in 1\.37\)"):
        make_profile("1.35", {"DRADerivedAttributes": True})


def test_names_are_sorted_into_known_unknown_and_ignored() -> None:
    names = sort_gates(
        "1.35",
        [
            "DRADeviceTaints",
            "DRANoSuchGate",
            "DRADerivedAttributes",
            "AllAlpha",
            "PodLevelResources",
        ],
    )
    assert names.unknown == ("DRADerivedAttributes", "DRANoSuchGate")
    assert names.ignored == ("AllAlpha", "PodLevelResources")
    assert names.ignored_note() == (
        "ignoring 2 feature gate(s) that are not DRA gates (draview judges by DRA gates "
        "only): AllAlpha, PodLevelResources"
    )
    [reported, _] = names.problems(reported=True)
    assert reported.startswith("the cluster reports feature gate DRADerivedAttributes, which")
    assert sort_gates("1.37", ["DRAAdminAccess"]).ignored_note() is None


def test_before_the_release_is_known_only_a_name_no_release_has_is_refused() -> None:
    check_gate_names(["DRADerivedAttributes", "AllAlpha"])  # 1.37 has it; not DRA
    with pytest.raises(ProfileError, match="did you mean DRAPartitionableDevices"):
        check_gate_names(["DRAPartitionableDevice"])


def draview(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.mark.parametrize("command", ["analyze", "kubectl-dra"])
def test_the_commands_refuse_a_typo_and_name_what_they_ignore(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    def call(gates: str) -> tuple[int, str]:
        if command == "analyze":
            code = draview(["analyze", "--feature-gates", gates, EXAMPLE, "-o", "table"])
        else:
            code = kubectl_dra.main(["get", "pools", "-f", EXAMPLE, "--feature-gates", gates])
        return code, capsys.readouterr().err

    code, err = call("DRAPartitionableDevice=true")
    assert code == 2 and err.count("\n") == 1
    assert "DRAPartitionableDevice does not exist" in err and "DRAPartitionableDevices?" in err
    code, err = call("SchedulerQueueingHints=true,DRADeviceTaints=true")
    assert code == 0
    assert "warning: ignoring 1 feature gate(s) that are not DRA gates" in err
    assert "SchedulerQueueingHints" in err


def test_draview_run_refuses_a_typo_before_it_connects(capsys: pytest.CaptureFixture[str]) -> None:
    assert draview(["run", "--feature-gates", "DRAPartitionableDevice=true"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean DRAPartitionableDevices?" in err


METRICS = """kubernetes_feature_enabled{name="DRADeviceTaints",stage="BETA"} 1
kubernetes_feature_enabled{name="DRAFutureGate",stage="ALPHA"} 0
kubernetes_feature_enabled{name="AllAlpha",stage="ALPHA"} 0
kubernetes_feature_enabled{name="PodLevelResources",stage="BETA"} 1
"""


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    async def version(api: Any) -> str:
        return "v1.36.3"

    async def metrics(api: Any) -> tuple[str, str]:
        return METRICS, ""

    monkeypatch.setattr(startup.kube, "server_version", version)
    monkeypatch.setattr(startup.kube, "feature_metrics", metrics)


def said(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


async def test_the_operator_names_the_clusters_gates_it_leaves_out(
    cluster: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="draview")
    profile = await startup.cluster_profile(None, None, None)  # type: ignore[arg-type]
    assert profile.source == "cluster"
    [warning] = said(caplog, logging.WARNING)
    assert "the cluster reports feature gate DRAFutureGate" in warning
    assert "Kubernetes 1.36" in warning
    ignored = [m for m in said(caplog, logging.INFO) if m.startswith("ignoring")]
    assert ignored == [
        "ignoring 2 feature gate(s) that are not DRA gates (draview judges by DRA gates "
        "only): AllAlpha, PodLevelResources"
    ]


async def test_the_operator_names_flag_gates_the_clusters_release_lacks(
    cluster: None, caplog: pytest.LogCaptureFixture
) -> None:
    # --feature-gates without --kubernetes-version: checked against the cluster's 1.36.
    gates = {"DRADerivedAttributes": True, "DRADeviceTaints": False}
    profile = await startup.cluster_profile(None, None, gates)  # type: ignore[arg-type]
    assert profile.changed() == {"DRADeviceTaints": False}
    [warning] = said(caplog, logging.WARNING)
    assert warning == (
        "feature gate DRADerivedAttributes does not exist in Kubernetes 1.36 (it does in "
        "1.37): judged without it"
    )


FAKE_KUBECTL = """#!{python}
import json, sys
args = [a for a in sys.argv[1:] if not a.startswith("--kubeconfig")]
if args[:1] == ["version"]:
    print(json.dumps({{"serverVersion": {{"gitVersion": "v1.36.3"}}}}))
elif args[:2] == ["get", "--raw"]:
    sys.stdout.write({metrics!r})
else:
    sys.exit(1)
"""


def test_kubectl_dra_warns_of_the_clusters_gates_it_does_not_know(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    script = tmp_path / "kubectl"
    script.write_text(FAKE_KUBECTL.format(python=sys.executable, metrics=METRICS))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    source = Source(Kubectl(str(script)))
    assert source.profile().release == "1.36"
    err = capsys.readouterr().err
    assert "warning: the cluster reports feature gate DRAFutureGate" in err
    assert "AllAlpha" not in err  # the rest only in `kubectl dra version`
