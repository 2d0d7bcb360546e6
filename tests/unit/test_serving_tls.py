"""The explain API's TLS on a loopback port: a renewed serving certificate and a new
front-proxy CA are used from the next connection on, with no restart, and a pair of
files that does not load leaves the certificate before it in use."""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from draview.controller.front_proxy import FrontProxy
from draview.controller.serving_tls import ServingTLS


def _ossl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _ca(d: Path, name: str) -> Path:
    _ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
          "-nodes", "-days", "1", "-subj", f"/CN={name}",
          "-keyout", str(d / f"{name}.key"), "-out", str(d / f"{name}.crt"))  # fmt: skip
    return d / f"{name}.crt"


def _signed(d: Path, ca: str, cn: str, into: Path) -> None:
    """into/tls.crt and into/tls.key for `cn`, signed by CA `ca` of d, each written whole
    and renamed into place, as the kubelet swaps a Secret volume's files."""
    into.mkdir(exist_ok=True)
    key, csr, crt = d / f"{cn}.key", d / f"{cn}.csr", d / f"{cn}.crt"
    _ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
          "-subj", f"/CN={cn}", "-keyout", str(key), "-out", str(csr))  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _ossl("x509", "-req", "-in", str(csr), "-CA", str(d / f"{ca}.crt"),
          "-CAkey", str(d / f"{ca}.key"), "-CAcreateserial", "-days", "1",
          "-extfile", str(d / "san.ext"), "-out", str(crt))  # fmt: skip
    for src, name in ((key, "tls.key"), (crt, "tls.crt")):
        tmp = into / f".{name}.new"
        tmp.write_bytes(src.read_bytes())
        os.replace(tmp, into / name)


def _proxy(ca: Path, names: tuple[str, ...] = ()) -> FrontProxy:
    return FrontProxy(ca.read_text(), names, ("X-Remote-User",), ("X-Remote-Group",), ())


class _Port:
    """ServingTLS behind a loopback TLS server that answers each connection with the
    subject of the client certificate it verified (empty without one)."""

    def __init__(self, tls: ServingTLS) -> None:
        self.tls = tls
        self.loop = asyncio.new_event_loop()
        self.server = self.loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=tls.context)
        )
        self.port = self.server.sockets[0].getsockname()[1]

    async def _serve(self, _: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peercert") or {}
        cns = [v for rdn in peer.get("subject", ()) for k, v in rdn if k == "commonName"]
        writer.write((",".join(cns) or "-").encode())
        await writer.drain()
        writer.close()

    def connect(self, ca: Path, client: Path | None = None) -> tuple[str, str]:
        """(common name of the served certificate, what the server saw of ours)."""
        ctx = ssl.create_default_context(cafile=str(ca))
        if client is not None:
            ctx.load_cert_chain(str(client / "tls.crt"), str(client / "tls.key"))

        async def talk() -> tuple[str, str]:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", self.port, ssl=ctx, server_hostname="localhost"
            )
            served = writer.get_extra_info("peercert")
            seen = (await reader.read()).decode()
            writer.close()
            cn = [v for rdn in served["subject"] for k, v in rdn if k == "commonName"]
            return cn[0], seen

        return self.loop.run_until_complete(talk())

    def refuses(self, ca: Path, client: Path) -> bool:
        """Whether the port refuses a client certificate: under TLS 1.3 the client learns
        it only when it reads (an alert, or the connection closed with no answer)."""
        try:
            return self.connect(ca, client)[1] == ""
        except (ssl.SSLError, ConnectionError):
            return True

    def close(self) -> None:
        self.server.close()
        self.loop.run_until_complete(self.server.wait_closed())
        self.loop.close()


@pytest.fixture
def pki(tmp_path: Path) -> Iterator[tuple[Path, _Port]]:
    _ca(tmp_path, "serving-ca")
    _ca(tmp_path, "proxy-ca")
    _signed(tmp_path, "serving-ca", "first", tmp_path / "certs")
    _signed(tmp_path, "proxy-ca", "front-proxy-client", tmp_path / "client")
    port = _Port(ServingTLS(_proxy(tmp_path / "proxy-ca.crt"), str(tmp_path / "certs")))
    yield tmp_path, port
    port.close()


def test_a_renewed_certificate_is_served_from_the_next_connection(
    pki: tuple[Path, _Port],
) -> None:
    d, port = pki
    ca = d / "serving-ca.crt"
    assert port.connect(ca)[0] == "first"
    _signed(d, "serving-ca", "renewed", d / "certs")
    assert port.connect(ca)[0] == "renewed"
    assert port.connect(ca)[0] == "renewed"


def test_files_that_do_not_load_keep_the_certificate_before(
    pki: tuple[Path, _Port], caplog: pytest.LogCaptureFixture
) -> None:
    d, port = pki
    ca = d / "serving-ca.crt"
    _signed(d, "serving-ca", "other", d / "elsewhere")
    # Half of a swap: the new certificate beside the old key.
    os.replace(d / "elsewhere" / "tls.crt", d / "certs" / "tls.crt")
    with caplog.at_level(logging.WARNING, logger="draview.explain_api"):
        assert port.connect(ca)[0] == "first"
        assert port.connect(ca)[0] == "first"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings  # said once, not per connection
    assert "cannot load the serving certificate" in warnings[0]
    assert str(d / "certs" / "tls.crt") in warnings[0]
    os.replace(d / "elsewhere" / "tls.key", d / "certs" / "tls.key")
    assert port.connect(ca)[0] == "other"


def test_a_new_front_proxy_ca_is_checked_from_the_next_connection(
    pki: tuple[Path, _Port],
) -> None:
    d, port = pki
    ca = d / "serving-ca.crt"
    assert port.connect(ca, d / "client") == ("first", "front-proxy-client")
    _ca(d, "rotated-ca")
    _signed(d, "rotated-ca", "front-proxy-client", d / "rotated-client")
    assert port.refuses(ca, d / "rotated-client")  # signed by a CA the port does not know
    assert port.tls.use_proxy(_proxy(d / "rotated-ca.crt"))
    assert not port.tls.use_proxy(_proxy(d / "rotated-ca.crt"))  # the same: no change
    assert port.connect(ca, d / "rotated-client") == ("first", "front-proxy-client")
    assert port.refuses(ca, d / "client")  # the old CA no longer signs for the API server
    assert port.connect(ca) == ("first", "-")  # discovery needs no client certificate


def test_a_front_proxy_ca_that_does_not_load_keeps_the_one_before(
    pki: tuple[Path, _Port],
) -> None:
    d, port = pki
    before = port.tls.proxy
    broken = FrontProxy("-----BEGIN CERTIFICATE-----\nnot one\n-----END CERTIFICATE-----\n",
                        (), ("X-Remote-User",), (), ())  # fmt: skip
    assert not port.tls.use_proxy(broken)
    assert port.tls.proxy is before
    assert port.connect(d / "serving-ca.crt", d / "client") == ("first", "front-proxy-client")
