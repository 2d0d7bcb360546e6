"""`draview run`'s settings: one declaration each, read from flags, then DRAVIEW_*
environment variables, then the default (pydantic-settings).

The flags are generated from these fields, and nothing is read or checked until `run`
builds RunSettings: a bad DRAVIEW_* value can never break another command."""

from __future__ import annotations

import argparse
import socket
import uuid
from typing import Annotated, Any, Literal, Self

from pydantic import AliasChoices, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from draview.engine.profile import check_gate_names, make_profile, parse_gates

PREFIX = "DRAVIEW_"


def _identity() -> str:
    return f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"


class RunSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=PREFIX, populate_by_name=True, extra="ignore")

    kubeconfig: str | None = Field(
        None,
        validation_alias=AliasChoices("kubeconfig", "KUBECONFIG"),
        description="kubeconfig file (default: in-cluster, then ~/.kube/config)",
    )
    context: str | None = Field(None, description="kubeconfig context")
    batch_interval: float = Field(0.25, gt=0, description="seconds between recomputations")
    qps: float = Field(
        300,
        gt=0,
        description="sustained API writes per second. The first sync writes four requests "
        "per single-slice pool (create + status of two objects): 5,000 nodes take about "
        "70 s of writes at 300",
    )
    burst: int = Field(600, ge=1, description="API write burst")
    write_concurrency: int = Field(64, ge=1, description="API writes in flight at once")
    resync_interval: float = Field(
        300, gt=0, description="seconds between full re-lists that heal missed watch events"
    )
    watch_silence_timeout: float = Field(
        150,
        gt=0,
        description="seconds a watch may receive nothing before its connection is taken "
        "for dead and the watch resumed (the API server sends a bookmark about every minute)",
    )
    bind_address: str = Field("0.0.0.0", description="address for /healthz, /readyz, /metrics")
    port: int = Field(8080, gt=0, lt=65536, description="port for /healthz, /readyz, /metrics")
    leader_elect: bool = Field(True, description="elect a leader with a Lease; only it writes")
    lease_namespace: str = Field(
        "default",
        validation_alias=AliasChoices(
            "lease_namespace", f"{PREFIX}LEASE_NAMESPACE", "POD_NAMESPACE"
        ),
        description="namespace of the Lease (else POD_NAMESPACE)",
    )
    lease_name: str = Field("draview-leader", description="name of the Lease")
    identity: str = Field(default_factory=_identity, description="this replica's name in the Lease")
    lease_duration: float = Field(
        15, gt=0, description="seconds a Lease that stopped changing stays another replica's"
    )
    renew_deadline: float = Field(
        10,
        gt=0,
        description="seconds without a successful renewal after which the leader stops "
        "writing and steps down; under --lease-duration",
    )
    retry_period: float = Field(
        2, gt=0, description="seconds between Lease renewals or acquisition attempts"
    )
    shutdown_timeout: float = Field(
        20,
        gt=0,
        description="seconds SIGTERM allows for writing what is pending; under the pod's "
        "terminationGracePeriodSeconds (30 in the chart)",
    )
    max_object_bytes: int = Field(
        1_000_000,
        ge=10_000,
        le=1_500_000,
        description="largest status object written, as JSON; a bigger one lists fewer "
        "allocations per device, then fewer validation errors",
    )
    partition_attributes: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="attribute naming a partition type (repeatable; the variable is "
        "comma-separated)",
    )
    max_allocations: int = Field(
        32, ge=1, le=1024, description="allocations listed per device (the CRD allows 1024)"
    )
    claim_events: bool = Field(
        True,
        description="post an Event on claims that stay unallocated, saying why, once per "
        "change of explanation",
    )
    pending_threshold: float = Field(
        60, gt=0, description="seconds a claim may stay unallocated before it gets an Event"
    )
    explain_interval: float = Field(10, gt=0, description="seconds between looks at pending claims")
    capacity_probes: bool = Field(
        True,
        description="answer the capacity probes defined in ConfigMaps labelled "
        "draview.io/capacity-probes in the Lease's namespace",
    )
    capacity_reload: float = Field(
        10, gt=0, description="seconds between reads of the capacity probe definitions"
    )
    explain_port: int = Field(
        0,
        ge=0,
        lt=65536,
        description="HTTPS port of the explain API (explain.draview.io, reached through the "
        "API server's aggregation layer: kubectl dra why asks it); 0 turns it off",
    )
    explain_cert_dir: str | None = Field(
        None, description="directory holding tls.crt and tls.key, the explain API's certificate"
    )
    explain_service: str | None = Field(
        None,
        description="Service in the Lease's namespace whose EndpointSlice the leader keeps "
        "pointing at itself, for the explain API",
    )
    pod_ip: str | None = Field(
        None,
        validation_alias=AliasChoices("pod_ip", f"{PREFIX}POD_IP", "POD_IP"),
        description="this replica's address in --explain-service's EndpointSlice (else POD_IP)",
    )
    kubernetes_version: str | None = Field(
        None,
        description="judge as the scheduler of this release (1.34 to 1.37) instead of the "
        "cluster's own, read from /version (default: the cluster's)",
    )
    feature_gates: str | None = Field(
        None,
        description="DRA feature gates, Name=true,... over the release's defaults, instead of "
        "those the API server reports in /metrics (default: the cluster's)",
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["json", "text"] = "json"

    @field_validator("partition_attributes", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [a for a in value.split(",") if a]
        return value

    @model_validator(mode="after")
    def _profile_flags(self) -> Self:
        gates = parse_gates(self.feature_gates or "")  # ProfileError is a ValueError
        if self.kubernetes_version is not None:
            make_profile(self.kubernetes_version, gates)
        else:  # the cluster's release decides the rest (startup.cluster_profile)
            check_gate_names(gates)
        return self

    @model_validator(mode="after")
    def _explain_api(self) -> Self:
        if self.explain_port and not self.explain_cert_dir:
            raise ValueError("--explain-port needs --explain-cert-dir")
        if self.explain_service and not (self.explain_port and self.pod_ip):
            raise ValueError("--explain-service needs --explain-port and --pod-ip (or POD_IP)")
        return self

    @model_validator(mode="after")
    def _timings_nest(self) -> Self:
        if not self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError("need --retry-period < --renew-deadline < --lease-duration")
        return self


# Flags whose name is not the field's: the repeatable one is singular.
FLAG_NAMES = {"partition_attributes": "--partition-attribute"}


def flag(name: str) -> str:
    return FLAG_NAMES.get(name, "--" + name.replace("_", "-"))


def env_name(name: str) -> str:
    return "KUBECONFIG" if name == "kubeconfig" else PREFIX + name.upper()


def add_flags(p: argparse.ArgumentParser) -> None:
    """One flag per setting. Absent flags stay absent (SUPPRESS) so that the variable or
    the default applies; values are strings until RunSettings checks them."""
    for name, info in RunSettings.model_fields.items():
        shown = info.default_factory is None and info.default is not None
        default = f", default {info.default}" if shown else ""
        help_text = f"{info.description or name.replace('_', ' ')} ({env_name(name)}{default})"
        kw: dict[str, Any] = {"dest": name, "default": argparse.SUPPRESS, "help": help_text}
        if name == "partition_attributes":
            kw.update(action="append", metavar="ATTR")
        elif info.annotation is bool:
            kw.update(metavar="BOOL")
        p.add_argument(flag(name), **kw)


def load(args: argparse.Namespace) -> RunSettings:
    """Flags over DRAVIEW_* variables over defaults; raises ValueError with one line."""
    given = {k: v for k, v in vars(args).items() if k in RunSettings.model_fields}
    try:
        return RunSettings(**given)
    except ValidationError as exc:
        raise ValueError(_one_line(exc)) from None


def _one_line(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = [str(x) for x in err["loc"]]
        field = loc[0] if loc else ""
        if field in RunSettings.model_fields:
            where = f"{flag(field)} / {env_name(field)}"
            parts.append(f"{where}: {err['msg']} (got {err.get('input')!r})")
        else:
            parts.append(str(err["msg"]).removeprefix("Value error, "))
    return "; ".join(parts)
