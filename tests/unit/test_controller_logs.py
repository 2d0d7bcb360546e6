"""Log lines: JSON through python-json-logger with the field names dashboards query."""

from __future__ import annotations

import json
import logging

import pytest

from draview.controller import logs


def test_json_lines_keep_extra_fields_and_the_usual_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        logs.setup("info", "json")
        log = logging.getLogger("draview.test")
        log.warning("status write failed", extra={"code": "422", "object": "rpst/x"})
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("batch failed")
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    first, second = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    assert first["level"] == "warning" and first["logger"] == "draview.test"
    assert first["msg"] == "status write failed" and first["code"] == "422"
    assert first["ts"].endswith("Z") and first["object"] == "rpst/x"
    assert second["level"] == "error" and "ValueError: boom" in second["error"]
