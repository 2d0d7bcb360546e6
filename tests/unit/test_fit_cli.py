"""`kubectl dra fit` and `draview analyze --fit`: output, schema and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from draview.api.workload import read_workload
from draview.cli.dra.main import main
from draview.cli.fit_view import output as dump_output
from draview.explain.fit_document import document, result_of

ROOT = Path(__file__).resolve().parents[2]
GPUS = ROOT / "examples" / "gpus.yaml"


def template(name: str = "one-gpu", cls: str = "gpu.example.com") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "research"},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}
            }
        },
    }


def deployment(*claims: dict[str, str]) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "x"}]}
    if claims:
        spec["resourceClaims"] = list(claims)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "trainer", "namespace": "research"},
        "spec": {"replicas": 3, "template": {"spec": spec}},
    }


def write(tmp_path: Path, *objects: dict[str, Any]) -> Path:
    path = tmp_path / "workload.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_table_names_copies_nodes_and_the_next_blocker(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    wl = write(
        tmp_path, deployment({"name": "g", "resourceClaimTemplateName": "one-gpu"}), template()
    )
    code, out, err = run(capsys, "fit", "-f", str(GPUS), str(wl))
    assert code == 0, err
    assert "Copies:           4\n" in out
    assert "only DRA is judged" in out
    assert (
        "Next Copy:        request gpu: needs 1, 0 of 8 matching devices free (8 Allocated)" in out
    )
    rows = [line.split()[:2] for line in out.splitlines() if line.startswith("node-")]
    assert rows == [["node-b", "3"], ["node-a", "1"]]


def test_json_schema(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    wl = write(tmp_path, template())
    code, out, _ = run(capsys, "fit", "-f", str(GPUS), str(wl), "-o", "json", "--count", "2")
    assert code == 0
    doc = json.loads(out)
    assert {"copies", "bounded", "nodes", "maxCopies", "stopped", "next", "firstCopy"} <= doc.keys()
    assert (doc["copies"], doc["maxCopies"], doc["bounded"], doc["stopped"]) == (
        2,
        2,
        False,
        "count",
    )
    assert doc["kind"] == "FitResult" and doc["count"] == 2
    assert all({"name", "copies"} <= n.keys() for n in doc["nodes"])
    assert doc["firstCopy"]["node"] == "node-a"
    assert doc["firstCopy"]["devices"][0]["device"] == "gpu-3"


def test_wide_says_why_per_request(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(
        capsys, "fit", "-f", str(GPUS), str(write(tmp_path, template())), "-o", "wide"
    )
    assert code == 0
    assert "Why The Next Copy Does Not Fit:" in out
    assert "ERROR" in out


def test_the_workload_from_stdin(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    monkeypatch.setattr(
        sys, "stdin", io.TextIOWrapper(io.BytesIO(yaml.safe_dump(template()).encode()))
    )
    code, out, _ = run(capsys, "fit", "-f", str(GPUS), "-", "-o", "yaml")
    assert code == 0
    assert yaml.safe_load(out)["copies"] == 4


@pytest.mark.parametrize(
    ("objects", "code", "message"),
    [
        ((template(cls="nope"),), 2, 'deviceclass "nope" not found'),
        ((deployment(),), 2, "no spec.resourceClaims"),
        ((deployment({"name": "g", "resourceClaimTemplateName": "absent"}),), 1, "not found"),
        (({"kind": "ConfigMap", "metadata": {"name": "x"}},), 2, "no workload"),
    ],
)
def test_bad_input_is_one_line(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    objects: tuple[dict[str, Any], ...],
    code: int,
    message: str,
) -> None:
    got, out, err = run(capsys, "fit", "-f", str(GPUS), str(write(tmp_path, *objects)))
    assert got == code
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and message in err


def test_a_malformed_file_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [unclosed\n")
    code, _, err = run(capsys, "fit", "-f", str(GPUS), str(bad))
    assert code == 2 and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "fit", "-f", str(GPUS), str(tmp_path / "absent.yaml"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "fit", "-f", str(GPUS), str(bad), "--count", "0")
    assert code == 2 and "--count" in err


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "draview.cli.main", "analyze", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_analyze_fit_offline(tmp_path: Path) -> None:
    wl = write(tmp_path, template())
    proc = analyze("--fit", str(wl), str(GPUS), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["copies"], doc["bounded"]) == (4, False)
    assert [(n["name"], n["copies"]) for n in doc["nodes"]] == [("node-b", 3), ("node-a", 1)]
    table = analyze("--fit", str(wl), str(GPUS), "-o", "table")
    assert table.returncode == 0 and "NODE" in table.stdout


def test_analyze_fit_bad_input_exits_2(tmp_path: Path) -> None:
    missing = write(tmp_path, deployment({"name": "g", "resourceClaimTemplateName": "absent"}))
    proc = analyze("--fit", str(missing), str(GPUS))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "not found" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("workload", "dump", "extra"),
    [
        ("trainer.yaml", "gpus.yaml", []),
        ("one-gpu.yaml", "gpus.yaml", ["--count", "2"]),
        ("one-mig.yaml", "mig-a100.yaml", []),
        ("one-tpu.yaml", "tpu-multihost.yaml", []),
        ("one-gpu.yaml", "gpus.yaml", ["--budget", "1"]),
    ],
)
def test_an_answer_read_back_from_its_document_prints_the_same(
    capsys: pytest.CaptureFixture[str], workload: str, dump: str, extra: list[str]
) -> None:
    """What the plugin prints from the operator's FitReview (the document it sends) is
    what it prints when it computes the answer itself, in every format."""
    wl, world = ROOT / "examples" / "workloads" / workload, ROOT / "examples" / dump
    printed = {}
    for fmt in ("json", "table", "wide"):
        flags = [] if fmt == "table" else ["-o", fmt]
        code, out, err = run(capsys, "fit", "-f", str(world), str(wl), *flags, *extra)
        assert code == 0, err
        printed[fmt] = out
    doc = json.loads(printed["json"])
    objects = yaml.safe_load_all(wl.read_text())
    wanted = read_workload(list(objects), lambda *_: None, "default")
    result = result_of(json.loads(json.dumps(doc)))
    budget = doc["searches"]["budget"]
    assert document(result, wanted, doc["profile"], budget) == doc
    assert dump_output(result, wanted, doc["profile"], None, budget) == printed["table"]
    assert dump_output(result, wanted, doc["profile"], "wide", budget) == printed["wide"]


def test_a_document_that_is_no_fit_result_is_refused() -> None:
    with pytest.raises(ValueError, match="not FitResult"):
        result_of({"kind": "ClaimExplanation"})
    with pytest.raises(ValueError, match="not a FitResult document"):
        result_of({"kind": "FitResult", "nodes": [{"copies": 1}]})
