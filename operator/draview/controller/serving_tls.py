"""The explain API's TLS: its serving certificate and the front-proxy CA it checks client
certificates against, both taken up again when they change, with no restart.

A certificate from a Secret volume is renewed in place (cert-manager, or a new Secret
the chart's `explainAPI.tls.secretName` names): the kubelet swaps the volume's files.
Each new connection looks at the files first (a stat of each) and loads them when they
changed; a pair that does not load (a key that does not match yet, half of a swap) keeps
the certificate before it in use and is tried again on the next connection. The
front-proxy CA, the names it may use and the headers come from a ConfigMap the API server
keeps; `use_proxy` takes a new one. Only connections that start after a change see it."""

from __future__ import annotations

import logging
import os
import ssl
from typing import Any

from draview.controller.front_proxy import FrontProxy
from draview.controller.logs import Once

log = logging.getLogger("draview.explain_api")

Stamp = tuple[tuple[int, int, int], ...]


class ServingTLS:
    def __init__(self, proxy: FrontProxy, cert_dir: str) -> None:
        """Raises OSError or ssl.SSLError when the certificate cannot be loaded at all."""
        self.proxy = proxy
        self.cert_file = os.path.join(cert_dir, "tls.crt")
        self.key_file = os.path.join(cert_dir, "tls.key")
        self._once = Once(log)
        self._stamp = self._files()
        self.current = self._build()
        # The context the port is opened with: it hands each handshake to `current`.
        self.context = self._build()
        self.context.sni_callback = self._pick

    def _files(self) -> Stamp:
        out = []
        for path in (self.cert_file, self.key_file):
            st = os.stat(path)
            out.append((st.st_ino, st.st_mtime_ns, st.st_size))
        return tuple(out)

    def _build(self) -> ssl.SSLContext:
        return self.proxy.server_context(self.cert_file, self.key_file)

    def _pick(self, conn: Any, _server_name: str | None, _ctx: ssl.SSLContext) -> None:
        # Called by OpenSSL for every ClientHello, with or without SNI. An exception here
        # would fail the handshake: refresh only reports.
        self.refresh()
        conn.context = self.current

    def refresh(self) -> bool:
        """Load the certificate again when its files changed; True when it did."""
        try:
            stamp = self._files()
            if stamp == self._stamp:
                return False
            ctx = self._build()
        except (OSError, ssl.SSLError) as exc:
            self._once.say(
                "load",
                f"cannot load the serving certificate {self.cert_file}, the one before "
                f"stays in use: {exc}",
            )
            return False
        self.current, self._stamp = ctx, stamp
        self._once.clear("load")
        log.info("serving certificate loaded again", extra={"file": self.cert_file})
        return True

    def use_proxy(self, proxy: FrontProxy) -> bool:
        """Check client certificates against a new front-proxy CA (and names, headers)
        from the next connection on; True when it differs from the one in use."""
        if proxy == self.proxy:
            return False
        before = self.proxy
        self.proxy = proxy
        try:
            self.current = self._build()
        except (OSError, ssl.SSLError, ValueError) as exc:
            self.proxy = before
            log.warning("the new front-proxy CA does not load, the one before stays: %s", exc)
            return False
        log.info("front-proxy CA changed", extra={"names": list(proxy.allowed_names)})
        return True
