"""Connecting to Kubernetes: config, discovery of served versions, lists, self-check."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp
import kopf
from kubernetes_asyncio import client

from draview.api.status import API_GROUP, PLURALS
from draview.controller.kubeconfig import load as kubeconfig_load

log = logging.getLogger("draview.kube")
GROUP = "resource.k8s.io"


async def connect(kubeconfig: str | None, context: str | None) -> client.ApiClient:
    """A client for the cluster that kubeconfig.load finds (StartupError: none)."""
    await kubeconfig_load(kubeconfig, context)
    return api_client()


def api_client() -> client.ApiClient:
    """A client for the configuration kubeconfig.load set."""
    cfg = client.Configuration.get_default_copy()
    if not cfg.proxy:
        cfg.proxy = env_proxy(str(cfg.host))
    api = client.ApiClient(cfg)
    _no_env_lookups(api)
    _plain_bodies_as_they_are(api)
    return api


class Plain(dict[str, Any]):
    """A request body that is JSON already (dicts, lists, strings, numbers, booleans and
    None only), as every body the writer sends is."""

    __slots__ = ()


def _plain_bodies_as_they_are(api: client.ApiClient) -> None:
    """kubernetes_asyncio copies every request body through sanitize_for_serialization,
    a Python walk over each value, before json.dumps encodes it: for a large status,
    more CPU than the encoding itself. A Plain body has nothing to convert and goes to
    the encoder as it is; every other body (Lease and Event models) is converted as
    before."""
    convert = api.sanitize_for_serialization

    def sanitize(obj: Any) -> Any:
        return obj if type(obj) is Plain else convert(obj)

    api.sanitize_for_serialization = sanitize  # type: ignore[method-assign]


def env_proxy(server: str) -> str | None:
    """The proxy that HTTPS_PROXY/HTTP_PROXY/NO_PROXY choose for the API server, if any.

    Read once at start and given to both HTTP clients explicitly (see _no_env_lookups)."""
    parts = urlsplit(server)
    if parts.hostname and proxy_bypass(parts.hostname):
        return None
    return getproxies().get(parts.scheme or "https")


def _no_env_lookups(api: client.ApiClient) -> None:
    """kubernetes_asyncio's aiohttp.ClientSession trusts the environment, so aiohttp
    looks up a proxy and a ~/.netrc entry for every request, each in a worker thread: a
    thread hop and a file read per status write. The proxy is resolved once instead
    (connect); nothing here authenticates through netrc."""
    old = api.rest_client.pool_manager
    api.rest_client.pool_manager = aiohttp.ClientSession(
        connector=old.connector, trust_env=False, read_bufsize=2**21
    )
    old.detach()  # the new ClientSession owns the connector now


def kopf_login(api: client.ApiClient) -> kopf.ConnectionInfo:
    """Give kopf the very credentials kubernetes_asyncio loaded (honours --context)."""
    cfg = api.configuration
    token = None
    auth = (cfg.api_key or {}).get("authorization") or (cfg.api_key or {}).get("BearerToken")
    if auth:
        token = auth.split(" ", 1)[-1]
    return kopf.ConnectionInfo(
        server=str(cfg.host),
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        token=token,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
        proxy_url=cfg.proxy or None,  # the same route as our own requests
    )


async def _get(api: client.ApiClient, path: str) -> Any:
    resp = await api.call_api(
        path,
        "GET",
        response_types_map={200: "object"},
        auth_settings=["BearerToken"],
        _return_http_data_only=True,
    )
    return resp


async def server_version(api: client.ApiClient) -> str:
    """The API server's gitVersion (/version, readable by every authenticated user)."""
    info = await _get(api, "/version")
    return str(info.get("gitVersion", "")) if isinstance(info, dict) else ""


async def feature_metrics(api: client.ApiClient) -> tuple[str | None, str]:
    """The `kubernetes_feature_enabled` lines of the API server's /metrics, streamed so
    that the (large) rest is never held; (None, why) when it cannot be read."""
    resp = await api.call_api(
        "/metrics",
        "GET",
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    try:
        if resp.status != 200:
            return None, f"GET /metrics: HTTP {resp.status} {resp.reason}"
        lines: list[str] = []
        async for raw in resp.content:
            if raw.startswith(b"kubernetes_feature_enabled"):
                lines.append(raw.decode("utf-8", "replace"))
        return "".join(lines), ""
    finally:
        resp.release()


async def served_version(api: client.ApiClient, plural: str) -> str | None:
    """The preferred version of resource.k8s.io that serves `plural` (None if none)."""
    try:
        group = await _get(api, f"/apis/{GROUP}")
    except client.exceptions.ApiException:
        return None
    preferred = (group.get("preferredVersion") or {}).get("version")
    versions = [v["version"] for v in group.get("versions", [])]
    versions.sort(key=lambda v: v != preferred)  # preferred first, then server order
    for version in versions:
        resources = await _get(api, f"/apis/{GROUP}/{version}")
        if any(r.get("name") == plural for r in resources.get("resources", [])):
            return str(version)
    return None


async def list_pages(
    custom: client.CustomObjectsApi,
    version: str,
    plural: str,
    limit: int = 500,
    group: str = GROUP,
    listed: dict[str, str] | None = None,
) -> AsyncIterator[list[dict[str, Any]]]:
    """Every object of a kind, one page at a time: a caller that digests each page before
    asking for the next never holds the whole raw list (a large cluster's claims, decoded,
    are gigabytes).
    `listed` receives the list's resourceVersion (every page is of one snapshot), from
    which a watch goes on.

    The next page is requested before the current one is handed out, so the API server
    encodes it while the caller digests this one (the startup list took half as long)."""

    def fetch(token: str | None) -> asyncio.Task[Any]:
        kwargs: dict[str, Any] = {"limit": limit}
        if token:
            kwargs["_continue"] = token
        return asyncio.ensure_future(
            custom.list_cluster_custom_object(group, version, plural, **kwargs)
        )

    pending = fetch(None)
    try:
        while True:
            page = await pending
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if listed is not None and meta.get("resourceVersion"):
                listed["resourceVersion"] = str(meta["resourceVersion"])
            if token:
                pending = fetch(token)
            yield page.get("items", [])
            del page
            if not token:
                return
    finally:
        pending.cancel()  # a caller that stops early leaves no request behind


async def list_all(
    custom: client.CustomObjectsApi, version: str, plural: str
) -> list[dict[str, Any]]:
    return [obj async for page in list_pages(custom, version, plural) for obj in page]


NEEDED = [
    ("list", "", "nodes", ""),
    ("watch", "", "nodes", ""),
    ("list", GROUP, "resourceslices", ""),
    ("watch", GROUP, "resourceslices", ""),
    ("list", GROUP, "resourceclaims", ""),
    ("watch", GROUP, "resourceclaims", ""),
    ("list", GROUP, "devicetaintrules", ""),
    ("watch", GROUP, "devicetaintrules", ""),
    ("list", GROUP, "deviceclasses", ""),
    ("watch", GROUP, "deviceclasses", ""),
    ("create", "events.k8s.io", "events", ""),
    *(
        (verb, API_GROUP, plural, sub)
        for plural in PLURALS.values()
        for verb, sub in (("create", ""), ("patch", "status"), ("update", "status"), ("delete", ""))
    ),
]


async def self_check(api: client.ApiClient, lease_namespace: str | None) -> list[str]:
    """What this identity may not do that draview needs (SelfSubjectAccessReview)."""
    authz = client.AuthorizationV1Api(api)
    needed = list(NEEDED)
    if lease_namespace:
        needed += [
            ("get", "coordination.k8s.io", "leases", ""),
            ("update", "coordination.k8s.io", "leases", ""),
        ]
    missing: list[str] = []
    for verb, group, resource, sub in needed:
        attrs = client.V1ResourceAttributes(
            verb=verb, group=group, resource=resource, subresource=sub or None
        )
        if resource == "leases" and lease_namespace:
            attrs.namespace = lease_namespace
        review = client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attrs)
        )
        try:
            out = await authz.create_self_subject_access_review(review)
        except client.exceptions.ApiException as exc:
            return [f"cannot run SelfSubjectAccessReview ({exc.status})"]
        if not out.status.allowed:
            missing.append(f"{verb} {resource}{'/' + sub if sub else ''}.{group}")
    return missing
