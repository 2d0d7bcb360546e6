"""bench/fidelity/run.py --merge: a 10,000-world run split over processes is joined only
where its parts are one run's seeds, judged by one code."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run_module() -> Any:
    spec = importlib.util.spec_from_file_location("fidelity_run", ROOT / "bench/fidelity/run.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RUN = _run_module()


def _part(first: int, stop: int, end: int, **over: Any) -> dict[str, Any]:
    part = {
        "profile": "Kubernetes 1.34, its default gates",
        "allocator": "stable",
        "worlds": stop - first,
        "devices": 10 * (stop - first),
        "disagreements": 0,
        "claims": stop - first,
        "seconds": 100.0,
        "complete": stop >= end,
        "first_seed": first,
        "next_seed": stop,
        "end_seed": end,
        "code": "57c2b3680576b753",
        "with_claims": True,
        "states": {"Available": 5, "Allocated": 1},
        "examples": [],
        "undecided_seeds": [],
    }
    part.update(over)
    return part


def test_parts_over_consecutive_seeds_sum_to_one_complete_run() -> None:
    stopped_early = _part(0, 600, 1000, undecided_seeds=[17])
    rest = _part(600, 1000, 1000, states={"Available": 2})
    whole = RUN.merged([rest, stopped_early])
    assert (whole["first_seed"], whole["next_seed"], whole["complete"]) == (0, 1000, True)
    assert (whole["worlds"], whole["devices"], whole["claims"]) == (1000, 10_000, 1000)
    assert whole["states"] == {"Available": 7, "Allocated": 1}
    assert whole["undecided_seeds"] == [17]
    assert whole["seconds"] == 200.0
    assert whole["parts"] == [[0, 600, 100.0], [600, 1000, 100.0]]


def test_a_gap_or_an_overlap_between_parts_is_refused() -> None:
    with pytest.raises(ValueError, match="stops at 600, the next starts at 800"):
        RUN.merged([_part(0, 600, 1000), _part(800, 1000, 1000)])
    with pytest.raises(ValueError, match="stops at 800, the next starts at 600"):
        RUN.merged([_part(0, 800, 1000), _part(600, 1000, 1000)])


@pytest.mark.parametrize(
    "key, other",
    [("code", "edbd16fa903bb373"), ("profile", "Kubernetes 1.35"), ("with_claims", False)],
)
def test_parts_of_other_code_or_profile_are_refused(key: str, other: Any) -> None:
    with pytest.raises(ValueError, match=f"differ in {key}"):
        RUN.merged([_part(0, 600, 1000), _part(600, 1000, 1000, **{key: other})])


def test_the_command_writes_the_whole_and_says_what_is_wrong_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "out.json"
    a.write_text(json.dumps(_part(0, 600, 1000)))
    b.write_text(json.dumps(_part(600, 1000, 1000, disagreements=1)))
    argv = sys.argv
    try:
        sys.argv = ["run.py", "--merge", str(a), str(b), "--json", str(out)]
        assert RUN.main() == 1  # a disagreement in a part is one in the whole
        assert json.loads(out.read_text())["disagreements"] == 1
        b.write_text("{")
        assert RUN.main() == 2
    finally:
        sys.argv = argv
    assert capsys.readouterr().err.startswith("run.py: --merge: ")
