"""Every damaged input the fuzzing found (test_fuzz_inputs.py, bench/fuzz): no traceback,
no crash, exit 0 or 2 as documented, and a taken device stays taken. Each of these failed
before the fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import DRIVER, claim, device, result, rslice

import draview
from draview.api.world import build_world
from draview.cli.dra import main as kubectl_dra
from draview.cli.inputs import InputError, read_sources
from draview.cli.main import main as draview_main
from draview.controller.core import Controller, Settings
from draview.controller.ratelimit import TokenBucket
from draview.controller.writer import Writer
from draview.engine.world import world_objects

ROOT = Path(__file__).resolve().parents[2]
# The tree under test (the editable install may point at another checkout).
OPERATOR = str(Path(draview.__file__).resolve().parents[1])
PAIRS = list(zip("abcdefgh", "bcdefghi", strict=True))  # each level aliases the last
BOMB = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(f"{c}: &{c} [{', '.join(['*' + p] * 9)}]" for p, c in PAIRS),
        "kind: ResourceSlice",
        "apiVersion: resource.k8s.io/v1",
        "metadata: {name: *i}",
    ]
)


def process(
    *args: str, stdin: bytes | None = None, module: str = "draview.cli.main"
) -> subprocess.CompletedProcess[bytes]:
    """A real process: a segfault or a memory blow-up must not take pytest with it."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        env={"PYTHONPATH": OPERATOR, "PATH": "/usr/bin:/bin"},
    )


def one_line_exit_2(proc: subprocess.CompletedProcess[bytes], *words: str) -> None:
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for word in words:
        assert word in err


def write(tmp_path: Path, name: str, objs: list[dict[str, Any]]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
    return path


def analyze(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    code = draview_main(["analyze", *args, "-o", "json"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, json.loads(out) if code == 0 else None, err


def pool_status(doc: dict[str, Any], pool: str = "pool-a") -> dict[str, Any]:
    found = [o for o in doc["items"] if o["kind"] == "ResourcePoolStatus"]
    return next(o for o in found if o["spec"]["pool"] == pool)


def device_states(doc: dict[str, Any]) -> dict[str, str]:
    return {
        d["name"]: d["state"]
        for o in doc["items"]
        if o["kind"] == "ResourceSliceStatus"
        for d in o["status"]["devices"]
    }


# -- unreadable files: one line, exit 2 -------------------------------------------------


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    # A cap on the address space: the old code needed more than 2 GiB here.
    cmd = f'ulimit -v 1000000; exec "{sys.executable}" -m draview.cli.main analyze "{path}"'
    proc = subprocess.run(
        ["sh", "-c", cmd],
        capture_output=True,
        timeout=120,
        env={"PYTHONPATH": OPERATOR, "PATH": "/usr/bin:/bin"},
    )
    one_line_exit_2(proc, "bomb.yaml", "aliases")
    proc = process("get", "pools", "-f", str(path), module="draview.cli.dra.main")
    assert proc.returncode == 1 and b"aliases" in proc.stderr and b"Traceback" not in proc.stderr


def test_an_alias_into_its_own_container_is_refused() -> None:
    with pytest.raises(InputError, match="refers to its own container"):
        read_sources_text("a: &a [1, *a]\nkind: List\n")


def test_yaml_nested_40000_deep_does_not_crash(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("kind: Pod\nx: " + "[" * 40_000 + "]" * 40_000 + "\n")
    one_line_exit_2(process("analyze", str(path)), "nested deeper than 100", "--max-depth")


LIST_OF_POD = '{{"kind": "List", "items": [{{"kind": "Pod", "x": {}}}]}}'


@pytest.mark.parametrize("wrap", [LIST_OF_POD, "[{}]"])
def test_json_nested_1000_deep_even_in_an_ignored_object(tmp_path: Path, wrap: str) -> None:
    path = tmp_path / "deep.json"
    path.write_text(wrap.format("[" * 1000 + "]" * 1000))
    one_line_exit_2(process("analyze", str(path)), "nested deeper than 100")


def test_max_depth_is_a_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "d.json", [rslice("s", [device("gpu-0")])])
    assert analyze(capsys, str(path), "--max-depth", "3")[0] == 2
    assert analyze(capsys, str(path), "--max-depth", "30")[0] == 0


@pytest.mark.parametrize("levels", [1, 2, 7, 50])
def test_depth_is_counted_exactly_whatever_the_containers(levels: int) -> None:
    """Dicts and lists mixed, with shallower siblings (scalars, an empty list beside a
    container): a value nesting `levels` containers passes at max_depth = levels and
    fails at one less."""
    from draview.cli.limits import LimitExceeded, check_depth

    value: Any = "leaf"
    for i in range(levels):
        value = {"x": value, "flat": 1, "shallow": []} if i % 2 else [value, "v"]
    check_depth(value, levels)
    with pytest.raises(LimitExceeded, match=f"deeper than {levels - 1} levels"):
        check_depth(value, levels - 1)
    check_depth(value, levels + 2, depth=3)
    with pytest.raises(LimitExceeded):
        check_depth(value, levels + 1, depth=3)


def test_dev_zero_stops_at_max_input_bytes() -> None:
    proc = process("analyze", "/dev/zero", "--max-input-bytes", "10000000")
    one_line_exit_2(proc, "larger than 10000000 bytes", "--max-input-bytes")


def test_latin1_on_stdin_is_one_clear_line() -> None:
    text = "kind: ResourceSlice\nmetadata: {name: café}\n".encode("latin-1")
    one_line_exit_2(process("analyze", "-", stdin=text), "<stdin>", "not UTF-8")


@pytest.mark.parametrize("example", ["gpus.yaml", "mig-a100.yaml", "shareable-nic.yaml"])
def test_a_dump_cut_off_anywhere_never_crashes(example: str) -> None:
    text = (ROOT / "examples" / example).read_text()
    for cut in range(0, len(text), max(1, len(text) // 60)):
        try:
            world = build_world(read_sources_text(text[:cut]))
        except InputError as exc:
            assert "\n" not in str(exc)
            continue
        world_objects(world)


def test_a_broken_pipe_exits_quietly() -> None:
    examples = [str(p) for p in sorted((ROOT / "examples").glob("*.yaml"))]
    proc = subprocess.Popen(
        [sys.executable, "-m", "draview.cli.main", "analyze", *examples, "-o", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PYTHONPATH": OPERATOR, "PATH": "/usr/bin:/bin"},
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # `| head -1`
    # Nothing but the note of what was assumed about nodes (the examples carry no Nodes).
    err = [line for line in proc.stderr.read().decode().splitlines() if " note: " not in line]
    assert proc.wait(timeout=120) == 141 and err == []


# -- unreadable objects: a warning and InvalidObject on the right pool ------------------


@pytest.mark.parametrize(
    "edit",
    [
        lambda o: o.update(metadata=["x"]),
        lambda o: o.update(spec="a string"),
        lambda o: o["spec"]["pool"].update(name={"nested": "name"}),
        lambda o: o["metadata"].update(generation=2**63),
        lambda o: o["spec"]["pool"].update(generation=2**70),
        lambda o: o["spec"]["pool"].update(resourceSliceCount=-3),
        lambda o: o["spec"]["pool"].update(resourceSliceCount=2**64),
    ],
    ids=[
        "metadata-list",
        "spec-string",
        "pool-name-object",
        "generation-int64",
        "pool-generation",
        "count-negative",
        "count-int64",
    ],
)
def test_a_damaged_slice_is_a_warning_and_never_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any
) -> None:
    bad = rslice("bad", [device("gpu-9")], pool="pool-b")
    edit(bad)
    path = write(tmp_path, "d.json", [rslice("good", [device("gpu-0")]), bad])
    code, doc, err = analyze(capsys, str(path))
    assert code == 0 and "InvalidObject: ResourceSlice" in err
    assert device_states(doc) == {"gpu-0": "Available"}  # the good pool is untouched
    text = json.dumps(doc)
    assert str(2**63) not in text and str(2**70) not in text and str(2**64) not in text


def test_a_nested_api_version_is_ignored_like_any_other_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = rslice("odd", [device("gpu-1")])
    odd["apiVersion"] = {"group": "resource.k8s.io"}
    path = write(tmp_path, "d.json", [rslice("good", [device("gpu-0")]), odd, {"kind": ["x"]}])
    code, doc, _ = analyze(capsys, str(path))
    assert code == 0 and device_states(doc) == {"gpu-0": "Available"}
    for command in (["describe", "resourceslice", "odd"], ["flatten", "odd"]):
        assert kubectl_dra.main([*command, "-f", str(path)]) == 1
        err = capsys.readouterr().err
        assert "cannot be read: api_version" in err and len(err.splitlines()) == 1


def test_an_unreadable_only_slice_keeps_its_pool_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = rslice("only", [device("gpu-0"), 5])  # type: ignore[list-item]
    path = write(tmp_path, "d.json", [bad])
    code, doc, err = analyze(capsys, str(path))
    assert code == 0 and "InvalidObject: ResourceSlice only" in err
    status = pool_status(doc)["status"]
    assert status["validationErrors"][0].startswith("InvalidObject: ResourceSlice only: ")
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Valid"]["status"] == "False"
    # Not "0 of 0 slices": nothing of the pool could be counted.
    assert conditions["Complete"]["status"] == "False"
    assert conditions["Complete"]["reason"] == "NoReadableSlices"
    code = kubectl_dra.main(["get", "pools", "-f", str(path)])
    out = capsys.readouterr().out
    assert code == 0 and "pool-a" in out and "False" in out


def test_the_operator_keeps_a_pool_whose_only_slice_is_unreadable() -> None:
    ctl = controller()
    ctl.ingest.slice_event("ADDED", rslice("only", [device("gpu-0"), 5]))  # type: ignore[list-item]
    desired, removed = ctl.reconciler.compute(ctl.store.pools())
    assert removed == [] and [o["kind"] for o in desired] == ["ResourcePoolStatus"]
    assert desired[0]["status"]["validationErrors"][0].startswith("InvalidObject: ResourceSlice")


def damaged_claim() -> dict[str, Any]:
    c = claim("train", result("gpu-0"), namespace="research")
    c["spec"]["devices"]["requests"][0]["exactly"]["count"] = "2x"
    return c


def test_a_claim_with_a_damaged_spec_keeps_its_device_taken(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objs = [rslice("s", [device("gpu-0"), device("gpu-1")]), damaged_claim()]
    path = write(tmp_path, "d.json", objs)
    code, doc, err = analyze(capsys, str(path))
    assert code == 0 and "InvalidObject: ResourceClaim research/train" in err
    assert device_states(doc) == {"gpu-0": "Allocated", "gpu-1": "Available"}
    errors = pool_status(doc)["status"]["validationErrors"]
    assert any(e.startswith("InvalidObject: ResourceClaim research/train: ") for e in errors)
    assert kubectl_dra.main(["get", "devices", "-f", str(path)]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert next(r[3:5] for r in rows if "gpu-0" in r) == ["gpu-0", "Allocated"]
    code = kubectl_dra.main(["why", "train", "-n", "research", "-f", str(path)])
    err = capsys.readouterr().err
    assert code == 1 and "cannot be read" in err and len(err.splitlines()) == 1


def test_the_operator_reads_a_damaged_claim_like_analyze() -> None:
    ctl = controller()
    ctl.ingest.slice_event("ADDED", rslice("s", [device("gpu-0"), device("gpu-1")]))
    c = damaged_claim()
    c["status"]["allocation"]["devices"]["results"][0]["extra"] = 1  # not the plain shape
    ctl.ingest.claim_event("ADDED", c)
    desired, _ = ctl.reconciler.compute(ctl.store.pools())
    pool = next(o for o in desired if o["kind"] == "ResourcePoolStatus")
    errors = pool["status"]["validationErrors"]
    assert any(e.startswith("InvalidObject: ResourceClaim research/train") for e in errors)
    assert device_states({"items": desired}) == {"gpu-0": "Allocated", "gpu-1": "Available"}


def test_why_skips_objects_whose_metadata_is_not_a_map(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = claim("odd")
    odd["metadata"] = ["x"]
    path = write(tmp_path, "d.json", [odd, claim("c")])
    assert kubectl_dra.main(["why", "other", "-n", "default", "-f", str(path)]) == 1
    err = capsys.readouterr().err
    assert "not found" in err and len(err.splitlines()) == 1


def test_a_warning_never_repeats_a_huge_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = rslice("x" * 100_000, [device("gpu-0")])
    bad["spec"]["pool"]["generation"] = "y" * 100_000
    path = write(tmp_path, "d.json", [bad])
    code, _, err = analyze(capsys, str(path))
    assert code == 0 and "InvalidObject" in err and len(err) < 1000


def read_sources_text(text: str) -> list[dict[str, Any]]:
    from draview.api.world import iter_objects
    from draview.cli.inputs import iter_text

    return list(iter_objects(iter_text(text, "t")))


def controller() -> Controller:
    ctl = Controller(Writer(None, TokenBucket(1, 1)), Settings())  # type: ignore[arg-type]
    ctl.leader = True
    return ctl


def test_yaml_with_aliases_in_limits_still_reads() -> None:
    docs = read_sources_text("kind: A\nx: &d {a: 1}\ny: {<<: *d, b: 2}\n")
    assert docs == [{"kind": "A", "x": {"a": 1}, "y": {"a": 1, "b": 2}}]
    assert yaml.safe_load("a: 1") == {"a": 1}
    assert DRIVER and read_sources  # the fixtures above use both


def test_the_bounded_loader_parses_with_libyaml_when_present() -> None:
    """Composing is Python (it counts), parsing must stay C: the pure-Python parser made a
    4.7 MB dump five times slower."""
    from draview.cli.limits import Limits, bounded_loader

    if yaml.__with_libyaml__:
        assert yaml.cyaml.CParser in bounded_loader(Limits()).__mro__
