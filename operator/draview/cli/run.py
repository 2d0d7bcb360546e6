"""`draview run`: flags, each with a DRAVIEW_* environment variable."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
import uuid

from draview.controller.core import Settings
from draview.engine.model import EngineOptions


def _env(name: str, default: str) -> str:
    return os.environ.get(f"DRAVIEW_{name}", default)


def _bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {text!r}")


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0: {text!r}")
    return value


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run the operator",
        description="Watch ResourceSlices, ResourceClaims and DeviceTaintRules and keep "
        "ResourceSliceStatus and ResourcePoolStatus objects current. Every flag can also be "
        "set with the DRAVIEW_* environment variable named in its help.",
    )
    p.add_argument(
        "--kubeconfig",
        default=os.environ.get("KUBECONFIG"),
        help="kubeconfig file (KUBECONFIG; default: in-cluster, then ~/.kube/config)",
    )
    p.add_argument(
        "--context",
        default=_env("CONTEXT", "") or None,
        help="kubeconfig context (DRAVIEW_CONTEXT)",
    )
    p.add_argument(
        "--batch-interval",
        type=_positive,
        default=_env("BATCH_INTERVAL", "0.25"),
        help="seconds between recomputations of changed pools "
        "(DRAVIEW_BATCH_INTERVAL, default 0.25)",
    )
    p.add_argument(
        "--qps",
        type=_positive,
        default=_env("QPS", "300"),
        help="sustained API writes per second (DRAVIEW_QPS, default 300). The first "
        "sync writes four requests per single-slice pool (create + status of two "
        "objects): 5,000 nodes take about 70 s of writes at 300",
    )
    p.add_argument(
        "--burst",
        type=int,
        default=int(_env("BURST", "600")),
        help="API write burst (DRAVIEW_BURST, default 600)",
    )
    p.add_argument(
        "--write-concurrency",
        type=int,
        default=int(_env("WRITE_CONCURRENCY", "64")),
        help="API writes in flight at once (DRAVIEW_WRITE_CONCURRENCY, default 64)",
    )
    p.add_argument(
        "--resync-interval",
        type=_positive,
        default=_env("RESYNC_INTERVAL", "300"),
        help="seconds between full re-lists that heal missed watch events "
        "(DRAVIEW_RESYNC_INTERVAL, default 300)",
    )
    p.add_argument(
        "--bind-address",
        default=_env("BIND_ADDRESS", "0.0.0.0"),
        help="address for /healthz, /readyz, /metrics (DRAVIEW_BIND_ADDRESS)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=int(_env("PORT", "8080")),
        help="port for /healthz, /readyz, /metrics (DRAVIEW_PORT, default 8080)",
    )
    p.add_argument(
        "--leader-elect",
        type=_bool,
        default=_bool(_env("LEADER_ELECT", "true")),
        metavar="BOOL",
        help="elect a leader with a Lease; only it writes (DRAVIEW_LEADER_ELECT, default true)",
    )
    p.add_argument(
        "--lease-namespace",
        default=_env("LEASE_NAMESPACE", os.environ.get("POD_NAMESPACE", "default")),
        help="namespace of the Lease (DRAVIEW_LEASE_NAMESPACE, else POD_NAMESPACE)",
    )
    p.add_argument(
        "--lease-name",
        default=_env("LEASE_NAME", "draview-leader"),
        help="name of the Lease (DRAVIEW_LEASE_NAME)",
    )
    p.add_argument(
        "--identity",
        default=_env("IDENTITY", f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"),
        help="this replica's name in the Lease (DRAVIEW_IDENTITY)",
    )
    p.add_argument(
        "--lease-duration",
        type=_positive,
        default=_env("LEASE_DURATION", "15"),
        help="seconds a Lease that stopped changing stays another replica's "
        "(DRAVIEW_LEASE_DURATION, default 15)",
    )
    p.add_argument(
        "--renew-deadline",
        type=_positive,
        default=_env("RENEW_DEADLINE", "10"),
        help="seconds without a successful renewal after which the leader stops writing "
        "and steps down; under --lease-duration (DRAVIEW_RENEW_DEADLINE, default 10)",
    )
    p.add_argument(
        "--retry-period",
        type=_positive,
        default=_env("RETRY_PERIOD", "2"),
        help="seconds between Lease renewals or acquisition attempts "
        "(DRAVIEW_RETRY_PERIOD, default 2)",
    )
    p.add_argument(
        "--shutdown-timeout",
        type=_positive,
        default=_env("SHUTDOWN_TIMEOUT", "20"),
        help="seconds SIGTERM allows for writing what is pending, under the pod's "
        "terminationGracePeriodSeconds (DRAVIEW_SHUTDOWN_TIMEOUT, default 20)",
    )
    p.add_argument(
        "--max-object-bytes",
        type=int,
        default=int(_env("MAX_OBJECT_BYTES", "1000000")),
        help="largest status object written, as JSON; bigger ones list fewer allocations "
        "per device, then fewer validation errors (DRAVIEW_MAX_OBJECT_BYTES, default 1000000)",
    )
    p.add_argument(
        "--partition-attribute",
        action="append",
        default=[a for a in _env("PARTITION_ATTRIBUTES", "").split(",") if a],
        metavar="ATTR",
        help="attribute naming a partition type "
        "(repeatable; DRAVIEW_PARTITION_ATTRIBUTES, comma-separated)",
    )
    p.add_argument(
        "--max-allocations",
        type=int,
        default=int(_env("MAX_ALLOCATIONS", "32")),
        help="allocations listed per device (DRAVIEW_MAX_ALLOCATIONS, default 32)",
    )
    p.add_argument(
        "--claim-events",
        type=_bool,
        default=_bool(_env("CLAIM_EVENTS", "true")),
        metavar="BOOL",
        help="post an Event on claims that stay unallocated, saying why, once per change "
        "of explanation (DRAVIEW_CLAIM_EVENTS, default true)",
    )
    p.add_argument(
        "--pending-threshold",
        type=_positive,
        default=_env("PENDING_THRESHOLD", "60"),
        help="seconds a claim may stay unallocated before it gets an Event "
        "(DRAVIEW_PENDING_THRESHOLD, default 60)",
    )
    p.add_argument(
        "--explain-interval",
        type=_positive,
        default=_env("EXPLAIN_INTERVAL", "10"),
        help="seconds between looks at pending claims (DRAVIEW_EXPLAIN_INTERVAL, default 10)",
    )
    p.add_argument(
        "--log-level",
        default=_env("LOG_LEVEL", "info"),
        choices=("debug", "info", "warning", "error"),
        help="DRAVIEW_LOG_LEVEL, default info",
    )
    p.add_argument(
        "--log-format",
        default=_env("LOG_FORMAT", "json"),
        choices=("json", "text"),
        help="DRAVIEW_LOG_FORMAT, default json",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported here so that `draview analyze` never loads kopf or the API client.
    from draview.controller import logs
    from draview.controller.operator_main import RunConfig
    from draview.controller.operator_main import run as run_operator

    if (
        args.burst < 1
        or args.write_concurrency < 1
        or not 1 <= args.max_allocations <= 1024
        or not 0 < args.port < 65536
        or not 10_000 <= args.max_object_bytes <= 1_500_000
        or not args.retry_period < args.renew_deadline < args.lease_duration
    ):
        print(
            "draview run: --burst and --write-concurrency must be at least 1, "
            "--max-allocations 1 to 1024 (the CRD's limit), --port a TCP port, "
            "--max-object-bytes 10000 to 1500000, and "
            "--retry-period < --renew-deadline < --lease-duration",
            file=sys.stderr,
        )
        return 2
    logs.setup(args.log_level, args.log_format)
    cfg = RunConfig(
        kubeconfig=args.kubeconfig,
        context=args.context,
        settings=Settings(
            batch_interval=float(args.batch_interval),
            engine=EngineOptions(
                partition_attributes=tuple(args.partition_attribute),
                max_listed_allocations=args.max_allocations,
            ),
            claim_events=args.claim_events,
            pending_threshold=float(args.pending_threshold),
            explain_interval=float(args.explain_interval),
            max_object_bytes=args.max_object_bytes,
        ),
        qps=float(args.qps),
        burst=args.burst,
        write_concurrency=args.write_concurrency,
        resync_interval=float(args.resync_interval),
        bind_address=args.bind_address,
        port=args.port,
        leader_elect=args.leader_elect,
        lease_namespace=args.lease_namespace,
        lease_name=args.lease_name,
        identity=args.identity,
        lease_duration=float(args.lease_duration),
        renew_deadline=float(args.renew_deadline),
        retry_period=float(args.retry_period),
        shutdown_timeout=float(args.shutdown_timeout),
    )
    try:
        return asyncio.run(run_operator(cfg))
    except KeyboardInterrupt:
        return 0
    except Exception as exc:  # anything that escaped: one clear line, non-zero exit
        logging.getLogger("draview").critical("fatal: %s", exc, exc_info=True)
        return 1
