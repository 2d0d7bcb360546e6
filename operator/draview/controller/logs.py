"""Structured logs: one JSON object (or key=value text) per line, `extra` fields kept."""

from __future__ import annotations

import json
import logging
import time

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class _Formatter(logging.Formatter):
    def __init__(self, as_json: bool) -> None:
        super().__init__()
        self.as_json = as_json

    def format(self, record: logging.LogRecord) -> str:
        fields = {k: v for k, v in vars(record).items() if k not in _STANDARD}
        base = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **fields,
        }
        if record.exc_info:
            base["error"] = self.formatException(record.exc_info)
        if self.as_json:
            return json.dumps(base, default=str)
        return " ".join(
            f"{k}={json.dumps(v, default=str) if ' ' in str(v) else v}" for k, v in base.items()
        )


def setup(level: str, fmt: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(_Formatter(fmt == "json"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # kopf and aiohttp are chatty at INFO; their warnings still show.
    if root.level > logging.DEBUG:
        for name in ("kopf", "aiohttp.access"):
            logging.getLogger(name).setLevel(logging.WARNING)
