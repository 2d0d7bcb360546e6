"""The explain API's Service points at the leader only.

Only the leader holds judged pools (a standby keeps its store warm but judges nothing),
so the chart's Service has no selector, and the leader keeps its own address in the
Service's one EndpointSlice. A new leader writes its address over the old one; a leader
that stops cleanly deletes it, so that the API server stops sending requests to a Pod
that is going away. While no leader has written it, the APIService is unavailable and
`kubectl dra why` computes the answer itself."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from typing import Any, cast

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from draview.api.status import API_GROUP
from draview.controller.logs import Once
from draview.controller.queue import Role

log = logging.getLogger("draview.explain_api")

MANAGED_BY = API_GROUP
PORT_NAME = "https"
# Seconds between looks at the leadership, and between checks that the slice is intact.
TICK = 1.0
RECHECK = 60.0


def endpoint_slice(
    namespace: str, service: str, address: str, port: int, pod: tuple[str, str] | None
) -> dict[str, Any]:
    """The Service's EndpointSlice naming `address`; `pod`: (name, uid) when in a Pod."""
    family = "IPv6" if ipaddress.ip_address(address).version == 6 else "IPv4"
    endpoint: dict[str, Any] = {"addresses": [address], "conditions": {"ready": True}}
    if pod is not None:
        endpoint["targetRef"] = {
            "kind": "Pod",
            "namespace": namespace,
            "name": pod[0],
            "uid": pod[1],
        }
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service}-leader",
            "namespace": namespace,
            "labels": {
                "kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
            },
        },
        "addressType": family,
        "endpoints": [endpoint],
        "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}],
    }


def _same(found: Any, want: dict[str, Any]) -> bool:
    eps = found.endpoints or []
    ports = found.ports or []
    owners = [o.uid for o in found.metadata.owner_references or []]
    return (
        owners == [o["uid"] for o in want["metadata"].get("ownerReferences", [])]
        and len(eps) == 1
        and eps[0].addresses == want["endpoints"][0]["addresses"]
        and len(ports) == 1
        and ports[0].port == want["ports"][0]["port"]
        and ports[0].name == PORT_NAME
    )


class LeaderEndpoint:
    def __init__(
        self,
        api: client.ApiClient,
        role: Role,
        namespace: str,
        service: str,
        address: str,
        port: int,
        pod: tuple[str, str] | None,
    ) -> None:
        self.discovery = client.DiscoveryV1Api(api)
        self.core = client.CoreV1Api(api)
        self.service = service
        self.role = role
        self.body = endpoint_slice(namespace, service, address, port, pod)
        self.namespace = namespace
        self.name = str(self.body["metadata"]["name"])
        self.once = Once(log)

    async def run(self) -> None:
        checked = None  # monotonic time of the last write or check while leading
        loop = asyncio.get_running_loop()
        while True:
            due = checked is None or loop.time() - checked >= RECHECK
            if not self.role.leader:
                checked = None
            elif due and await self.ensure():
                checked = loop.time()
            await asyncio.sleep(TICK)

    async def _owner(self) -> None:
        """The Service owns the slice, as it owns those the EndpointSlice controller
        writes: the garbage collector removes it with the Service, also when the leader
        could not (its RBAC went first on `helm uninstall`)."""
        if "ownerReferences" in self.body["metadata"]:
            return
        try:
            svc = await self.core.read_namespaced_service(self.service, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
            return  # none yet: the slice is written without an owner until there is
        self.body["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Service", "name": self.service, "uid": svc.metadata.uid}
        ]

    async def ensure(self) -> bool:
        """The slice names this replica; False when it could not be written."""
        try:
            await self._owner()
            try:
                found = await self.discovery.read_namespaced_endpoint_slice(
                    self.name, self.namespace
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise
                await self.discovery.create_namespaced_endpoint_slice(
                    self.namespace, cast(Any, self.body)
                )
            else:
                if not _same(found, self.body):
                    body = dict(self.body)
                    body["metadata"] = {
                        **self.body["metadata"],
                        "resourceVersion": found.metadata.resource_version,
                    }
                    await self.discovery.replace_namespaced_endpoint_slice(
                        self.name, self.namespace, cast(Any, body)
                    )
        except (ApiException, OSError, TimeoutError) as exc:
            self.once.say("write", f"cannot write the explain API's EndpointSlice: {exc}")
            return False
        self.once.clear("write")
        return True

    async def release(self) -> None:
        """Stepping down cleanly: delete the slice if it still names this replica."""
        try:
            found = await self.discovery.read_namespaced_endpoint_slice(self.name, self.namespace)
            if _same(found, self.body):
                await self.discovery.delete_namespaced_endpoint_slice(
                    self.name,
                    self.namespace,
                    body=cast(
                        Any, {"preconditions": {"resourceVersion": found.metadata.resource_version}}
                    ),
                )
        except (ApiException, OSError, TimeoutError) as exc:
            log.info("explain API endpoint left for the next leader", extra={"error": str(exc)})
