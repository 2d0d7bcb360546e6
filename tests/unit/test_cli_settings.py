"""`draview run` settings: flags over DRAVIEW_* over defaults, one clear line and exit 2
for a bad value, and never a failure of a command that does not use them."""

from __future__ import annotations

from pathlib import Path

import pytest

from draview.cli import settings
from draview.cli.main import build_parser, main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(*argv: str) -> settings.RunSettings:
    return settings.load(build_parser().parse_args(["run", *argv]))


def test_flags_beat_variables_beat_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAVIEW_QPS", "7")
    monkeypatch.setenv("DRAVIEW_BURST", "9")
    s = load("--burst", "11")
    assert (s.qps, s.burst, s.write_concurrency) == (7.0, 11, 64)


def test_lists_booleans_and_the_pod_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAVIEW_PARTITION_ATTRIBUTES", "a/x,b/y")
    monkeypatch.setenv("DRAVIEW_LEADER_ELECT", "false")
    monkeypatch.setenv("POD_NAMESPACE", "draview")
    s = load()
    assert s.partition_attributes == ["a/x", "b/y"] and s.leader_elect is False
    assert s.lease_namespace == "draview"
    assert load("--partition-attribute", "c/z").partition_attributes == ["c/z"]
    monkeypatch.setenv("DRAVIEW_LEASE_NAMESPACE", "explicit")
    assert load().lease_namespace == "explicit"


def test_a_bad_value_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DRAVIEW_BURST", "lots")
    assert main(["run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--burst / DRAVIEW_BURST" in err and "'lots'" in err


def test_timings_that_do_not_nest_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--renew-deadline", "20"]) == 2
    assert "--renew-deadline < --lease-duration" in capsys.readouterr().err


def test_a_bad_run_variable_never_breaks_analyze(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("BURST", "PORT", "LEADER_ELECT", "MAX_OBJECT_BYTES", "QPS"):
        monkeypatch.setenv(f"DRAVIEW_{name}", "lots")
    assert main(["analyze", str(EXAMPLES / "gpus.yaml")]) == 0
    assert "ResourcePoolStatus" in capsys.readouterr().out
    assert build_parser().parse_args(["run"]).func  # building the parser reads nothing


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--kubernetes-version", "1.33"], "Kubernetes 1.33 is not supported"),
        (["--feature-gates", "DRADeviceTaints=maybe"], "'maybe' is not true or false"),
        (
            ["--kubernetes-version", "1.35", "--feature-gates", "DRAListTypeAttributes=true"],
            "DRAListTypeAttributes does not exist in Kubernetes 1.35",
        ),
    ],
)
def test_a_profile_the_flags_cannot_name_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["run", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_profile_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAVIEW_KUBERNETES_VERSION", "v1.35.4")
    monkeypatch.setenv("DRAVIEW_FEATURE_GATES", "DRADeviceTaints=true")
    s = load()
    assert (s.kubernetes_version, s.feature_gates) == ("v1.35.4", "DRADeviceTaints=true")
    assert load("--kubernetes-version", "1.36").kubernetes_version == "1.36"


def test_the_flags_table_of_docs_operator_md_is_every_flag() -> None:
    # docs/operator.md says its table is checked against `draview run --help`: every flag
    # there with its variable, none that does not exist.
    page = (Path(__file__).resolve().parents[2] / "docs" / "operator.md").read_text()
    rows = [line.split("|") for line in page.splitlines() if line.startswith("| `--")]
    documented = {r[1].strip().strip("`"): r[2].split("`")[1] for r in rows}
    flags = {settings.flag(n): settings.env_name(n) for n in settings.RunSettings.model_fields}
    assert documented == flags
