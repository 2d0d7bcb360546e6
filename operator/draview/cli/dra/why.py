"""`kubectl dra why CLAIM`: why a ResourceClaim is not allocated."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from draview.api.claims import ResourceClaim
from draview.api.explanations import SHOWN_PER_REASON
from draview.api.fastclaim import read_claim
from draview.cli.dra.allocations import OPERATOR
from draview.cli.dra.cluster import NotFound
from draview.cli.dra.common import CliError
from draview.cli.dra.operator_answer import Answer, ask, other_profile
from draview.cli.dra.rbac import Visibility
from draview.cli.dra.render import Doc
from draview.cli.dra.source import Source, note
from draview.cli.output import dump
from draview.explain import DeviceIndex, Explainer
from draview.explain.model import ChoiceExplanation, ClaimExplanation


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "why",
        parents=[common],
        help="explain why a ResourceClaim is not allocated",
        description="For each request (and firstAvailable subrequest): the devices the "
        "DeviceClass and request CEL selectors match, how many are free, and what blocks "
        "the rest (allocated, shared counters, untolerated taints, incomplete or invalid "
        "pools, node reach, capacity requests, counts, matchAttribute constraints), exactly as "
        "the scheduler's allocator sees them. A pending claim is answered by the draview "
        "operator's leader where its explain API is installed (stderr says so), else "
        "computed here from slices and claims.",
    )
    p.add_argument("claim", metavar="CLAIM", help="ResourceClaim name")
    p.add_argument("--node", help="the node the pod must run on (checks which devices it reaches)")
    p.set_defaults(func=run)


def _claim(source: Source, name: str, namespace: str) -> tuple[dict[str, Any], ResourceClaim]:
    try:
        raw = source.one("ResourceClaim", name, namespace)
    except NotFound:
        raise CliError(f'resourceclaim "{name}" not found in namespace {namespace}') from None
    claim, problem = read_claim(raw)
    if problem is not None or claim is None:
        raise CliError(f'resourceclaim "{name}" in namespace {namespace} cannot be read: {problem}')
    return raw, claim


Statuses = Mapping[str, Mapping[str, Any]]  # device id -> its status (allocations)


def _detail(status: Mapping[str, Any] | None, reason: str, detail: str, vis: Visibility) -> str:
    if reason == "Allocated" and status is not None:
        text = vis.claims_text(dict(status))
        return f"allocated to {text}" if text and not text.startswith("(") else f"allocated {text}"
    return detail


def render_choice(
    doc: Doc, level: int, c: ChoiceExplanation, statuses: Statuses, vis: Visibility
) -> None:
    doc.head(level, c.request)
    mode = "All" if c.allocation_mode == "All" else f"ExactCount, count {c.count}"
    pairs: list[tuple[str, object]] = [
        ("Device Class", c.device_class),
        ("Mode", mode + (", admin access" if c.admin_access else "")),
    ]
    if c.error:
        pairs.append(("Error", c.error))
    else:
        pairs += [("Matching Devices", c.matched), ("Free Devices", len(c.free))]
    doc.block(level + 1, pairs)
    if c.selectors:
        doc.head(level + 1, "Selectors")
        for s in c.selectors:
            doc.line(level + 2, f"- {s}")
    if c.runtime_errors:
        doc.head(level + 1, "CEL Runtime Errors")
        for dev, msg in sorted(c.runtime_errors.items())[:SHOWN_PER_REASON]:
            doc.line(level + 2, f"- {dev}: {msg}")
        if len(c.runtime_errors) > SHOWN_PER_REASON:
            doc.line(level + 2, f"- … {len(c.runtime_errors) - SHOWN_PER_REASON} more")
    if c.free:
        doc.head(level + 1, "Free")
        for dev in c.free[:SHOWN_PER_REASON]:
            doc.line(level + 2, f"- {dev}")
        if len(c.free) > SHOWN_PER_REASON:
            doc.line(level + 2, f"- … {len(c.free) - SHOWN_PER_REASON} more")
    if c.blocked:
        doc.head(level + 1, "Blocked")
        for reason, devs in sorted(c.blocked.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            doc.head(level + 2, f"{reason} ({len(devs)})")
            for dev in devs[:SHOWN_PER_REASON]:
                detail = _detail(statuses.get(dev), reason, c.details.get(dev, ""), vis)
                doc.line(level + 3, f"- {dev}" + (f": {detail}" if detail != reason else ""))
            if len(devs) > SHOWN_PER_REASON:
                doc.line(level + 3, f"- … {len(devs) - SHOWN_PER_REASON} more")
    doc.block(level + 1, [("Result", ("fits: " if c.satisfiable else "") + c.reason)])


def render(exp: ClaimExplanation, statuses: Statuses, vis: Visibility) -> str:
    doc = Doc()
    doc.block(
        0,
        [
            ("Claim", f"{exp.namespace}/{exp.name}"),
            ("Allocated", "yes" if exp.allocated else "no"),
            ("Node", exp.node or "any (use --node to check one)"),
            ("Verdict", exp.verdict),
            ("Why", exp.summary),
        ],
    )
    if exp.requests:
        doc.head(0, "Requests")
    for r in exp.requests:
        if r.prioritized:
            doc.head(1, f"{r.name} (firstAvailable, in order)")
            for c in r.choices:
                render_choice(doc, 2, c, statuses, vis)
        else:
            render_choice(doc, 1, r.choices[0], statuses, vis)
    if exp.constraint_problems:
        doc.head(0, "Constraints")
        for p in exp.constraint_problems:
            doc.line(1, f"- {p}")
    return doc.text()


def _print(exp: ClaimExplanation, statuses: Statuses, vis: Visibility, output: str) -> None:
    if output in ("yaml", "json"):
        sys.stdout.write(dump(exp.to_dict(), output))
    else:
        sys.stdout.write(render(exp, statuses, vis))


def run(args: argparse.Namespace, source: Source) -> int:
    namespace = args.namespace or source.default_namespace()
    raw, claim = _claim(source, args.claim, namespace)
    vis = Visibility(source.cluster)
    if not claim.allocated and source.cluster is not None and not source.live:
        asked = ask(source.cluster, namespace, args.claim, args.node)
        if isinstance(asked, Answer):
            differs = other_profile(asked.profile, source.named_profile())
            if differs is None:
                note(asked.source)
                _print(asked.explanation, asked.statuses, vis, args.output)
                return 0
            asked = differs
        if asked is not None:
            note(f"the draview operator did not answer ({asked}); computing the answer here")
    world, results, origin = source.claim_world(raw, claim)
    if origin == OPERATOR:
        note(f"allocations as recorded in {origin} (--live reads every claim)")
    if claim.allocated and not source.offline and not source.live:
        note("judged on the pools the claim is allocated in (its status names them)")
    index = DeviceIndex.build(results, world.taint_rules)
    labels = source.node_labels(args.node) if args.node else {}
    exp = Explainer().explain(
        claim, index, world.classes, args.node, labels, results, world.taint_rules
    )
    _print(exp, {d.id: d.status for d in index.devices}, vis, args.output)
    return 0
