"""pytest plugin: a real Kubernetes control plane for the tests that need one.

The fixture ``kube_cluster``, set up once per pytest run, starts the local control plane
with ``e2e/cluster/up`` (building it first when needed) and stops it with
``e2e/cluster/down`` at the end of the run. When ``$KUBECONFIG`` is set it uses that
cluster instead (for example kind) and leaves it alone; kubectl then comes from
``$DRAVIEW_KUBECTL`` or PATH. ``DRAVIEW_CLUSTER_KEEP=1`` keeps a cluster this run started
running afterwards, and a control plane that was already running when the run began is
never stopped.

The function-scoped fixture ``kube_namespace`` gives a test its own namespace and removes
it, with the test's pods, afterwards (there is no kubelet: pods bound to the fake nodes
are deleted with ``--force --grace-period=0``).

Load it from a conftest.py with ``from kubecluster import kube_cluster, kube_namespace``
after putting ``tests/`` on ``sys.path``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
CLUSTER_DIR = REPO_ROOT / "e2e" / "cluster"
_ALREADY_RUNNING = "already running (state in"

T = TypeVar("T")


class KubectlError(RuntimeError):
    """A kubectl command that had to succeed failed."""


@dataclass(frozen=True)
class KubeCluster:
    """How to reach the cluster: a kubeconfig path and a kubectl binary."""

    kubeconfig: str
    kubectl: str
    started: bool = False

    def run(
        self, *args: str, input: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl with this cluster's kubeconfig; never raises on a failed command."""
        return subprocess.run(
            [self.kubectl, f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def apply_crds(self) -> None:
        """Install draview's CRDs (deploy/crds) and wait until they are established."""
        self.check("apply", "-k", str(REPO_ROOT / "deploy" / "crds"))
        args = (
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/resourceslicestatuses.draview.io",
            "crd/resourcepoolstatuses.draview.io",
            "crd/capacityprobes.draview.io",
        )
        # kubectl wait fails at once ("accessor error: <nil>") instead of waiting when a
        # CRD just created has no status.conditions yet: ask again while that is so.
        deadline = time.monotonic() + 60
        while True:
            result = self.run(*args)
            if result.returncode == 0:
                return
            if "accessor error" not in result.stderr or time.monotonic() > deadline:
                raise KubectlError(
                    f"kubectl {' '.join(args)} exited {result.returncode}: {result.stderr.strip()}"
                )
            time.sleep(0.5)

    def check(self, *args: str, input: str | None = None) -> str:
        """Run kubectl and return its stdout; raise KubectlError when it fails."""
        result = self.run(*args, input=input)
        if result.returncode != 0:
            raise KubectlError(
                f"kubectl {' '.join(args)} exited {result.returncode}: {result.stderr.strip()}"
            )
        return result.stdout

    def apply(self, *objects: dict[str, Any], namespace: str | None = None) -> None:
        """Create or update objects given as dicts (server-side apply)."""
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
        args = ["apply", "--server-side", "--field-manager=draview-tests", "-f", "-"]
        if namespace:
            args += ["-n", namespace]
        self.check(*args, input=body)

    def create(self, *objects: dict[str, Any], namespace: str | None = None) -> None:
        """Create objects given as dicts; fails when one exists."""
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
        args = ["create", "-f", "-"]
        if namespace:
            args += ["-n", namespace]
        self.check(*args, input=body)

    def get(self, resource: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """One object as a dict; raise KubectlError when it cannot be read."""
        args = ["get", resource, name, "-o", "json"]
        if namespace:
            args += ["-n", namespace]
        obj: dict[str, Any] = json.loads(self.check(*args))
        return obj

    def delete(self, resource: str, *names: str, namespace: str | None = None) -> None:
        """Delete objects, ignoring those that do not exist; does not wait."""
        args = ["delete", resource, *names, "--ignore-not-found", "--wait=false"]
        if namespace:
            args += ["-n", namespace]
        self.check(*args)

    def wait_for(
        self,
        what: str,
        probe: Callable[[], T | None],
        timeout: float = 60,
        interval: float = 0.5,
    ) -> T:
        """Poll ``probe`` until it returns something other than None/False; fail after timeout."""
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while True:
            try:
                value = probe()
                if value is not None and value is not False:
                    return value
            except KubectlError as err:
                last_error = err
            if time.monotonic() >= deadline:
                detail = f" (last error: {last_error})" if last_error else ""
                pytest.fail(f"timed out after {timeout} s waiting for {what}{detail}")
            time.sleep(interval)

    def server_release(self) -> str:
        """The API server's minor release, e.g. '1.36' (from `kubectl version`)."""
        doc = json.loads(self.check("version", "-o", "json"))
        major, minor = doc["serverVersion"]["major"], doc["serverVersion"]["minor"]
        return f"{major}.{minor.rstrip('+')}"

    def create_namespace(self, prefix: str = "draview-test") -> str:
        """Create a uniquely named namespace and wait for its default service account."""
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.check("create", "namespace", name)
        # The ServiceAccount admission plugin rejects pods until this exists.
        self.wait_for(
            f"service account default in {name}",
            lambda: self.run("get", "serviceaccount", "default", "-n", name).returncode == 0,
        )
        return name

    def delete_namespace(self, name: str) -> None:
        """Force-delete the namespace's pods (no kubelet confirms them) and the namespace."""
        self.run("delete", "pods", "--all", "-n", name, "--force", "--grace-period=0")
        self.run("delete", "namespace", name, "--ignore-not-found", "--wait=false")


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _script(
    name: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run e2e/cluster/<name>, capturing its output (shown when it fails)."""
    return subprocess.run(
        [str(CLUSTER_DIR / name), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def side_cluster(release: str, state_dir: Path, gates: str = "all") -> Iterator[KubeCluster]:
    """A second control plane of `release` beside the test run's, on ports of its own and
    with its own state, stopped afterwards (`gates`: all, or the release's defaults).
    Releases draview refuses are allowed here: tests start them to see the refusal."""
    env = {
        "DRAVIEW_CLUSTER_DIR": str(state_dir),
        "DRAVIEW_CLUSTER_GATES": gates,
        "DRAVIEW_CLUSTER_NODES": "2",
        "DRAVIEW_UNSUPPORTED_OK": "1",
        **{
            f"DRAVIEW_CLUSTER_{part}_PORT": str(_free_port())
            for part in ("ETCD", "ETCD_PEER", "APISERVER", "SCHEDULER", "CONTROLLER_MANAGER")
        },
    }
    build = _script("build", release, env=env)
    if build.returncode != 0:
        pytest.fail(f"e2e/cluster/build {release} failed:\n{build.stderr[-4000:]}")
    up = _script("up", release, env=env)
    try:
        if up.returncode != 0:
            pytest.fail(f"e2e/cluster/up {release} failed:\n{up.stderr[-4000:]}")
        kubeconfig = _last_line(up.stdout).removeprefix("export KUBECONFIG=")
        yield KubeCluster(
            kubeconfig=kubeconfig, kubectl=str(Path(_last_line(build.stdout)) / "kubectl")
        )
    finally:
        _script("down", env=env)


def _state_dir() -> Path:
    default = Path.home() / ".cache" / "draview-cluster" / "run"
    return Path(os.environ.get("DRAVIEW_CLUSTER_DIR") or default)


def _kubectl_for(kubeconfig: str) -> str:
    """$DRAVIEW_KUBECTL, else the built kubectl when the kubeconfig is the local cluster's."""
    if os.environ.get("DRAVIEW_KUBECTL"):
        return os.environ["DRAVIEW_KUBECTL"]
    state = _state_dir()
    bin_dir_file = state / "bin-dir"
    if Path(kubeconfig).resolve() == (state / "kubeconfig").resolve() and bin_dir_file.exists():
        kubectl = Path(bin_dir_file.read_text().strip()) / "kubectl"
        if kubectl.exists():
            return str(kubectl)
    return "kubectl"


def _start_local_cluster() -> KubeCluster:
    build = _script("build")
    if build.returncode != 0:
        pytest.fail(f"e2e/cluster/build failed:\n{build.stderr[-4000:]}")
    bin_dir = Path(_last_line(build.stdout))
    up = _script("up")
    if up.returncode != 0:
        pytest.fail(f"e2e/cluster/up failed:\n{up.stderr[-4000:]}")
    export = _last_line(up.stdout)
    prefix = "export KUBECONFIG="
    if not export.startswith(prefix):
        pytest.fail(f"e2e/cluster/up printed no KUBECONFIG line: {up.stdout!r}")
    return KubeCluster(
        kubeconfig=export[len(prefix) :],
        kubectl=str(bin_dir / "kubectl"),
        started=_ALREADY_RUNNING not in up.stderr,
    )


@pytest.fixture(scope="session")
def kube_cluster() -> Iterator[KubeCluster]:
    """The cluster for this pytest run (see the module docstring)."""
    external = os.environ.get("KUBECONFIG")
    if external:
        yield KubeCluster(kubeconfig=external, kubectl=_kubectl_for(external))
        return
    cluster = _start_local_cluster()
    try:
        yield cluster
    finally:
        if cluster.started and os.environ.get("DRAVIEW_CLUSTER_KEEP", "") not in ("1", "true"):
            _script("down")


@pytest.fixture
def kube_namespace(kube_cluster: KubeCluster) -> Iterator[str]:
    """A fresh namespace for one test, deleted (pods first) afterwards."""
    name = kube_cluster.create_namespace()
    try:
        yield name
    finally:
        kube_cluster.delete_namespace(name)
