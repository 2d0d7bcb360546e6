"""The explain API of an operator running on this machine (not in a Pod), registered with
the local control plane: a serving certificate for it, and an APIService that reaches it
through an ExternalName Service for `localhost` (the API server dials it; there are no
Pod or Service IPs here). Used by tests/integration/test_explain_api.py and bench/cli."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path
from typing import Any

APISERVICE = "v1alpha1.explain.draview.io"
SERVICE = "draview-explain-local"


def serving_cert(d: Path, namespace: str) -> bytes:
    """d/tls.crt and d/tls.key for the Service's DNS name, signed by a CA made here
    (d/ca.crt); returns the CA (PEM) for the APIService's caBundle."""
    host = f"{SERVICE}.{namespace}.svc"

    def ossl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=explain-ca",
         "-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt"))  # fmt: skip
    ossl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={host}",
         "-keyout", str(d / "tls.key"), "-out", str(d / "tls.csr"))  # fmt: skip
    (d / "san.ext").write_text(f"subjectAltName=DNS:{host},DNS:localhost,IP:127.0.0.1\n")
    ossl("x509", "-req", "-in", str(d / "tls.csr"), "-CA", str(d / "ca.crt"),
         "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "1",
         "-extfile", str(d / "san.ext"), "-out", str(d / "tls.crt"))  # fmt: skip
    return (d / "ca.crt").read_bytes()


def renew(d: Path, namespace: str) -> str:
    """A new key and certificate in d, signed by the CA serving_cert made, each file
    renamed into place as the kubelet swaps a Secret volume's; returns its serial (hex)."""
    host = f"{SERVICE}.{namespace}.svc"
    new = d / "renewed"
    new.mkdir(exist_ok=True)

    def ossl(*args: str) -> str:
        return subprocess.run(["openssl", *args], check=True, capture_output=True, text=True).stdout

    ossl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={host}",
         "-keyout", str(new / "tls.key"), "-out", str(new / "tls.csr"))  # fmt: skip
    ossl("x509", "-req", "-in", str(new / "tls.csr"), "-CA", str(d / "ca.crt"),
         "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "1",
         "-extfile", str(d / "san.ext"), "-out", str(new / "tls.crt"))  # fmt: skip
    os.replace(new / "tls.key", d / "tls.key")
    os.replace(new / "tls.crt", d / "tls.crt")
    return ossl("x509", "-noout", "-serial", "-in", str(d / "tls.crt")).strip().split("=")[1]


def registration(namespace: str, port: int, ca: bytes) -> list[dict[str, Any]]:
    """The Service and the APIService that send explain.draview.io to localhost:port."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": namespace},
            "spec": {"type": "ExternalName", "externalName": "localhost"},
        },
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": APISERVICE},
            "spec": {
                "group": "explain.draview.io",
                "version": "v1alpha1",
                "service": {"namespace": namespace, "name": SERVICE, "port": port},
                "caBundle": base64.b64encode(ca).decode(),
                "groupPriorityMinimum": 1000,
                "versionPriority": 15,
            },
        },
    ]
