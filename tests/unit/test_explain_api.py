"""The explain API's parts without an API server: who the front proxy names, the leader's
answer against the explanation computed from the same pools, the documents and the
EndpointSlice it writes, and its flags. tests/integration/test_explain_api.py runs it
behind the real API server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from builders import DRIVER, claim, device, device_class, result, rslice
from multidict import CIMultiDict
from test_controller_batches import RecordingWriter

from draview.api import explanations as api
from draview.api.fastclaim import read_claim
from draview.api.workload import read_workload
from draview.api.world import World
from draview.cli import settings
from draview.cli.main import build_parser
from draview.controller import fit_answers
from draview.controller.core import Controller, Settings
from draview.controller.event_rounds import Explanations
from draview.controller.explain_answers import ClaimAnswers
from draview.controller.explain_endpoint import endpoint_slice
from draview.controller.fit_answers import FitAnswers
from draview.controller.front_proxy import Caller, FrontProxy
from draview.explain import DeviceIndex, Explainer
from draview.explain.fit import fit
from draview.explain.fit_document import document
from draview.explain.model import (
    ChoiceExplanation,
    ClaimExplanation,
    RequestExplanation,
    from_dict,
)

CONFIGMAP = {
    "requestheader-client-ca-file": "-----BEGIN CERTIFICATE-----\n...",
    "requestheader-allowed-names": '["front-proxy-client"]',
    "requestheader-username-headers": '["X-Remote-User"]',
    "requestheader-group-headers": '["X-Remote-Group"]',
    "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
}
PROXY_CERT = {"subject": ((("commonName", "front-proxy-client"),),)}


def headers(*pairs: tuple[str, str]) -> CIMultiDict[str]:
    return CIMultiDict(pairs)


def test_the_front_proxy_names_the_caller_only_over_its_own_certificate() -> None:
    proxy = FrontProxy.from_configmap(CONFIGMAP)
    h = headers(
        ("X-Remote-User", "alice"),
        ("X-Remote-Group", "devs"),
        ("X-Remote-Group", "system:authenticated"),
        ("X-Remote-Extra-Scopes", "a"),
        ("X-Remote-Extra-Scopes", "b"),
    )
    assert proxy.caller(PROXY_CERT, h) == Caller(
        "alice", ("devs", "system:authenticated"), {"scopes": ["a", "b"]}
    )
    assert proxy.caller({}, h) is None, "no client certificate: anonymous"
    other = {"subject": ((("commonName", "someone-else"),),)}
    assert proxy.caller(other, h) is None, "a name the API server does not allow"
    assert proxy.caller(PROXY_CERT, headers(("X-Remote-Group", "devs"))) is None, "no user"
    anyone = FrontProxy.from_configmap({**CONFIGMAP, "requestheader-allowed-names": "[]"})
    assert anyone.caller(other, h) is not None, "no names listed: any cert of the CA"


def test_an_api_server_without_a_front_proxy_ca_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="--requestheader-client-ca-file"):
        FrontProxy.from_configmap({"client-ca-file": "x"})


def test_discovery_documents_name_the_two_namespaced_resources_and_their_one_verb() -> None:
    found = [
        (r["name"], r["kind"], r["namespaced"], r["verbs"])
        for r in api.resource_list()["resources"]
    ]
    assert found == [
        ("claimexplanations", "ClaimExplanation", True, ["get"]),
        ("fitreviews", "FitReview", True, ["create"]),
    ]
    assert api.group_list()["groups"][0]["preferredVersion"]["groupVersion"] == api.API_VERSION
    assert api.claim_path("ns", "c") == (
        "/apis/explain.draview.io/v1alpha1/namespaces/ns/claimexplanations/c"
    )
    assert api.fit_path("ns") == "/apis/explain.draview.io/v1alpha1/namespaces/ns/fitreviews"


def test_an_explanation_survives_the_trip_through_json() -> None:
    choice = ChoiceExplanation(
        "gpu/big",
        "gpu.example.com",
        "ExactCount",
        2,
        admin_access=True,
        selectors=["device.attributes['x'].y > 1"],
        runtime_errors={"d/p/x": "no such key"},
        matched=3,
        free=["d/p/a"],
        blocked={"Allocated": ["d/p/b"], "Tainted": ["d/p/c"]},
        details={"d/p/c": "untolerated taint"},
        best_node="node-1",
        best_node_free=1,
        satisfiable=False,
        reason="needs 2, 1 free",
    )
    exp = ClaimExplanation(
        "ns",
        "c",
        False,
        "node-1",
        [RequestExplanation("gpu", True, [choice])],
        ["matchAttribute x: no two devices agree"],
        "Unallocatable",
        "not enough devices",
    )
    assert from_dict(json.loads(json.dumps(exp.to_dict()))) == exp


def test_the_leaders_answer_is_the_explanation_of_the_same_pools() -> None:
    # Only the port turns the status bodies on here (no claim Events): what it reads.
    ctl = Controller(RecordingWriter(), Settings(claim_events=False, explain_api=True))
    ctl.leader = True
    ctl.ingest.class_event("ADDED", device_class("gpu.example.com"))
    ctl.ingest.slice_event("ADDED", rslice("a", [device("g0"), device("g1")], pool="pool-a"))
    ctl.ingest.claim_event("ADDED", claim("held", result("g1")))
    wanting = claim("wants", namespace="team")
    wanting["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    ctl.ingest.claim_event("ADDED", wanting)
    ctl.reconciler.compute([(DRIVER, "pool-a")])
    ctl.role.synced = True
    answers = ClaimAnswers(ctl.role, ctl.reconciler, _explanations(ctl), "replica-1")

    reply = _run(answers.answer("team", "wants", None))
    assert reply.code == 200, reply.body
    body = reply.body
    assert (body["kind"], body["metadata"]) == (
        "ClaimExplanation",
        {"name": "wants", "namespace": "team"},
    )
    results = [ctl.reconciler.full_result((DRIVER, "pool-a"))]
    direct = Explainer().explain(
        read_claim(wanting)[0],
        DeviceIndex.build(results),  # type: ignore[arg-type]
        ctl.store.classes,
        results=results,  # type: ignore[arg-type]
    )
    assert body["explanation"] == direct.to_dict()
    assert body["explanation"]["verdict"] == "Unallocatable"
    held = f"{DRIVER}/pool-a/g1"
    assert body["devices"][held]["allocations"][0]["claimName"] == "held", body["devices"]
    assert body["answeredBy"]["replica"] == "replica-1" and body["answeredBy"]["pools"] == 1

    assert _run(answers.answer("team", "nope", None)).code == 404
    assert _run(answers.answer("default", "held", None)).code == 404, "allocated: not pending"
    ctl.reconciler.nodes_watched = True
    assert "not found" in _run(answers.answer("team", "wants", "no-node")).body["message"]
    ctl.reconciler.nodes_watched = False  # no Node watch (RBAC): a node is taken as named
    assert _run(answers.answer("team", "wants", "no-node")).code == 200
    ctl.role.synced = False
    assert _run(answers.answer("team", "wants", None)).code == 503
    ctl.role.leader = False
    assert "standing by" in _run(answers.answer("team", "wants", None)).body["message"]


def _explanations(ctl: Any) -> Explanations:
    return Explanations(ctl.role, ctl.reconciler, ctl.writer, ctl.settings)


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_the_endpointslice_names_the_leader_for_its_service() -> None:
    s = endpoint_slice("draview", "draview-explain", "10.1.2.3", 8443, ("draview-abc", "uid-1"))
    assert s["metadata"]["name"] == "draview-explain-leader"
    assert s["metadata"]["labels"] == {
        "kubernetes.io/service-name": "draview-explain",
        "endpointslice.kubernetes.io/managed-by": "draview.io",
    }
    assert s["addressType"] == "IPv4"
    assert s["endpoints"][0]["targetRef"]["name"] == "draview-abc"
    assert s["ports"] == [{"name": "https", "port": 8443, "protocol": "TCP"}]
    assert endpoint_slice("ns", "svc", "fd00::1", 8443, None)["addressType"] == "IPv6"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--explain-port", "8443"], "--explain-port needs --explain-cert-dir"),
        (
            ["--explain-port", "8443", "--explain-cert-dir", "/c", "--explain-service", "s"],
            "--explain-service needs --explain-port and --pod-ip",
        ),
    ],
)
def test_explain_flags_that_cannot_work_are_refused(
    argv: list[str], error: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POD_IP", raising=False)
    with pytest.raises(ValueError, match=error):
        settings.load(build_parser().parse_args(["run", *argv]))


def test_the_pod_address_comes_from_the_downward_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_IP", "10.9.8.7")
    argv = ["run", "--explain-port", "8443", "--explain-cert-dir", "/c", "--explain-service", "s"]
    s = settings.load(build_parser().parse_args(argv))
    assert (s.pod_ip, s.explain_service, s.explain_port) == ("10.9.8.7", "s", 8443)


def test_the_catalog_is_kept_warm_for_the_first_answer() -> None:
    ctl = Controller(RecordingWriter(), Settings(claim_events=False, explain_api=True))
    ctl.leader = True
    ctl.ingest.slice_event("ADDED", rslice("a", [device("g0")], pool="pool-a"))
    ctl.reconciler.compute([(DRIVER, "pool-a")])
    explanations = _explanations(ctl)
    answers = ClaimAnswers(ctl.role, ctl.reconciler, explanations, "replica-1")

    async def two_ticks() -> None:
        task = asyncio.create_task(answers.keep_warm(0.01))
        await asyncio.sleep(0.05)
        assert len(explanations.sync.catalog) == 0, "not synced yet: left alone"
        ctl.role.synced = True
        await asyncio.sleep(0.05)
        task.cancel()

    asyncio.run(two_ticks())
    assert len(explanations.sync.catalog) == 1


def _fit_world() -> Any:
    """A leader holding one pool of three devices on node-1, one of them held."""
    ctl = Controller(RecordingWriter(), Settings(claim_events=False, explain_api=True))
    ctl.leader = True
    ctl.ingest.class_event("ADDED", device_class("gpu.example.com"))
    devices = [device("g0"), device("g1"), device("g2")]
    ctl.ingest.slice_event("ADDED", rslice("a", devices, pool="pool-a"))
    ctl.ingest.claim_event("ADDED", claim("held", result("g1")))
    ctl.reconciler.compute([(DRIVER, "pool-a")])
    ctl.role.synced = True
    return ctl


def _wanted(name: str = "one-gpu") -> dict[str, Any]:
    return claim(name, namespace="team")


def test_the_leaders_fit_is_fit_of_the_same_pools() -> None:
    ctl = _fit_world()
    fits = FitAnswers(ctl.role, ctl.reconciler, "replica-1")
    review = api.fit_review("team", [_wanted()], None, 500)
    reply = _run(fits.answer("team", json.loads(json.dumps(review))))
    assert reply.code == 201, reply.body
    body = reply.body
    assert (body["kind"], body["spec"]) == ("FitReview", review["spec"])
    assert body["answeredBy"] == {
        "replica": "replica-1",
        "profile": ctl.settings.engine.profile.label(),
        "pools": 1,
    }
    workload = read_workload([_wanted()], lambda *_: None, "team")
    rec = ctl.reconciler
    world = World(
        slices=ctl.store.slices_of((DRIVER, "pool-a")),
        classes=list(ctl.store.classes.values()),
    )
    direct = fit(
        world,
        workload,
        ctl.settings.engine,
        budget=500,
        results=[rec.full_result((DRIVER, "pool-a"))],  # type: ignore[list-item]
        allocations={(DRIVER, "pool-a"): ctl.store.allocations_of((DRIVER, "pool-a"))},
    )
    profile = ctl.settings.engine.profile.label()
    assert body["status"] == document(direct, workload, profile, 500)
    assert body["status"]["copies"] == 2, "g1 is held"
    # --count stops there.
    counted = _run(fits.answer("team", api.fit_review("team", [_wanted()], 1, 500)))
    assert (counted.body["status"]["copies"], counted.body["status"]["stopped"]) == (1, "count")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"kind": "ClaimExplanation"}, "not a FitReview"),
        ({"kind": "FitReview", "spec": []}, "spec is not a map"),
        ({"kind": "FitReview", "spec": {"objects": "x", "budget": 5}}, "spec.objects"),
        ({"kind": "FitReview", "spec": {"objects": [], "budget": 0}}, "spec.budget must be"),
        ({"kind": "FitReview", "spec": {"objects": [], "budget": True}}, "spec.budget must be"),
        ({"kind": "FitReview", "spec": {"objects": [], "count": 1.5, "budget": 9}}, "spec.count"),
        ({"kind": "FitReview", "spec": {"objects": []}}, "spec.budget is required"),
        ({"kind": "FitReview", "spec": {"objects": [], "budget": 10**6}}, "above the operator"),
        ({"kind": "FitReview", "spec": {"objects": [], "budget": 9}}, "no workload"),
    ],
)
def test_a_review_that_cannot_be_answered_is_invalid_and_says_why(
    body: dict[str, Any], message: str
) -> None:
    ctl = _fit_world()
    reply = _run(FitAnswers(ctl.role, ctl.reconciler, "r").answer("team", body))
    assert (reply.code, reply.body["reason"]) == (422, "Invalid"), reply.body
    assert message in reply.body["message"]


def test_a_fit_the_engine_refuses_is_invalid_and_a_standby_answers_nothing() -> None:
    ctl = _fit_world()
    fits = FitAnswers(ctl.role, ctl.reconciler, "r")
    unknown = _wanted()
    unknown["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "nope"
    reply = _run(fits.answer("team", api.fit_review("team", [unknown], None, 9)))
    assert reply.code == 422 and "nope" in reply.body["message"], reply.body
    ctl.role.synced = False
    assert _run(fits.answer("team", api.fit_review("team", [_wanted()], None, 9))).code == 503
    ctl.role.leader = False
    standby = _run(fits.answer("team", api.fit_review("team", [_wanted()], None, 9)))
    assert "standing by" in standby.body["message"]


def test_a_review_that_fails_inside_is_an_error_and_the_next_is_answered(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ctl = _fit_world()
    fits = FitAnswers(ctl.role, ctl.reconciler, "r")

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(fit_answers, "fit", broken)
    reply = _run(fits.answer("team", api.fit_review("team", [_wanted()], None, 9)))
    assert (reply.code, reply.body["reason"]) == (500, "InternalError"), reply.body
    assert reply.body["message"] == "draview could not answer: a bug"
    (record,) = [r for r in caplog.records if r.getMessage() == "fit review failed"]
    assert record.object == "team/ResourceClaim/one-gpu"  # type: ignore[attr-defined]
    monkeypatch.undo()
    assert _run(fits.answer("team", api.fit_review("team", [_wanted()], None, 9))).code == 201


def test_reviews_one_after_another_take_at_most_their_share_of_the_operator() -> None:
    ctl = _fit_world()
    fits = FitAnswers(ctl.role, ctl.reconciler, "r")
    # What the clock says at each look: the first review is looked at (100), begins (100)
    # and ends (102); the second is looked at (103), begins (104) and ends (105).
    times = iter([100.0, 100.0, 102.0, 103.0, 104.0, 105.0])
    waited: list[float] = []

    async def sleep(seconds: float) -> None:
        waited.append(seconds)

    fits.clock, fits.sleep = lambda: next(times), sleep
    review = api.fit_review("team", [_wanted()], None, 9)
    assert _run(fits.answer("team", review)).code == 201
    assert waited == [], "the first review waits for no one"
    assert _run(fits.answer("team", review)).code == 201
    # The first took 2 s from 100: the next may begin at 100 + 2 / SHARE = 104.
    assert fit_answers.SHARE == 0.5 and waited == [1.0]
    # A class that does not exist is refused before its turn: no wait, no look at the clock.
    unknown = _wanted()
    unknown["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "nope"
    assert _run(fits.answer("team", api.fit_review("team", [unknown], None, 9))).code == 422
    assert waited == [1.0] and next(times, None) is None
