"""Every error of `draview analyze`, `draview run`'s flags and `kubectl dra` is one line
on stderr with a non-zero exit: a missing or unreadable file, malformed YAML, a bad flag
or value, a kubectl that fails."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from draview.cli.dra import main as kubectl_dra
from draview.cli.main import main

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "gpus.yaml")

FAKE_KUBECTL = """#!{python}
import sys
sys.stderr.write("error: stat /nonexistent: no such file or directory\\n")
sys.exit(1)
"""


def draview(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's errors end the process, as the script's would
        return int(exc.code or 0)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    made = {
        "malformed": "items: [\n",
        "json": '{"kind": "List", "items": [',
        "empty": "",
    }
    out = {}
    for name, text in made.items():
        (tmp_path / name).write_text(text)
        out[name] = str(tmp_path / name)
    (tmp_path / "binary").write_bytes(b"\xff\xfe\x00")
    out["binary"] = str(tmp_path / "binary")
    out["missing"] = str(tmp_path / "missing.yaml")
    out["dir"] = str(tmp_path)
    return out


def one_line(capsys: pytest.CaptureFixture[str], code: int) -> str:
    err = capsys.readouterr().err
    assert code != 0
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err
    return err


ANALYZE = [
    (["{missing}"], "No such file"),
    (["{dir}"], "Is a directory"),
    (["{malformed}"], "line 2"),
    (["{json}"], "line 2"),
    (["{empty}"], "empty input"),
    (["{binary}"], "not UTF-8"),
    ([], "no input"),
    (["--bogus", "{malformed}"], "unrecognized arguments: --bogus"),
    (["-o", "xml", "{malformed}"], "invalid choice: 'xml'"),
    (["--max-depth", "-1", EXAMPLE], "'-1' is not a whole number of 1 or more"),
    (["--max-allocations", "x", EXAMPLE], "invalid int value"),
    (["--kubernetes-version", "1.2", EXAMPLE], "not supported"),
    (["--feature-gates", "DRAPartitionableDevices", EXAMPLE], "want Name=true"),
]


@pytest.mark.parametrize(("args", "said"), ANALYZE)
def test_draview_analyze(
    capsys: pytest.CaptureFixture[str], files: dict[str, str], args: list[str], said: str
) -> None:
    code = draview(["analyze", *(a.format(**files) for a in args)])
    assert said in one_line(capsys, code)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--port", "abc"], "--port / DRAVIEW_PORT"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--kubernetes-version", "1.2"], "not supported"),
        (["--lease-duration", "1"], "--renew-deadline < --lease-duration"),
    ],
)
def test_draview_run_flags(capsys: pytest.CaptureFixture[str], args: list[str], said: str) -> None:
    code = draview(["run", *args])
    assert said in one_line(capsys, code)


KUBECTL_DRA = [
    (["get", "pools", "-f", "{missing}"], "No such file"),
    (["get", "pools", "-f", "{malformed}"], "line 2"),
    (["get", "devices", "-f", "{binary}"], "not UTF-8"),
    (["describe", "node", "x", "-f", "{dir}"], "Is a directory"),
    (["--bogus"], "error:"),
    (["get"], "required"),
    (["get", "widgets", "-f", EXAMPLE], "invalid choice: 'widgets'"),
    (["get", "pools", "-o", "xml", "-f", EXAMPLE], "invalid choice: 'xml'"),
    (["why", "-f", EXAMPLE], "required: CLAIM"),
    (["get", "pools", "--kubernetes-version", "1.99", "-f", EXAMPLE], "not supported"),
    (["get", "pools", "--kubectl", "/nonexistent/kubectl"], "kubectl not found"),
]


@pytest.mark.parametrize(("args", "said"), KUBECTL_DRA)
def test_kubectl_dra(
    capsys: pytest.CaptureFixture[str], files: dict[str, str], args: list[str], said: str
) -> None:
    code = kubectl_dra.main([a.format(**files) for a in args])
    assert said in one_line(capsys, code)


def test_kubectl_dra_passes_kubectls_error_on_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    script = tmp_path / "kubectl"
    script.write_text(FAKE_KUBECTL.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    code = kubectl_dra.main(["get", "pools", "--kubectl", str(script)])
    err = one_line(capsys, code)
    assert err == "error: stat /nonexistent: no such file or directory\n"
