"""Where capacity probe definitions come from: the ConfigMaps of the operator's namespace
that carry LABEL (api/probes.py reads their keys), and the ResourceClaimTemplates the
probes name, read again on every reload."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from draview.api.probes import ProbeProblem, ProbeSpec, read_configmap, unique

LABEL = "draview.io/capacity-probes"
Templates = dict[tuple[str, str], Any]  # (namespace, name) -> template, None: not found


class ProbeSource:
    def __init__(self, api: client.ApiClient, namespace: str, claim_version: str) -> None:
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.namespace = namespace
        self.claim_version = claim_version

    async def read(self) -> tuple[dict[str, ProbeSpec], list[ProbeProblem], Templates]:
        found = await self.core.list_namespaced_config_map(self.namespace, label_selector=LABEL)
        specs: list[ProbeSpec] = []
        problems: list[ProbeProblem] = []
        for cm in found.items:
            obj = {
                "metadata": {"namespace": cm.metadata.namespace, "name": cm.metadata.name},
                "data": cm.data or {},
            }
            got, bad = read_configmap(obj)
            specs += got
            problems += bad
        by_name, twice = unique(specs)
        templates: Templates = {}
        for spec in by_name.values():
            if spec.template is not None and spec.template not in templates:
                templates[spec.template] = await self._template(*spec.template)
        return by_name, problems + twice, templates

    async def _template(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = await self.custom.get_namespaced_custom_object(
                "resource.k8s.io",
                self.claim_version,
                namespace,
                "resourceclaimtemplates",
                name,
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return {"metadata": obj.get("metadata", {}), "spec": obj.get("spec")}


def error_text(exc: BaseException) -> str:
    """An API or connection error in a few words, for a log line."""
    if isinstance(exc, ApiException):
        return f"{exc.status} {exc.reason}"
    return " ".join(str(exc).split()) or type(exc).__name__
