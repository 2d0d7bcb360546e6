"""`draview run`: flags, each with a DRAVIEW_* environment variable (settings.py)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import TYPE_CHECKING

from draview.cli import settings as run_settings
from draview.engine.profile import parse_gates

if TYPE_CHECKING:
    from draview.controller.operator_main import RunConfig


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run the operator",
        description="Watch ResourceSlices, ResourceClaims and DeviceTaintRules and keep "
        "ResourceSliceStatus and ResourcePoolStatus objects current. Every flag can also be "
        "set with the DRAVIEW_* environment variable named in its help.",
    )
    run_settings.add_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported here so that `draview analyze` never loads kopf or the API client.
    from draview.controller import logs
    from draview.controller.kubeconfig import StartupError
    from draview.controller.operator_main import run as run_operator

    try:
        s = run_settings.load(args)
    except ValueError as exc:
        print(f"draview run: {exc}", file=sys.stderr)
        return 2
    logs.setup(s.log_level, s.log_format)
    log = logging.getLogger("draview")
    # One line for whoever runs draview; the traceback only for whoever debugs it.
    try:
        return asyncio.run(run_operator(_config(s)))
    except KeyboardInterrupt:
        return 0
    except StartupError as exc:  # says what was tried and what to set
        log.error("cannot start: %s", exc)
        log.debug("the failure's traceback", exc_info=True)
    except Exception as exc:  # anything else that escaped: one line all the same
        log.critical("fatal: %s: %s", type(exc).__name__, one_line(exc))
        log.debug("the failure's traceback", exc_info=True)
    return 1


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (API errors carry a multi-line body)."""
    return " ".join(str(exc).split()) or "no message"


def _config(s: run_settings.RunSettings) -> RunConfig:
    from draview.controller.core import Settings
    from draview.controller.operator_main import ExplainConfig, RunConfig
    from draview.engine.model import EngineOptions

    return RunConfig(
        kubeconfig=s.kubeconfig,
        context=s.context,
        settings=Settings(
            batch_interval=s.batch_interval,
            engine=EngineOptions(
                partition_attributes=tuple(s.partition_attributes),
                max_listed_allocations=s.max_allocations,
            ),
            claim_events=s.claim_events,
            pending_threshold=s.pending_threshold,
            explain_interval=s.explain_interval,
            max_object_bytes=s.max_object_bytes,
            capacity_probes=s.capacity_probes,
            capacity_reload=s.capacity_reload,
            explain_api=s.explain_port > 0,
        ),
        kubernetes_version=s.kubernetes_version,
        feature_gates=parse_gates(s.feature_gates) if s.feature_gates is not None else None,
        qps=s.qps,
        burst=s.burst,
        write_concurrency=s.write_concurrency,
        resync_interval=s.resync_interval,
        watch_silence_timeout=s.watch_silence_timeout,
        bind_address=s.bind_address,
        port=s.port,
        leader_elect=s.leader_elect,
        lease_namespace=s.lease_namespace,
        lease_name=s.lease_name,
        identity=s.identity,
        lease_duration=s.lease_duration,
        renew_deadline=s.renew_deadline,
        retry_period=s.retry_period,
        shutdown_timeout=s.shutdown_timeout,
        explain=ExplainConfig(s.explain_port, s.explain_cert_dir or "", s.explain_service, s.pod_ip)
        if s.explain_port
        else None,
    )
