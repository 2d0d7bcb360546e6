"""Structured logs: one JSON object per line (python-json-logger), or key=value text for
people; `extra` fields kept in both."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from pythonjsonlogger.json import JsonFormatter

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
# Field names as before python-json-logger: dashboards and queries keep working.
_RENAMED = {"levelname": "level", "name": "logger", "message": "msg", "exc_info": "error"}


def _ts(record: logging.LogRecord) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{stamp}.{int(record.msecs):03d}Z"


class _Json(JsonFormatter):
    def __init__(self) -> None:
        super().__init__(
            "{levelname}{name}{message}", style="{", rename_fields=_RENAMED, json_default=str
        )

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        log_data["ts"] = _ts(record)  # first, and in UTC with milliseconds
        super().add_fields(log_data, record, message_dict)
        log_data["level"] = str(log_data.get("level", "")).lower()
        log_data.pop("taskName", None)


class _Text(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = {k: v for k, v in vars(record).items() if k not in _STANDARD}
        base = {
            "ts": _ts(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **fields,
        }
        if record.exc_info:
            base["error"] = self.formatException(record.exc_info)
        return " ".join(
            f"{k}={json.dumps(v, default=str) if ' ' in str(v) else v}" for k, v in base.items()
        )


def setup(level: str, fmt: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(_Json() if fmt == "json" else _Text())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # kopf and aiohttp are chatty at INFO; their warnings still show.
    if root.level > logging.DEBUG:
        for name in ("kopf", "aiohttp.access"):
            logging.getLogger(name).setLevel(logging.WARNING)


class Once:
    """Warnings said once per key until cleared: a failure that repeats every round is
    one log line, and one more after it went away and came back."""

    def __init__(self, log: logging.Logger) -> None:
        self.log = log
        self.said: set[str] = set()

    def say(self, key: str, message: str) -> None:
        if key not in self.said:
            self.said.add(key)
            self.log.warning(message)

    def clear(self, key: str) -> None:
        self.said.discard(key)
