"""Who is asking the explain API, and may they have the answer.

The API server authenticates the caller and proxies the request over TLS with a client
certificate of its front-proxy CA, naming the caller in request headers. The CA, the
certificate names it may use and the header names are published in the ConfigMap
kube-system/extension-apiserver-authentication (readable through the built-in Role
extension-apiserver-authentication-reader). Headers are believed only from a connection
whose client certificate that CA signed, for one of those names; anything else is
anonymous and refused.

The API server has authorized `get claimexplanations` (or `create fitreviews`) already.
The operator then asks it (SubjectAccessReview, as any aggregated server delegates
authorization) whether the caller may also read what computing the answer reads: the
claim and every ResourceSlice for `why`, every ResourceSlice and ResourceClaim for `fit`.
The answer names devices (and the claims holding them) of the whole cluster, and it
should reach no one who could not have computed it."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from kubernetes_asyncio import client

CONFIGMAP = ("kube-system", "extension-apiserver-authentication")


@dataclass(frozen=True, slots=True)
class Caller:
    user: str
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FrontProxy:
    ca_pem: str
    allowed_names: tuple[str, ...]  # empty: any certificate the CA signed
    user_headers: tuple[str, ...]
    group_headers: tuple[str, ...]
    extra_prefixes: tuple[str, ...]

    @classmethod
    def from_configmap(cls, data: Mapping[str, str]) -> FrontProxy:
        """ValueError when the API server publishes no front-proxy CA (it runs without
        --requestheader-client-ca-file: no aggregated API can be served)."""
        ca = data.get("requestheader-client-ca-file", "")
        if "BEGIN CERTIFICATE" not in ca:
            raise ValueError(
                "the API server has no front-proxy CA (--requestheader-client-ca-file); "
                "it cannot proxy the explain API"
            )

        def names(key: str) -> tuple[str, ...]:
            return tuple(json.loads(data.get(key) or "[]"))

        return cls(
            ca,
            names("requestheader-allowed-names"),
            names("requestheader-username-headers"),
            names("requestheader-group-headers"),
            names("requestheader-extra-headers-prefix"),
        )

    def server_context(self, cert_file: str, key_file: str) -> ssl.SSLContext:
        """TLS with the operator's serving certificate, asking for a client certificate
        and checking any given against the front-proxy CA."""
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert_file, key_file)
        ctx.load_verify_locations(cadata=self.ca_pem)
        ctx.verify_mode = ssl.CERT_OPTIONAL
        return ctx

    def caller(self, peercert: Mapping[str, Any] | None, headers: Any) -> Caller | None:
        """The caller the front proxy names, or None. `peercert`: ssl's getpeercert() of
        the connection (empty without a verified certificate); `headers`: the request's
        (a multidict: a header may repeat)."""
        if not peercert or not self._allowed(peercert):
            return None
        user = next((headers[h] for h in self.user_headers if headers.get(h)), "")
        if not user:
            return None
        groups = tuple(g for h in self.group_headers for g in headers.getall(h, []))
        extra: dict[str, list[str]] = {}
        for name in headers:
            for prefix in self.extra_prefixes:
                if name.lower().startswith(prefix.lower()):
                    key = name[len(prefix) :].lower()
                    extra[key] = list(headers.getall(name))
        return Caller(user, groups, extra)

    def _allowed(self, peercert: Mapping[str, Any]) -> bool:
        if not self.allowed_names:
            return True
        subject = peercert.get("subject") or ()
        cns = [v for rdn in subject for k, v in rdn if k == "commonName"]
        return any(cn in self.allowed_names for cn in cns)


async def read(api: client.ApiClient) -> FrontProxy:
    namespace, name = CONFIGMAP
    cm = await client.CoreV1Api(api).read_namespaced_config_map(name, namespace)
    return FrontProxy.from_configmap(cm.data or {})


# What computing an answer needs without the operator, as (verb, resource, whether of
# the object named by the request).
Needed = Sequence[tuple[str, str, bool]]
# kubectl dra why CLAIM,
WHY_NEEDED: Needed = (
    ("get", "resourceclaims", True),
    ("list", "resourceslices", False),
)
# and kubectl dra fit (every claim: the answer says which hold the devices it cannot get).
FIT_NEEDED: Needed = (
    ("list", "resourceslices", False),
    ("list", "resourceclaims", False),
)


async def refusal(
    api: client.ApiClient,
    who: Caller,
    needed: Needed,
    namespace: str = "",
    name: str = "",
) -> str | None:
    """Why `who` may not have the answer whose computing takes `needed` (about the object
    namespace/name); None when they may."""
    auth = client.AuthorizationV1Api(api)

    async def check(verb: str, resource: str, local: bool) -> str | None:
        attrs = {"group": "resource.k8s.io", "resource": resource, "verb": verb}
        if local:
            attrs.update(namespace=namespace, name=name)
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": who.user,
                "groups": list(who.groups),
                "extra": who.extra,
                "resourceAttributes": attrs,
            },
        }
        review = await auth.create_subject_access_review(cast(Any, body))
        if review.status is not None and review.status.allowed:
            return None
        where = f' "{name}" in namespace {namespace}' if local else " at the cluster scope"
        return f'user "{who.user}" cannot {verb} resource "{resource}"{where}'

    found = await asyncio.gather(*(check(*n) for n in needed))
    return next((f for f in found if f is not None), None)
