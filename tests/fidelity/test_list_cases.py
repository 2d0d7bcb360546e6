"""The small list- and derived-attribute worlds (list_cases.py) asked of each release's
allocator: it must give the answer each case records for its profile, which
tests/unit/test_explain_lists.py holds draview to."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.fidelity.apiserver import without_consumable_capacity
from tests.fidelity.harness import claims_case, reduce
from tests.fidelity.list_cases import CASES, PROFILES, ListCase
from tests.fidelity.oracle import Oracle

from draview.engine.profile import Profile, all_gates_on, make_profile


def profile_of(key: str) -> Profile:
    release, _, gates = key.partition("-")
    return all_gates_on(release) if gates == "all-gates" else make_profile(release)


def held(case: ListCase, key: str) -> dict[str, Any]:
    """The claim as given, but for distinctAttribute, which an API server without
    DRAConsumableCapacity drops (draview's rules.refusal stands for that); list and
    derived attributes are left in, to ask what the allocator does with them."""
    claim = case.pending()
    if profile_of(key).gate("DRAConsumableCapacity"):
        return claim
    return without_consumable_capacity(claim)


@pytest.fixture(scope="module", params=PROFILES)
def asked(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, str]]]:
    key = request.param
    with Oracle(profile=profile_of(key)) as oracle:
        answers = oracle.ask_many([claims_case(c.name, c.objects(), [held(c, key)]) for c in CASES])
    got = {}
    for case, answer in zip(CASES, answers, strict=True):
        assert "error" not in answer, answer
        (probe,) = answer["probes"]
        outcomes = [o for outs in probe["nodes"].values() for o in outs]
        failed = any(o.startswith("error") for o in outcomes)
        got[case.name] = "error" if failed else reduce(probe["nodes"])
    yield key, got


def test_the_allocator_answers_as_recorded(asked: tuple[str, dict[str, str]]) -> None:
    key, got = asked
    want = {c.name: c.answers[key] for c in CASES}
    assert got == want
