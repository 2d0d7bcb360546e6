"""What the explain API (explain_api.py) answers: `why` of a pending claim, from the
leader's judged pools.

The leader keeps every judged pool indexed for the Events on pending claims
(event_rounds.CatalogSync); an answer brings that catalog up to date (only the pools
judged since it was last read) and runs the same search `kubectl dra why` runs, on the
event loop in steps, so the Lease and the watches keep going. A client that computes
the answer itself reads every slice the claim's classes can match; at 5,000 nodes that
is tens of MiB of JSON and seconds of decoding before the same search."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from draview.api.claims import ResourceClaim
from draview.api.explanations import SHOWN_PER_REASON, explanation_object, status
from draview.controller.event_rounds import Explanations, run_steps
from draview.controller.queue import Role
from draview.controller.reconcile import Reconciler
from draview.explain import Catalog, Explainer
from draview.explain.model import ClaimExplanation


@dataclass(frozen=True, slots=True)
class Reply:
    code: int
    body: dict[str, Any]


def failure(code: int, reason: str, message: str) -> Reply:
    return Reply(code, status(code, reason, message))


def unavailable(role: Role) -> Reply | None:
    """Why this replica cannot answer now: only a leader past its first sync holds
    every pool judged."""
    if not role.leader:
        return failure(503, "ServiceUnavailable", "this draview replica is standing by")
    if not role.synced:
        return failure(503, "ServiceUnavailable", "draview's first sync is not written yet")
    return None


class ClaimAnswers:
    def __init__(
        self, role: Role, reconciler: Reconciler, explanations: Explanations, identity: str
    ) -> None:
        self.role = role
        self.reconciler = reconciler
        self.explanations = explanations
        self.identity = identity
        self.explainer = Explainer()

    async def keep_warm(self, every: float) -> None:
        """Bring the catalog up to date every `every` seconds while leading, so that an
        answer finds it so (the first one after a sync would otherwise unpack and index
        every pool: seconds at thousands of nodes). Claim Events do the same when a
        claim is pending; this costs only the pools judged since."""
        while True:
            await asyncio.sleep(every)
            if self.role.leader and self.role.synced:
                rules = self.reconciler.store.rules()
                async with self.explanations.lock:
                    await run_steps(self.explanations.sync.refresh(rules))

    def _pending(self, namespace: str, name: str) -> ResourceClaim | None:
        for claim in self.reconciler.store.pending.values():
            if claim.name == name and claim.namespace == namespace:
                return claim
        return None

    async def answer(self, namespace: str, name: str, node: str | None) -> Reply:
        refused = unavailable(self.role)
        if refused is not None:
            return refused
        claim = self._pending(namespace, name)
        if claim is None:
            return failure(
                404,
                "NotFound",
                f'draview holds no pending resourceclaim "{name}" in namespace {namespace}',
            )
        rec = self.reconciler
        labels = None
        if node is not None:
            labels = rec.nodes.labels_of(node)
            if labels is None and rec.nodes_watched:
                return failure(404, "NotFound", f'node "{node}" not found')
        store = rec.store
        rules = store.rules()
        async with self.explanations.lock:
            catalog = await run_steps(self.explanations.sync.refresh(rules))
            exp = await run_steps(
                self.explainer.explain_steps(
                    claim,
                    catalog.devices,
                    store.classes,
                    node,
                    labels,
                    results=catalog.results.values(),
                    rules=rules,
                    gather=catalog.gather,
                    shaky=catalog.shaky,
                )
            )
            devices = allocated_shown(exp, catalog)
        answered_by = {
            "replica": self.identity,
            "profile": rec.settings.engine.profile.label(),
            "pools": len(catalog),
        }
        return Reply(200, explanation_object(namespace, name, exp.to_dict(), devices, answered_by))


def allocated_shown(exp: ClaimExplanation, catalog: Catalog) -> dict[str, dict[str, Any]]:
    """The status of each device `why` shows as allocated (the first SHOWN_PER_REASON of
    each request's), for the claim names in its text."""
    wanted: set[str] = set()
    for r in exp.requests:
        for c in r.choices:
            wanted.update(c.blocked.get("Allocated", [])[:SHOWN_PER_REASON])
    out: dict[str, dict[str, Any]] = {}
    for dev_id in sorted(wanted):
        driver, rest = dev_id.split("/", 1)
        pool, device = rest.rsplit("/", 1)
        entry = catalog.devices.pools.get((driver, pool))
        for d in entry.devices if entry is not None else ():
            if d.device.name == device:
                out[dev_id] = dict(d.status)
                break
    return out
