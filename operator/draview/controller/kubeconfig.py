"""How `draview run` finds its cluster, and what it says when it cannot.

Without --kubeconfig, KUBECONFIG and --context, the pod's service account first (the
in-cluster environment: KUBERNETES_SERVICE_HOST and its token file), then
~/.kube/config; otherwise the kubeconfig named. Every way this fails is a
`StartupError`: one line that says what was tried and what to set, since the first
person to see it is someone installing draview, and a kubernetes_asyncio traceback
("Expected key current-context") names neither.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from kubernetes_asyncio import config
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config.incluster_config import (
    SERVICE_CERT_FILENAME,
    SERVICE_TOKEN_FILENAME,
    InClusterConfigLoader,
)

HOST_ENV = "KUBERNETES_SERVICE_HOST"
PORT_ENV = "KUBERNETES_SERVICE_PORT"
TOKEN_FILE = SERVICE_TOKEN_FILENAME
CA_FILE = SERVICE_CERT_FILENAME
DEFAULT_FILE = "~/.kube/config"
SET_CONFIG = (
    "set --kubeconfig (or KUBECONFIG) to a kubeconfig file, or run draview in a pod "
    "whose service account token is mounted"
)
SET_CREDENTIALS = "point --kubeconfig / --context at a working cluster entry"


class StartupError(Exception):
    """A start-up failure, said in one line: what was tried and what to set."""


def _in_cluster() -> str | None:
    """Load the pod's service account; None when done, else why not (one phrase)."""
    if not os.environ.get(HOST_ENV) or not os.environ.get(PORT_ENV):
        return f"not in a pod ({HOST_ENV} and {PORT_ENV} are not set)"
    if not os.path.isfile(TOKEN_FILE):
        return f"in a pod, but no service account token at {TOKEN_FILE}"
    try:
        InClusterConfigLoader(token_filename=TOKEN_FILE, cert_filename=CA_FILE).load_and_set()
    except config.ConfigException as exc:
        return f"in-cluster configuration: {exc}"
    return None


def _files(kubeconfig: str | None) -> list[str]:
    """The files a kubeconfig setting names (KUBECONFIG may list several)."""
    text = kubeconfig or DEFAULT_FILE
    return [os.path.expanduser(p) for p in text.split(os.pathsep) if p]


def _existing(files: list[str]) -> list[str]:
    # Only these go to the loader: a missing one would be a warning line of its own.
    return [p for p in files if os.path.isfile(p)]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _why(exc: Exception) -> str:
    mark = getattr(exc, "problem_mark", None)
    if isinstance(exc, yaml.MarkedYAMLError) and mark is not None:
        return f"not YAML: {exc.problem} at line {mark.line + 1}, column {mark.column + 1}"
    return _one_line(str(exc)) or type(exc).__name__


def _read(files: list[str]) -> list[dict[str, Any]]:
    """The kubeconfig files as YAML; what the loader would trip over with a traceback
    (not YAML, not a mapping) is a StartupError here."""
    docs: list[dict[str, Any]] = []
    for path in files:
        try:
            doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise StartupError(f"kubeconfig {path} cannot be read: {_why(exc)}") from exc
        if not isinstance(doc, dict):
            raise StartupError(
                f"kubeconfig {path} is not a kubeconfig (a YAML mapping of clusters, users "
                f"and contexts); {SET_CONFIG}"
            )
        docs.append(doc)
    return docs


def _contexts(docs: list[dict[str, Any]]) -> str:
    names: list[str] = []
    for doc in docs:
        entries = doc.get("contexts")
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                names.append(entry["name"])
    return ", ".join(names) or "none"


def _problem(exc: Exception, docs: list[dict[str, Any]], context: str | None) -> str:
    """What is wrong with a kubeconfig the loader refused, and what to set."""
    text = _one_line(str(exc)) or type(exc).__name__
    if "current-context" in text:
        return f"names no current context (its contexts: {_contexts(docs)}); set --context"
    if context and context in text:
        return f"has no context {context!r} (its contexts: {_contexts(docs)}); set --context"
    return f"cannot be used: {text}; fix it or {SET_CONFIG}"


async def load(kubeconfig: str | None, context: str | None) -> str:
    """Load the client configuration; returns where it came from, for messages
    ('the in-cluster service account', 'kubeconfig /path (context x)')."""
    tried: list[str] = []
    if not kubeconfig and not context:
        why = _in_cluster()
        if why is None:
            return "the in-cluster service account"
        tried.append(why)
    files = _files(kubeconfig)
    found = _existing(files)
    if not found:
        tried.append(f"no kubeconfig file at {', '.join(files)}")
        raise StartupError(f"no Kubernetes configuration found: {'; '.join(tried)}; {SET_CONFIG}")
    docs = _read(found)
    origin = f"kubeconfig {', '.join(found)}" + (f" (context {context})" if context else "")
    try:
        await config.load_kube_config(config_file=os.pathsep.join(found), context=context)
    except Exception as exc:  # a kubeconfig is user input: whatever breaks it is one line
        raise StartupError(f"{origin} {_problem(exc, docs, context)}") from exc
    return origin


@contextmanager
def first_contact(host: str, origin: str) -> Iterator[None]:
    """The first requests to the API server: a failure there is one line naming the
    server and where its address and credentials came from."""
    try:
        yield
    except ApiException as exc:
        answer = f"{exc.status} {exc.reason or ''}".strip()
        if exc.status in (401, 403):
            raise StartupError(
                f"the API server {host} refused the credentials of {origin} ({answer}); "
                f"{SET_CREDENTIALS}"
            ) from exc
        raise StartupError(
            f"the API server {host} ({origin}) answered {answer}; is it a Kubernetes API "
            "server, and healthy?"
        ) from exc
    except aiohttp.ClientConnectorCertificateError as exc:
        raise StartupError(
            f"TLS to the API server {host} failed ({exc.certificate_error}); check the "
            f"certificate authority of {origin}"
        ) from exc
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        reason = str(exc) or type(exc).__name__
        raise StartupError(
            f"cannot reach the API server {host} named by {origin} ({reason}); check that "
            f"it runs and is reachable from here, or {SET_CREDENTIALS}"
        ) from exc


@contextmanager
def listening(host: str, port: int) -> Iterator[None]:
    """Binding the health and metrics port: taken or not allowed is one line."""
    try:
        yield
    except OSError as exc:
        raise StartupError(
            f"cannot serve /healthz, /readyz and /metrics on {host}:{port} "
            f"({exc.strerror or exc}); set --port (DRAVIEW_PORT) or --bind-address "
            "(DRAVIEW_BIND_ADDRESS)"
        ) from exc
