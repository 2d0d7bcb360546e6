"""The NotReady Event on the operator's own Pod: which reasons are posted, when, and how."""

from __future__ import annotations

import pytest

from draview.controller.pod_events import STARTING, NotReadyReporter, event_body, own_pod


def reporter() -> NotReadyReporter:
    return NotReadyReporter(None, ("ns", "draview-0", "uid-1"), lambda: None, grace=10)  # type: ignore[arg-type]


def test_a_lasting_reason_is_due_once_after_the_grace() -> None:
    r = reporter()
    why = "cannot write status: CRD resourcepoolstatuses.draview.io is not installed"
    assert not r.due(why, 9.9)
    assert r.due(why, 10.0)
    r.posted.add(why)
    assert not r.due(why, 60.0)
    assert r.due("cannot write status: forbidden", 10.0)


@pytest.mark.parametrize("why", [None, *STARTING])
def test_ready_or_still_starting_is_never_posted(why: str | None) -> None:
    assert not reporter().due(why, 3600.0)


def test_the_event_is_about_the_pod_by_uid() -> None:
    body = event_body("ns", "draview-0", "uid-1", "x" * 5000)
    assert body["regarding"] == {
        "apiVersion": "v1", "kind": "Pod", "namespace": "ns", "name": "draview-0", "uid": "uid-1"
    }  # fmt: skip
    assert body["type"] == "Warning" and body["reason"] == "NotReady"
    assert len(body["note"]) == 1024
    assert body["metadata"]["generateName"] == "draview-0-"


def test_own_pod_needs_all_three_downward_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "ns")
    monkeypatch.setenv("POD_NAME", "draview-0")
    monkeypatch.delenv("POD_UID", raising=False)
    assert own_pod() is None
    monkeypatch.setenv("POD_UID", "uid-1")
    assert own_pod() == ("ns", "draview-0", "uid-1")
