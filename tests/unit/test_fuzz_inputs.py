"""Structural fuzzing of `draview analyze` on every example (bench/fuzz runs it longer).

Each run damages one object of one example (wrong types, missing fields, huge and
negative numbers, absurd quantities, odd Unicode) or the text of a whole example
(truncation, duplicate keys, aliases, deep nesting, bytes that are not UTF-8), runs
`analyze` in-process and checks what the README promises: no traceback, exit 0 or 2,
output that parses, and every pool the damage could not reach exactly as in the clean
run. The default budget suits CI (~20 s); bench/fuzz/run.sh runs it for longer.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from damage import ODD_VALUES, damaged, paths_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from draview.cli.inputs import read_sources
from draview.cli.main import main as draview_main

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))
BUDGET = int(os.environ.get("DRAVIEW_FUZZ_EXAMPLES", "500"))
FUZZ = settings(
    max_examples=BUDGET,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize="DRAVIEW_FUZZ_RANDOM" not in os.environ,  # CI: the same cases every run
)

NASTY = st.one_of(
    ODD_VALUES,
    st.sampled_from(
        [
            2**63,
            2**64 + 1,
            -1,
            -(2**63) - 1,
            10**400,
            1e308,
            "1e999999Gi",
            "99999999999999999999999999Ei",
            "-40Gi",
            "0.000000000000000000001",
            "\u202e\u0000\ud7ff\U0010ffff",
            "é" * 300,
            "x" * 5000,
            {"value": {"value": [1]}},
            [[[[[]]]]],
        ]
    ),
    st.text(max_size=8),
)
TEXT_DAMAGE = (
    "truncate",
    "duplicate-line",
    "alias",
    "bomb",
    "deep",
    "deep-json",
    "bytes",
    "unicode",
)


def run_analyze(path: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = draview_main(["analyze", str(path), "-o", "json"])
    return code, out.getvalue(), err.getvalue()


def by_pool(doc: dict[str, Any]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Every output object grouped by the pool it describes."""
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for o in doc["items"]:
        out.setdefault((o["spec"]["driver"], o["spec"]["pool"]), []).append(o)
    return out


@cache
def clean(index: int) -> tuple[list[dict[str, Any]], dict[tuple[str, str], Any]]:
    objects = read_sources([str(EXAMPLES[index])])
    path = Path(f"/tmp/draview-fuzz-clean-{os.getpid()}-{index}.json")
    path.write_text(json.dumps(objects))
    code, out, err = run_analyze(path)
    path.unlink()
    assert code == 0, err
    return objects, by_pool(json.loads(out))


def pools_named(obj: Any) -> set[Any] | None:
    """The pools an object can change, or None when it may change any (a taint rule)."""
    if not isinstance(obj, dict):
        return set()
    if obj.get("kind") == "DeviceTaintRule":
        return None
    found: list[tuple[Any, Any]] = []
    spec = obj.get("spec")
    if isinstance(spec, dict):
        pool = spec.get("pool")
        found.append((spec.get("driver"), pool.get("name") if isinstance(pool, dict) else None))
    status = obj.get("status")
    alloc = status.get("allocation") if isinstance(status, dict) else None
    devices = alloc.get("devices") if isinstance(alloc, dict) else None
    results = devices.get("results") if isinstance(devices, dict) else None
    for r in results if isinstance(results, list) else []:
        if isinstance(r, dict):
            found.append((r.get("driver"), r.get("pool")))
    return {k for k in found if all(isinstance(x, str) for x in k)}


def check_outcome(code: int, out: str, err: str) -> dict[str, Any] | None:
    assert "Traceback" not in err, err
    assert code in (0, 2), (code, err)
    if code == 2:
        assert len(err.strip().splitlines()) == 1, err
        return None
    assert all(len(line) < 1000 for line in err.splitlines()), "a warning quotes too much"
    doc: dict[str, Any] = json.loads(out)
    return doc


@FUZZ
@given(data=st.data())
def test_damaged_objects_never_crash_and_leave_other_pools_alone(
    tmp_path_factory: Any, data: st.DataObject
) -> None:
    index = data.draw(st.integers(0, len(EXAMPLES) - 1), label="example")
    objects, clean_pools = clean(index)
    target = data.draw(st.integers(0, len(objects) - 1), label="object")
    paths = paths_of(objects[target])
    edits = data.draw(
        st.lists(st.tuples(st.sampled_from(paths), NASTY, st.booleans()), min_size=1, max_size=3),
        label="edits",
    )
    broken = [*objects]
    broken[target] = damaged(objects[target], edits)
    path = tmp_path_factory.mktemp("fuzz") / "dump.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": broken}))
    doc = check_outcome(*run_analyze(path))
    assert doc is not None, "a readable file of damaged objects is still exit 0"
    before, after = pools_named(objects[target]), pools_named(broken[target])
    if before is None or after is None:
        return
    pools = by_pool(doc)
    for key, objs in clean_pools.items():
        if key not in before | after:
            assert pools.get(key) == objs, f"pool {key} changed by damage elsewhere"


def damage_text(text: str, how: str, at: int, value: str) -> bytes:
    lines = text.splitlines(keepends=True)
    line = at % max(1, len(lines))
    if how == "truncate":
        return text[: at % max(1, len(text))].encode()
    if how == "duplicate-line":
        return "".join(
            [*lines[: line + 1], lines[line] if lines else "", *lines[line + 1 :]]
        ).encode()
    if how == "alias":  # an anchored value reused further down
        return (
            text.replace(": ", ": &a ", 1) + f"\n---\nkind: Pod\nx: [*a, *a, {value!r}]\n"
        ).encode()
    if how == "bomb":
        levels = ["a: &a [x, x, x, x, x, x, x, x]"]
        levels += [
            f"{c}: &{c} [{', '.join(['*' + p] * 8)}]"
            for p, c in zip("abcdef", "bcdefg", strict=True)
        ]
        return (text + "\n---\n" + "\n".join(levels) + "\n").encode()
    if how == "deep":  # past --max-depth, past the recursion limit, past the C stack
        depth = (150, 1200, 40_000)[at % 3]
        return (text + "\n---\nkind: Pod\nx: " + "[" * depth + "]" * depth + "\n").encode()
    if how == "deep-json":
        depth = (150, 1200, 40_000)[at % 3]
        return f'[{{"kind": "Pod", "x": {"[" * depth + "]" * depth}}}]'.encode()
    if how == "bytes":
        raw = text.encode()
        cut = at % max(1, len(raw))
        return raw[:cut] + value.encode("utf-8", "surrogatepass")[:4] + b"\xff\xfe" + raw[cut:]
    # unicode: odd characters into a value
    cut = at % max(1, len(text))
    return (text[:cut] + value + text[cut:]).encode("utf-8", "surrogatepass")


@FUZZ
@given(
    index=st.integers(0, len(EXAMPLES) - 1),
    how=st.sampled_from(TEXT_DAMAGE),
    at=st.integers(0, 1 << 20),
    value=st.text(min_size=1, max_size=6),
)
def test_damaged_text_is_exit_0_or_2_never_a_traceback(
    tmp_path_factory: Any, index: int, how: str, at: int, value: str
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "dump.yaml"
    path.write_bytes(damage_text(EXAMPLES[index].read_text(), how, at, value))
    check_outcome(*run_analyze(path))
