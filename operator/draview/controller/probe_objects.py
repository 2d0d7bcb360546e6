"""The CapacityProbe objects: what the server holds of each, as far as this replica
knows, and the requests that bring them to the probes' answers. Written through a
StatusRequests of their own (the writer's token bucket and leader's fence): a probe that
cannot be written never makes /readyz fail for the status objects. Each write is a merge
patch of what differs; objects of probes no longer defined are deleted. Only objects
labelled as draview's are read, so one made by hand is never deleted."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from draview.api.status import API_GROUP, CAPACITY_PROBE_KIND, CAPACITY_PROBE_PLURAL, CRD_VERSION
from draview.controller.kube import list_pages
from draview.controller.logs import Once
from draview.controller.mergepatch import merge_diff
from draview.controller.probe_source import error_text
from draview.controller.status_requests import REQUEST_ERRORS, NotLeader, StatusRequests

MANAGED = {"app.kubernetes.io/managed-by": "draview"}
# (spec, status) of each probe's object
Wanted = Mapping[str, tuple[dict[str, Any], dict[str, Any]]]


@dataclass
class _Held:
    spec: dict[str, Any]
    status: dict[str, Any]


class ProbeObjects:
    def __init__(self, requests: StatusRequests, once: Once) -> None:
        self.requests = requests
        self.once = once
        # None: not read since this replica became leader.
        self.held: dict[str, _Held] | None = None

    async def load(self) -> bool:
        """Read the objects on the server (this replica's predecessors' too); False when
        they cannot be read (the CRD not served, the API server away), said once: until
        they are, answers go to the metrics alone and the next round reads again."""
        held: dict[str, _Held] = {}
        try:
            async for page in list_pages(
                self.requests.api, CRD_VERSION, CAPACITY_PROBE_PLURAL, group=API_GROUP
            ):
                for item in page:
                    meta = item.get("metadata", {})
                    if (meta.get("labels") or {}).items() >= MANAGED.items():
                        held[meta["name"]] = _Held(item.get("spec") or {}, item.get("status") or {})
        except REQUEST_ERRORS as exc:
            why = error_text(exc)
            if isinstance(exc, ApiException) and exc.status == 404:
                why = f"{CAPACITY_PROBE_KIND}.{API_GROUP} is not served: CRD missing"
            self.once.say("load", f"cannot read CapacityProbes: {why}")
            return False
        self.once.clear("load")
        self.held = held
        return True

    def forget(self) -> None:
        self.held = None

    async def write(self, wanted: Wanted, defined: Callable[[str], bool]) -> None:
        """Create, change or delete what differs from `wanted`; `defined`: whether a
        probe of that name is still defined (an object of one that is not goes)."""
        held = self.held
        if held is None:
            return
        for name in [n for n in held if not defined(n)]:
            if await self._send(
                name, "delete", self.requests.delete((CAPACITY_PROBE_PLURAL, name))
            ):
                held.pop(name, None)
        for name, (spec, status) in wanted.items():
            have = held.get(name)
            if have is None:
                body = {
                    "apiVersion": f"{API_GROUP}/{CRD_VERSION}",
                    "kind": CAPACITY_PROBE_KIND,
                    "metadata": {"name": name, "labels": dict(MANAGED)},
                    "spec": spec,
                    "status": status,
                }
                key = (CAPACITY_PROBE_PLURAL, name)
                if await self._send(name, "create", self.requests.create(key, body)):
                    held[name] = _Held(spec, status)
                continue
            if have.spec != spec:
                patch = {"metadata": {"labels": MANAGED}, "spec": merge_diff(have.spec, spec)}
                request = self.requests.patch(CAPACITY_PROBE_PLURAL, name, patch)
                if await self._send(name, "patch", request):
                    have.spec = spec
            if have.status != status:
                diff = merge_diff(have.status, status)
                request = self.requests.patch_status(CAPACITY_PROBE_PLURAL, name, diff)
                if await self._send(name, "status", request):
                    have.status = status

    async def _send(self, name: str, what: str, request: Any) -> bool:
        try:
            await request
        except NotLeader:
            return False
        except ApiException as exc:
            if exc.status == 404 and what != "create":
                if self.held is not None:
                    self.held.pop(name, None)  # deleted by someone: made again
                return what == "delete"
            self.once.say(f"write:{name}", f"cannot {what} CapacityProbe {name}: {error_text(exc)}")
            return False
        except REQUEST_ERRORS as exc:
            self.once.say(f"write:{name}", f"cannot {what} CapacityProbe {name}: {error_text(exc)}")
            return False
        self.once.clear(f"write:{name}")
        return True
