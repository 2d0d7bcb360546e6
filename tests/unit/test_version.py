"""`draview version`, `kubectl dra version` and `--version`: draview's version, the
releases it judges, Python and the dependencies, and for a cluster the profile detected;
`-o json|yaml` with every key always there."""

from __future__ import annotations

import json
import re
import stat
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from draview.cli.dra import main as kubectl_dra
from draview.cli.main import main
from draview.cli.version import dependencies
from draview.engine.profile import RELEASES

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "gpus.yaml")
KEYS = [
    "apiVersion",
    "kind",
    "draview",
    "kubernetesReleases",
    "defaultRelease",
    "python",
    "platform",
    "dependencies",
]
CLUSTER_KEYS = ["serverVersion", "profile", "label", "unknownGates", "ignoredGates", "error"]


def draview(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # --version ends as argparse's --help does
        code = int(exc.code or 0)
    return code, capsys.readouterr().out


def dra(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = kubectl_dra.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_dash_dash_version_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = draview(capsys, "--version")
    assert code == 0 and re.fullmatch(r"draview \S+ \(judges Kubernetes 1\.34, .*\)\n", out)
    code, out2, _ = dra(capsys, "--version")
    assert code == 0 and out2 == out


def test_draview_version_says_the_releases_python_and_dependencies(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = draview(capsys, "version")
    assert code == 0
    assert f"Kubernetes releases: {', '.join(RELEASES)} (default {RELEASES[-1]})" in out
    assert "Python:" in out and "kopf " in out
    code, out = draview(capsys, "version", "-o", "json")
    info = json.loads(out)
    assert list(info) == KEYS
    assert (info["apiVersion"], info["kind"]) == ("draview.io/v1alpha1", "Version")
    assert info["kubernetesReleases"] == list(RELEASES)
    code, out = draview(capsys, "version", "-o", "yaml")
    assert yaml.safe_load(out) == info


def test_every_declared_runtime_dependency_is_listed() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}
    listed = dependencies()
    assert declared <= {n.lower() for n in listed}
    assert all(v != "not installed" for v in listed.values())


def test_kubectl_dra_version_client_and_offline_ask_no_cluster(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for args in (["--client"], ["-f", EXAMPLE]):
        code, out, _ = dra(capsys, "version", *args, "-o", "json")
        info = json.loads(out)
        assert code == 0 and list(info) == [*KEYS, "kubectl", "cluster"]
        assert info["kubectl"] is None and info["cluster"] is None
    code, _, err = dra(capsys, "version", "--client", "--feature-gates", "DRADeviceTaints=true")
    assert code == 0 and "--feature-gates are not used by version" in err


FAKE_KUBECTL = """#!{python}
import json, sys
args = [a for a in sys.argv[1:] if not a.startswith(("--kubeconfig", "--context"))]
if args[:1] == ["version"]:
    doc = {{"clientVersion": {{"gitVersion": "v1.37.2"}}}}
    if {server!r}:
        doc["serverVersion"] = {{"gitVersion": {server!r}}}
    print(json.dumps(doc))
    if not {server!r}:
        sys.stderr.write("The connection to the server 127.0.0.1:1 was refused\\n")
    sys.exit(0 if {server!r} else 1)
if args[:2] == ["get", "--raw"]:
    sys.stdout.write({metrics!r})
    sys.exit(0)
sys.exit(1)
"""
METRICS = """kubernetes_feature_enabled{name="DRADeviceTaints",stage="BETA"} 0
kubernetes_feature_enabled{name="DRAFutureGate",stage="ALPHA"} 0
kubernetes_feature_enabled{name="AllAlpha",stage="ALPHA"} 0
"""


def kubectl(tmp_path: Path, server: str) -> str:
    script = tmp_path / "kubectl"
    script.write_text(FAKE_KUBECTL.format(python=sys.executable, server=server, metrics=METRICS))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_kubectl_dra_version_shows_the_profile_it_detects(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    k = ["--kubectl", kubectl(tmp_path, "v1.36.3")]
    code, out, _ = dra(capsys, "version", *k, "-o", "json")
    info: dict[str, Any] = json.loads(out)
    assert code == 0 and info["kubectl"] == "v1.37.2"
    cluster = info["cluster"]
    assert list(cluster) == CLUSTER_KEYS
    assert cluster["serverVersion"] == "v1.36.3" and cluster["error"] is None
    assert cluster["profile"]["kubernetesVersion"] == "1.36"
    assert cluster["profile"]["source"] == "cluster"
    assert cluster["profile"]["featureGates"]["DRADeviceTaints"] is False
    assert cluster["label"] == "Kubernetes 1.36, gates DRADeviceTaints=false"
    assert (cluster["unknownGates"], cluster["ignoredGates"]) == (["DRAFutureGate"], ["AllAlpha"])
    code, out, _ = dra(capsys, "version", *k)
    assert "Cluster profile:     Kubernetes 1.36, gates DRADeviceTaints=false (allocator" in out
    assert "Unknown gates:       DRAFutureGate" in out
    assert "Ignored gates:       1 that are not DRA gates" in out


def test_kubectl_dra_version_says_when_it_cannot_read_the_cluster(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    k = ["--kubectl", kubectl(tmp_path, "")]
    code, out, _ = dra(capsys, "version", *k)
    assert code == 1
    assert "draview:" in out and "kubectl:             v1.37.2" in out
    assert "Cluster profile:     cannot read it: cannot read the server's version: " in out
    code, out, _ = dra(capsys, "version", *k, "-o", "yaml")
    cluster = yaml.safe_load(out)["cluster"]
    assert code == 1 and list(cluster) == CLUSTER_KEYS and "refused" in cluster["error"]
    code, out, _ = dra(capsys, "version", "--kubectl", str(tmp_path / "none"), "-o", "json")
    info = json.loads(out)
    assert code == 1 and info["kubectl"] is None and "kubectl not found" in info["cluster"]["error"]
