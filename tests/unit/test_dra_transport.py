"""The plugin's own reading of a cluster, without a cluster: the kubeconfig as kubectl
reads it, selectors applied to objects read already, durations, and the scopes that
narrow what is read. (The requests themselves run against the local control plane in
tests/integration/test_dra_reads.py.)"""

from __future__ import annotations

import base64
import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from draview.cli.dra.cluster import Query, matches
from draview.cli.dra.common import CliError, parse_duration
from draview.cli.dra.kubeconfig import load, run_exec
from draview.cli.dra.scope import Scope

CA = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"


def kubeconfig(path: Path, **over: Any) -> Path:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "one",
        "clusters": [
            {
                "name": "c1",
                "cluster": {
                    "server": "https://127.0.0.1:6443/",
                    "certificate-authority-data": base64.b64encode(CA).decode(),
                },
            },
            {
                "name": "c2",
                "cluster": {"server": "https://10.0.0.1", "certificate-authority": "ca.crt"},
            },
        ],
        "users": [
            {"name": "u1", "user": {"token": "t0ken"}},
            {"name": "u2", "user": {"client-certificate": "u.crt", "client-key": "u.key"}},
        ],
        "contexts": [
            {"name": "one", "context": {"cluster": "c1", "user": "u1", "namespace": "team-a"}},
            {"name": "two", "context": {"cluster": "c2", "user": "u2"}},
        ],
    }
    doc.update(over)
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_current_context_with_inline_data(tmp_path: Path) -> None:
    c = load(str(kubeconfig(tmp_path / "config")), None)
    assert c.server == "https://127.0.0.1:6443" and c.token == "t0ken"
    assert c.ca_data == CA and c.namespace == "team-a"
    assert "context one" in c.origin


def test_a_named_context_reads_files_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    for name, data in (("ca.crt", CA), ("u.crt", b"cert"), ("u.key", b"key")):
        (tmp_path / name).write_bytes(data)
    c = load(str(kubeconfig(tmp_path / "config")), "two")
    assert (c.ca_data, c.cert_data, c.key_data) == (CA, b"cert", b"key")
    assert c.namespace == "default" and c.token is None


def test_kubeconfig_files_merge_as_kubectl_merges_them(tmp_path: Path, monkeypatch: Any) -> None:
    first = tmp_path / "first"
    first.write_text(yaml.safe_dump({"current-context": "two"}))
    second = kubeconfig(tmp_path / "second", **{"current-context": "one"})
    monkeypatch.setenv("KUBECONFIG", f"{first}:{tmp_path / 'missing'}:{second}")
    (tmp_path / "ca.crt").write_bytes(CA)
    (tmp_path / "u.crt").write_bytes(b"c")
    (tmp_path / "u.key").write_bytes(b"k")
    assert load(None, None).server == "https://10.0.0.1"  # the first file's context wins


@pytest.mark.parametrize(
    ("over", "context", "message"),
    [
        (
            {"current-context": ""},
            None,
            "names no current context (its contexts: one, two); set --context",
        ),
        ({}, "three", "has no context 'three' (its contexts: one, two); set --context"),
        (
            {"users": [{"name": "u1", "user": {"auth-provider": {"name": "gcp"}}}]},
            None,
            "authenticates with auth-provider 'gcp'; use --kubectl",
        ),
        ({"clusters": []}, None, "its cluster 'c1' has no server"),
    ],
)
def test_kubeconfig_problems_are_one_line(
    tmp_path: Path, over: dict[str, Any], context: str | None, message: str
) -> None:
    with pytest.raises(CliError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load(str(kubeconfig(tmp_path / "config", **over)), context)


def test_no_kubeconfig_names_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(CliError, match=r"no kubeconfig file at .*/none; set --kubeconfig"):
        load(str(tmp_path / "none"), None)


def test_not_yaml_says_so(tmp_path: Path) -> None:
    (tmp_path / "config").write_text("clusters: [\n")
    with pytest.raises(CliError, match=r"kubeconfig .*/config cannot be read"):
        load(str(tmp_path / "config"), None)


def test_an_exec_plugin_runs_once_with_the_cluster_it_asked_for(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    seen = tmp_path / "seen.json"
    plugin.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"open({str(seen)!r}, 'w').write(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', "
        "'kind': 'ExecCredential', 'status': {'token': 'from-exec'}}))\n"
    )
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    users = [
        {
            "name": "u1",
            "user": {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": str(plugin),
                    "provideClusterInfo": True,
                    "env": [{"name": "X", "value": "1"}],
                }
            },
        }
    ]
    creds = load(str(kubeconfig(tmp_path / "config", users=users)), None)
    assert run_exec(creds).token == "from-exec"
    info = json.loads(seen.read_text())
    assert info["kind"] == "ExecCredential"
    assert info["spec"]["cluster"]["server"] == "https://127.0.0.1:6443/"


def test_a_missing_exec_plugin_gives_its_install_hint(tmp_path: Path) -> None:
    users = [
        {
            "name": "u1",
            "user": {
                "exec": {"command": str(tmp_path / "nope"), "installHint": "install nope\nfrom x"}
            },
        }
    ]
    creds = load(str(kubeconfig(tmp_path / "config", users=users)), None)
    with pytest.raises(CliError, match=r"is not installed \(install nope from x\)"):
        run_exec(creds)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0", 0), ("30", 30), ("30s", 30), ("1m30s", 90), ("2h", 7200), ("500ms", 0.5), ("1.5s", 1.5)],
)
def test_durations_as_kubectl_takes_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["soon", "5x", "m", "3m2"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


OBJ = {
    "metadata": {"name": "a", "labels": {"draview.io/driver": "gpu", "draview.io/node": "n1"}},
    "spec": {"driver": "gpu", "nodeName": "n1"},
}
NET = {"metadata": {"name": "b", "labels": {"draview.io/driver": "gpu"}}, "spec": {"driver": "gpu"}}


@pytest.mark.parametrize(
    ("query", "a", "b"),
    [
        (Query(labels="draview.io/driver=gpu"), True, True),
        (Query(labels="draview.io/driver=gpu,draview.io/node=n1"), True, False),
        (Query(labels="!draview.io/node"), False, True),
        (Query(labels="draview.io/node"), True, False),
        (Query(labels="draview.io/node!=n1"), False, True),
        (Query(fields="spec.nodeName="), False, True),
        (Query(fields="spec.driver=gpu,spec.nodeName=n1"), True, False),
        (Query(fields="spec.nodeName!=n1"), False, True),
    ],
)
def test_selectors_select_as_the_api_server_does(query: Query, a: bool, b: bool) -> None:
    assert (matches(OBJ, query), matches(NET, query)) == (a, b)


def test_a_node_scope_asks_for_its_own_objects_and_those_no_node_owns() -> None:
    s = Scope(driver="gpu", node="n1")
    assert [(q.labels, q.fields) for q in s.status_queries()] == [
        (None, "spec.driver=gpu,spec.nodeName=n1"),
        ("!draview.io/node", "spec.driver=gpu"),
    ]
    assert [q.fields for q in s.slice_queries()] == [
        "spec.driver=gpu,spec.nodeName=n1",
        "spec.driver=gpu,spec.nodeName=",
    ]


def test_a_pool_is_selected_on_statuses_and_what_cannot_be_selected_is_not_narrowed() -> None:
    assert Scope(pool="p").status_queries()[0].fields == "spec.pool=p"
    assert Scope(driver="gpu", pool="p").slice_queries()[0].fields == "spec.driver=gpu"
    assert Scope(pool="p").slice_queries()[0] == Query()
    assert Scope(driver="a,b").status_queries() == [Query()]
    assert Scope(node="a=b").slice_queries() == [Query()]
    assert Scope().status_queries() == [Query()]


def _claim_for(*classes: str, selectors: tuple[str, ...] = ()) -> Any:
    from draview.api.claims import ResourceClaim

    requests = [
        {
            "name": f"r{i}",
            "exactly": {
                "deviceClassName": c,
                "selectors": [{"cel": {"expression": e}} for e in selectors],
            },
        }
        for i, c in enumerate(classes)
    ]
    return ResourceClaim.from_object(
        {"metadata": {"name": "c", "namespace": "n"}, "spec": {"devices": {"requests": requests}}}
    )


def test_the_drivers_a_claim_can_reach() -> None:
    from draview.api.taints import DeviceClass
    from draview.cli.dra.scope import claim_drivers

    def cls(name: str, *exprs: str) -> DeviceClass:
        return DeviceClass(name=name, selectors=exprs)

    classes = {
        "gpu": cls("gpu", "device.driver == 'gpu.example.com'", "device.attributes['x'].y"),
        "nic": cls("nic", ' "nic.example.com"==device.driver '),
        "any": cls("any", "device.driver.startsWith('gpu')"),
        "open": cls("open"),
    }
    assert claim_drivers(_claim_for("gpu", "nic"), classes) == {
        "gpu.example.com",
        "nic.example.com",
    }
    # A request that may match any driver, or a class that is not there: no narrowing.
    assert claim_drivers(_claim_for("gpu", "any"), classes) is None
    assert claim_drivers(_claim_for("missing"), classes) is None
    # The request's own selector may name the driver.
    assert claim_drivers(
        _claim_for("open", selectors=('device.driver == "fpga.example.com"',)), classes
    ) == {"fpga.example.com"}
    assert claim_drivers(_claim_for("open", selectors=("device.driver != 'x'",)), classes) is None
