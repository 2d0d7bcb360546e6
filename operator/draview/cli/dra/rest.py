"""The API server, asked directly: the plugin's default way to read a cluster.

kubectl as a child process costs a process per request and, worse, kubectl's decoding and
re-encoding of every object it lists: on a cluster of 50,000 claims that is most of the
time a command takes. Here each request is one HTTP exchange on a kept-alive connection
(one per thread, so kinds are listed side by side) and each page is decoded once, by the
C JSON decoder. Credentials come from the kubeconfig as kubectl reads it (kubeconfig.py).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import ssl
import tempfile
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from typing import Any
from urllib.parse import quote, urlencode, urlsplit
from urllib.request import getproxies, proxy_bypass

from draview.cli.dra.cluster import (
    EVERYTHING,
    KINDS,
    RESOURCE_GROUP,
    Cluster,
    Forbidden,
    NotFound,
    NotServed,
    Query,
)
from draview.cli.dra.common import CliError
from draview.cli.dra.kubeconfig import Credentials, run_exec
from draview.cli.dra.progress import Progress


def _user_agent() -> str:
    try:
        return f"kubectl-dra/{metadata.version('draview')}"
    except metadata.PackageNotFoundError:  # a checkout that was never installed
        return "kubectl-dra"


USER_AGENT = _user_agent()


class _Connection(http.client.HTTPSConnection):
    """HTTPS with a TLS server name other than the host (kubeconfig tls-server-name)."""

    def __init__(self, host: str, port: int | None, server_name: str | None, **kw: Any) -> None:
        super().__init__(host, port, **kw)
        self._server_name = server_name

    def connect(self) -> None:
        if self._server_name is None:
            super().connect()
            return
        http.client.HTTPConnection.connect(self)
        self.sock = self._context.wrap_socket(  # type: ignore[attr-defined]
            self.sock, server_hostname=self._server_name
        )


_CONTINUE = re.compile(rb'"continue":"([^"]*)"')


def _continue_token(page: bytes) -> str | None:
    """The continue token of a list page, from the head of its JSON: the API server
    writes kind, apiVersion and metadata before the items."""
    head = page[: page.find(b'"items"')] if b'"items"' in page[:4096] else page[:4096]
    found = _CONTINUE.search(head)
    return found.group(1).decode() if found and found.group(1) else None


def _hide_managed_fields(obj: dict[str, Any]) -> None:
    """As kubectl prints objects (--show-managed-fields=false): the field managers'
    bookkeeping says nothing about devices and is often the bulk of an object."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)


def _status_message(body: bytes, fallback: str) -> str:
    """The message of a Kubernetes Status body, else the HTTP reason."""
    try:
        doc = json.loads(body)
    except ValueError:
        return fallback
    message = doc.get("message") if isinstance(doc, dict) else None
    return str(message) if message else fallback


class Rest(Cluster):
    def __init__(
        self,
        creds: Credentials,
        request_timeout: float | None = None,
        chunk_size: int = 500,
        progress: Progress | None = None,
    ) -> None:
        self.creds = creds
        self.timeout = request_timeout or None  # 0: none, as kubectl
        self.chunk_size = chunk_size
        self.progress = progress or Progress()
        url = urlsplit(creds.server)
        if url.scheme not in ("https", "http") or not url.hostname:
            raise CliError(f"{creds.origin}: server {creds.server!r} is not an http(s) URL")
        self._url = url
        self._prefix = url.path.rstrip("/")
        self._local = threading.local()
        self._lock = threading.Lock()
        self._ssl: ssl.SSLContext | None = None
        self._auth: str | None = None
        self._authed = False
        self._versions_cache: dict[str, list[str]] = {}
        self._served: dict[str, str] = {}
        self._can_i: dict[tuple[str, str, str], bool] = {}
        self._server_version: tuple[str | None, str] | None = None

    @property
    def transport(self) -> str:
        return "API server"

    # -- connection ----------------------------------------------------------------------

    def _tls(self, cert: bytes | None, key: bytes | None) -> ssl.SSLContext:
        c = self.creds
        if c.insecure:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif c.ca_data or c.ca_file:
            try:
                ctx = ssl.create_default_context(
                    cafile=c.ca_file, cadata=c.ca_data.decode() if c.ca_data else None
                )
            except (ssl.SSLError, OSError, UnicodeDecodeError) as exc:
                raise CliError(
                    f"{c.origin}: the certificate authority cannot be used ({exc})"
                ) from None
        else:
            ctx = ssl.create_default_context()
        if cert and key:
            # The ssl module loads a client certificate only from files: written to a
            # private directory and removed again at once.
            with tempfile.TemporaryDirectory(prefix="kubectl-dra-") as tmp:
                cpath, kpath = os.path.join(tmp, "cert"), os.path.join(tmp, "key")
                for path, data in ((cpath, cert), (kpath, key)):
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
                    with os.fdopen(fd, "wb") as f:
                        f.write(data)
                try:
                    ctx.load_cert_chain(cpath, kpath)
                except ssl.SSLError as exc:
                    raise CliError(
                        f"{c.origin}: the client certificate cannot be used ({exc})"
                    ) from None
        return ctx

    def _authenticate(self) -> None:
        """The TLS context and Authorization header, made once (an exec plugin runs once)."""
        with self._lock:
            if self._authed:
                return
            c = self.creds
            cert, key, token = c.cert_data, c.key_data, c.token
            if c.token_file and not token:
                try:
                    with open(c.token_file, encoding="utf-8") as f:
                        token = f.read().strip()
                except OSError as exc:
                    raise CliError(
                        f"{c.origin}: token file {c.token_file}: {exc.strerror}"
                    ) from None
            if c.exec_spec is not None and not token and not cert:
                got = run_exec(c)
                token, cert, key = got.token, got.cert_data or cert, got.key_data or key
            if token:
                self._auth = f"Bearer {token}"
            elif c.basic is not None:
                pair = base64.b64encode(f"{c.basic[0]}:{c.basic[1]}".encode()).decode()
                self._auth = f"Basic {pair}"
            if self._url.scheme == "https":
                self._ssl = self._tls(cert, key)
            self._authed = True

    def _proxy(self) -> str | None:
        if self.creds.proxy:
            return self.creds.proxy
        host = self._url.hostname or ""
        if proxy_bypass(host):
            return None
        return getproxies().get(self._url.scheme)

    def _connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        self._authenticate()
        host, port = self._url.hostname or "", self._url.port
        proxy = self._proxy()
        target_host, target_port = host, port
        if proxy:
            p = urlsplit(proxy)
            if p.scheme != "http" or not p.hostname:
                raise CliError(
                    f"proxy {proxy!r}: only http:// proxies are supported here; use --kubectl"
                )
            target_host, target_port = p.hostname, p.port or 80
        if self._url.scheme == "https":
            conn = _Connection(
                target_host,
                target_port,
                self.creds.tls_server_name,
                context=self._ssl,
                timeout=self.timeout,
            )
        else:
            conn = http.client.HTTPConnection(target_host, target_port, timeout=self.timeout)
        if proxy:
            conn.set_tunnel(host, port)
        self._local.conn = conn
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
        self._local.conn = None

    def request(
        self,
        method: str,
        path: str,
        params: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
    ) -> tuple[int, bytes]:
        """(HTTP status, body), decompressed. A dropped kept-alive connection is
        reopened once; anything else that fails on the way is a one-line CliError."""
        url = self._prefix + path + (f"?{urlencode(params)}" if params else "")
        headers = {
            "Accept": "application/json",
            "Accept-Encoding": "gzip",
            "User-Agent": USER_AGENT,
        }
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            conn = self._connection()
            if self._auth:
                headers["Authorization"] = self._auth
            try:
                conn.request(method, url, body=payload, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self._drop()
                if attempt == 2:
                    raise CliError(
                        f"the API server {self.creds.server} closed the connection"
                    ) from None
                continue
            except (OSError, http.client.HTTPException) as exc:
                self._drop()
                raise self._failure(method, path, exc) from None
            if resp.getheader("Content-Encoding") == "gzip":
                data = zlib.decompress(data, 16 + zlib.MAX_WBITS)
            if resp.status == 401:
                raise CliError(
                    f"the API server {self.creds.server} refused the credentials of "
                    f"{self.creds.origin} (401 Unauthorized)"
                )
            return resp.status, data
        raise AssertionError("unreachable")

    def _failure(self, method: str, path: str, exc: Exception) -> CliError:
        """What went wrong on the way to the API server, in one line."""
        server, origin = self.creds.server, self.creds.origin
        if isinstance(exc, TimeoutError):
            limit = f" after {self.timeout:g} s (--request-timeout)" if self.timeout else ""
            return CliError(f"{method} {path} to the API server {server} timed out{limit}")
        if isinstance(exc, ssl.SSLCertVerificationError):
            return CliError(
                f"TLS to the API server {server} failed ({exc.verify_message}); "
                f"check the certificate authority of {origin}"
            )
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return CliError(f"cannot reach the API server {server} named by {origin} ({reason})")

    def _json(self, path: str, params: dict[str, Any] | None = None) -> Any:
        status, data = self.request("GET", path, params)
        return self._decode(path, status, data)

    @staticmethod
    def _decode(path: str, status: int, data: bytes) -> Any:
        if status == 200:
            return json.loads(data)
        message = _status_message(data, f"HTTP {status}")
        if status == 403:
            raise Forbidden(message)
        if status == 404:
            raise NotFound(message)
        raise CliError(f"GET {path}: {message}")

    # -- paths ---------------------------------------------------------------------------

    def _group_versions(self, group: str) -> list[str]:
        """The group's versions, the preferred one first (the discovery document)."""
        if group not in self._versions_cache:
            try:
                doc = self._json(f"/apis/{group}")
            except NotFound:
                doc = {}
            preferred = (doc.get("preferredVersion") or {}).get("version")
            versions = [v["version"] for v in doc.get("versions") or []]
            versions.sort(key=lambda v: v != preferred)
            self._versions_cache[group] = versions
        return self._versions_cache[group]

    def _version(self, kind: str) -> str:
        k = KINDS[kind]
        if k.version is not None:
            return k.version
        if kind not in self._served:
            for version in self._group_versions(k.group):
                try:
                    doc = self._json(f"/apis/{k.group}/{version}")
                except NotFound:
                    continue
                if any(r.get("name") == k.plural for r in doc.get("resources") or []):
                    self._served[kind] = version
                    break
            else:
                raise NotServed(f'the server doesn\'t have a resource type "{k.resource}"')
        return self._served[kind]

    def _path(self, kind: str, name: str | None = None, namespace: str | None = None) -> str:
        k = KINDS[kind]
        base = f"/apis/{k.group}/{self._version(kind)}" if k.group else "/api/v1"
        ns = f"/namespaces/{quote(namespace, safe='')}" if namespace and k.namespaced else ""
        tail = f"/{quote(name, safe='')}" if name is not None else ""
        return f"{base}{ns}/{k.plural}{tail}"

    # -- reads ---------------------------------------------------------------------------

    def list(self, kind: str, query: Query = EVERYTHING) -> list[dict[str, Any]]:
        """Every page, the next one asked for before this one is decoded: the API server
        encodes and sends it while this process decodes (the continue token is read from
        the head of the raw page, where the list's metadata comes first)."""
        path = self._path(kind)
        params: dict[str, Any] = {}
        if self.chunk_size > 0:
            params["limit"] = self.chunk_size
        if query.labels:
            params["labelSelector"] = query.labels
        if query.fields:
            params["fieldSelector"] = query.fields
        items: list[dict[str, Any]] = []
        with ThreadPoolExecutor(max_workers=1) as ahead:
            pending = ahead.submit(self.request, "GET", path, dict(params))
            while True:
                status, data = pending.result()
                token = _continue_token(data) if status == 200 else None
                if token:
                    pending = ahead.submit(self.request, "GET", path, {**params, "continue": token})
                page = self._page(path, status, data)
                api_version = page.get("apiVersion")
                for item in page.get("items") or []:
                    # A list's items carry no kind or apiVersion; kubectl adds them, and
                    # the engine reads both.
                    item.setdefault("kind", kind)
                    item.setdefault("apiVersion", api_version)
                    _hide_managed_fields(item)
                    items.append(item)
                self.progress.add(len(page.get("items") or []))
                decoded = (page.get("metadata") or {}).get("continue") or None
                if decoded != token:  # the head misread: ask again with the real one
                    token = decoded
                    if token:
                        pending = ahead.submit(
                            self.request, "GET", path, {**params, "continue": token}
                        )
                if not token:
                    return items

    def _page(self, path: str, status: int, data: bytes) -> dict[str, Any]:
        try:
            return self._decode(path, status, data)  # type: ignore[no-any-return]
        except NotFound as exc:
            raise NotServed(str(exc)) from None

    def any(self, kind: str) -> bool:
        try:
            page = self._json(self._path(kind), {"limit": 1})
        except (NotFound, NotServed, Forbidden):
            return False
        return bool(page.get("items"))

    def get_path(self, path: str, params: dict[str, str] | None = None) -> tuple[int, Any]:
        status, data = self.request("GET", path, params)
        try:
            return status, json.loads(data)
        except ValueError:
            return status, None

    def post_path(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        status, data = self.request("POST", path, body=body)
        try:
            return status, json.loads(data)
        except ValueError:
            return status, None

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        obj: dict[str, Any] = self._json(self._path(kind, name, namespace))
        _hide_managed_fields(obj)
        return obj

    def can_i(self, verb: str, resource: str, namespace: str) -> bool:
        key = (verb, resource, namespace)
        if key not in self._can_i:
            group, _, plural = resource.partition(".")
            attrs = {"verb": verb, "resource": group}
            if plural:
                attrs["group"] = plural
            elif group in {k.plural for k in KINDS.values() if k.group == RESOURCE_GROUP}:
                attrs["group"] = RESOURCE_GROUP
            if namespace:
                attrs["namespace"] = namespace
            review = {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attrs},
            }
            status, data = self.request(
                "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=review
            )
            allowed = False
            if status in (200, 201):
                allowed = bool((json.loads(data).get("status") or {}).get("allowed"))
            self._can_i[key] = allowed
        return self._can_i[key]

    def versions(self) -> tuple[str | None, str | None, str]:
        if self._server_version is None:
            try:
                doc = self._json("/version")
                version = doc.get("gitVersion") if isinstance(doc, dict) else None
                self._server_version = (version if isinstance(version, str) else None, "")
            except CliError as exc:
                self._server_version = (None, str(exc))
        return None, self._server_version[0], self._server_version[1]

    def metrics(self) -> str | None:
        status, data = self.request("GET", "/metrics")
        if status != 200:
            return None
        keep = [
            line
            for line in data.decode("utf-8", "replace").splitlines(keepends=True)
            if line.startswith("kubernetes_feature_enabled")
        ]
        return "".join(keep)

    def default_namespace(self) -> str:
        return self.creds.namespace

    def progress_done(self) -> None:
        self.progress.done()
