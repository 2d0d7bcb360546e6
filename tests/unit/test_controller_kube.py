"""How the operator connects: the proxy is chosen once, requests never consult the
environment again, and kopf is given the same route."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kubernetes_asyncio.client import V1ObjectMeta

from draview.controller import kube

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://api.example.test:6443", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: secret-token}
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
"""

PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy")


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_env_proxy_follows_https_proxy_and_no_proxy(env: pytest.MonkeyPatch) -> None:
    server = "https://api.example.test:6443"
    assert kube.env_proxy(server) is None
    env.setenv("HTTPS_PROXY", "http://proxy.test:3128")
    assert kube.env_proxy(server) == "http://proxy.test:3128"
    env.setenv("NO_PROXY", ".example.test")
    assert kube.env_proxy(server) is None
    # HTTP_PROXY is for http:// servers only.
    env.delenv("NO_PROXY")
    env.delenv("HTTPS_PROXY")
    env.setenv("HTTP_PROXY", "http://plain.test:80")
    assert kube.env_proxy(server) is None
    assert kube.env_proxy("http://api.example.test:8080") == "http://plain.test:80"


async def test_connect_pins_the_proxy_and_turns_off_per_request_lookups(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    env.setenv("HTTPS_PROXY", "http://proxy.test:3128")
    api = await kube.connect(str(path), None)
    try:
        session = api.rest_client.pool_manager
        assert session.trust_env is False
        assert not session.closed and not session.connector.closed  # type: ignore[union-attr]
        assert api.configuration.proxy == "http://proxy.test:3128"
        assert api.rest_client.proxy == "http://proxy.test:3128"
        info = kube.kopf_login(api)
        assert info.proxy_url == "http://proxy.test:3128"
        assert info.token == "secret-token"
    finally:
        await api.close()
    assert session.closed and session.connector is None  # closing the client closed it


async def test_connect_without_a_proxy_goes_direct(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    api = await kube.connect(str(path), None)
    try:
        assert not api.configuration.proxy
        assert kube.kopf_login(api).proxy_url is None
    finally:
        await api.close()


async def test_plain_bodies_go_to_the_encoder_as_they_are(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    api = await kube.connect(str(path), None)
    try:
        status = {"devices": [{"name": "gpu-0", "allocationCount": 2}]}
        body = kube.Plain(status=status)
        assert api.sanitize_for_serialization(body) is body  # not copied value by value
        # Anything else is still converted: models (Leases, Events), dates.
        when = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
        meta = V1ObjectMeta(name="lease", creation_timestamp=when)
        assert api.sanitize_for_serialization({"metadata": meta}) == {
            "metadata": {"name": "lease", "creationTimestamp": "2026-11-26T12:00:00+00:00"}
        }
        assert json.loads(json.dumps(body)) == {"status": status}
    finally:
        await api.close()
