"""The kubeconfig as kubectl reads it, for talking to the API server without kubectl.

What is read: KUBECONFIG's files merged as kubectl merges them (the first file to set a
name or the current context wins), --context, the cluster's server, CA, TLS server name,
insecure-skip-tls-verify and proxy-url, and the user's client certificate, token,
token file, basic auth or exec credential plugin (client.authentication.k8s.io v1 and
v1beta1). With no kubeconfig file at all, the in-cluster service account, as kubectl
does. What kubectl supports and this does not (the removed auth-provider plugins) is a
one-line error that names `--kubectl`, which hands the request to kubectl itself.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from draview.cli.dra.common import CliError

DEFAULT_FILE = "~/.kube/config"
IN_CLUSTER_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
USE_KUBECTL = "use --kubectl to let kubectl read it"


@dataclass(frozen=True)
class Credentials:
    """Where the API server is and how to prove who we are to it."""

    server: str
    origin: str  # for messages: 'kubeconfig ~/.kube/config (context kind)'
    namespace: str = "default"
    ca_file: str | None = None
    ca_data: bytes | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    proxy: str | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = None
    token: str | None = None
    token_file: str | None = None
    basic: tuple[str, str] | None = None
    exec_spec: dict[str, Any] | None = None
    cluster_info: dict[str, Any] | None = None  # for exec plugins that ask for it


def _files(explicit: str | None) -> list[str]:
    text = explicit or os.environ.get("KUBECONFIG") or DEFAULT_FILE
    return [os.path.expanduser(p) for p in text.split(os.pathsep) if p]


def _read(path: str) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise CliError(f"kubeconfig {path} cannot be read: {' '.join(str(exc).split())}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise CliError(f"kubeconfig {path} is not a kubeconfig (a YAML mapping)")
    doc["__dir__"] = os.path.dirname(os.path.abspath(path))
    return doc


def _named(docs: list[dict[str, Any]], section: str, key: str) -> dict[str, dict[str, Any]]:
    """name -> (entry body, with the directory its relative paths are relative to)."""
    out: dict[str, dict[str, Any]] = {}
    for doc in docs:
        for entry in doc.get(section) or []:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                continue
            body = entry.get(key)
            if entry["name"] not in out and isinstance(body, dict):
                out[entry["name"]] = {**body, "__dir__": doc["__dir__"]}
    return out


def _path(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        return None
    return value if os.path.isabs(value) else os.path.join(body["__dir__"], value)


def _data(body: dict[str, Any], key: str, where: str) -> bytes | None:
    """`key-data` (base64) or the file `key` names."""
    raw = body.get(f"{key}-data")
    if isinstance(raw, str) and raw:
        try:
            return base64.b64decode(raw, validate=True)
        except ValueError:
            raise CliError(f"{where}: {key}-data is not base64") from None
    path = _path(body, key)
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CliError(f"{where}: {key} {path} cannot be read ({exc.strerror})") from None


def _in_cluster() -> Credentials | None:
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT")
    token = os.path.join(IN_CLUSTER_DIR, "token")
    if not host or not port or not os.path.isfile(token):
        return None
    host = f"[{host}]" if ":" in host else host
    namespace = "default"
    with contextlib.suppress(OSError):
        namespace = Path(IN_CLUSTER_DIR, "namespace").read_text().strip() or namespace
    return Credentials(
        server=f"https://{host}:{port}",
        origin="the in-cluster service account",
        namespace=namespace,
        ca_file=os.path.join(IN_CLUSTER_DIR, "ca.crt"),
        token_file=token,
    )


def load(kubeconfig: str | None, context: str | None) -> Credentials:
    """The credentials for `context` (else the current one); CliError in one line."""
    files = _files(kubeconfig)
    found = [p for p in files if os.path.isfile(p)]
    if not found:
        if not kubeconfig and not context and (inside := _in_cluster()) is not None:
            return inside
        raise CliError(f"no kubeconfig file at {', '.join(files)}; set --kubeconfig or KUBECONFIG")
    docs = [_read(p) for p in found]
    where = f"kubeconfig {', '.join(found)}"
    name = context or next(
        (
            d["current-context"]
            for d in docs
            if isinstance(d.get("current-context"), str) and d["current-context"]
        ),
        None,
    )
    contexts = _named(docs, "contexts", "context")
    if name is None:
        raise CliError(
            f"{where} names no current context (its contexts: "
            f"{', '.join(contexts) or 'none'}); set --context"
        )
    if name not in contexts:
        raise CliError(
            f"{where} has no context {name!r} (its contexts: "
            f"{', '.join(contexts) or 'none'}); set --context"
        )
    where = f"{where} (context {name})"
    ctx = contexts[name]
    cluster = _named(docs, "clusters", "cluster").get(str(ctx.get("cluster")))
    if cluster is None or not isinstance(cluster.get("server"), str):
        raise CliError(f"{where}: its cluster {ctx.get('cluster')!r} has no server")
    user = _named(docs, "users", "user").get(str(ctx.get("user")), {"__dir__": "."})
    return _credentials(where, ctx, cluster, user)


def _credentials(
    where: str, ctx: dict[str, Any], cluster: dict[str, Any], user: dict[str, Any]
) -> Credentials:
    if isinstance(user.get("auth-provider"), dict):
        kind = user["auth-provider"].get("name", "?")
        raise CliError(
            f"{where}: the user authenticates with auth-provider {kind!r}; {USE_KUBECTL}"
        )
    basic = None
    if isinstance(user.get("username"), str) and isinstance(user.get("password"), str):
        basic = (user["username"], user["password"])
    exec_spec = user.get("exec") if isinstance(user.get("exec"), dict) else None
    ca_data = _data(cluster, "certificate-authority", where)
    return Credentials(
        server=cluster["server"].rstrip("/"),
        origin=where,
        namespace=str(ctx.get("namespace") or "default"),
        ca_data=ca_data,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        tls_server_name=cluster.get("tls-server-name") or None,
        proxy=cluster.get("proxy-url") or None,
        cert_data=_data(user, "client-certificate", where),
        key_data=_data(user, "client-key", where),
        token=user.get("token") if isinstance(user.get("token"), str) else None,
        token_file=_path(user, "tokenFile"),
        basic=basic,
        exec_spec=exec_spec,
        cluster_info={
            "server": cluster["server"],
            **(
                {"certificate-authority-data": base64.b64encode(ca_data).decode()}
                if ca_data
                else {}
            ),
            **(
                {"insecure-skip-tls-verify": True}
                if cluster.get("insecure-skip-tls-verify")
                else {}
            ),
        },
    )


@dataclass(frozen=True)
class ExecResult:
    token: str | None
    cert_data: bytes | None
    key_data: bytes | None


def run_exec(creds: Credentials) -> ExecResult:
    """Run the user's credential plugin once, as kubectl would (its stderr goes to ours:
    it may ask the user something)."""
    spec = creds.exec_spec or {}
    command = spec.get("command")
    if not isinstance(command, str) or not command:
        raise CliError(f"{creds.origin}: the exec credential plugin names no command")
    api_version = str(spec.get("apiVersion") or "client.authentication.k8s.io/v1")
    request: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": "ExecCredential",
        "spec": {"interactive": False},
    }
    if spec.get("provideClusterInfo"):
        request["spec"]["cluster"] = creds.cluster_info
    env = dict(os.environ)
    for item in spec.get("env") or []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            env[item["name"]] = str(item.get("value", ""))
    env["KUBERNETES_EXEC_INFO"] = json.dumps(request)
    args = [str(a) for a in spec.get("args") or []]
    try:
        proc = subprocess.run(
            [command, *args], env=env, stdout=subprocess.PIPE, text=True, check=False, timeout=120
        )
    except FileNotFoundError:
        hint = spec.get("installHint")
        raise CliError(
            f"{creds.origin}: the exec credential plugin {command!r} is not installed"
            + (f" ({' '.join(str(hint).split())})" if hint else "")
        ) from None
    except subprocess.TimeoutExpired:
        raise CliError(
            f"{creds.origin}: the exec credential plugin {command!r} timed out"
        ) from None
    if proc.returncode != 0:
        raise CliError(
            f"{creds.origin}: the exec credential plugin {command!r} exited {proc.returncode}"
        )
    try:
        status = json.loads(proc.stdout).get("status") or {}
    except (json.JSONDecodeError, AttributeError):
        raise CliError(
            f"{creds.origin}: the exec credential plugin {command!r} wrote no ExecCredential"
        ) from None
    cert = status.get("clientCertificateData")
    key = status.get("clientKeyData")
    return ExecResult(
        token=status.get("token") if isinstance(status.get("token"), str) else None,
        cert_data=cert.encode() if isinstance(cert, str) else None,
        key_data=key.encode() if isinstance(key, str) else None,
    )
