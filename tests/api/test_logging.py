"""Structured logs: config/logging.py renders JSON lines (pure, no Django)."""

from __future__ import annotations

import json
import logging
import sys

import pytest
import structlog

from config.logging import logging_config


def _formatter(fmt: str) -> logging.Formatter:
    spec = dict(logging_config(fmt=fmt, level="INFO")["formatters"]["structured"])
    factory = spec.pop("()")
    return factory(**spec)


def _record(msg: str, exc_info=None) -> logging.LogRecord:
    return logging.LogRecord("django.request", logging.WARNING, __file__, 1, msg, (), exc_info)


def test_a_standard_library_record_becomes_one_json_line():
    line = _formatter("json").format(_record("Not Found: /api/v1/x"))

    data = json.loads(line)
    assert "\n" not in line
    assert data["event"] == "Not Found: /api/v1/x"
    assert (data["level"], data["logger"]) == ("warning", "django.request")
    assert data["timestamp"].endswith("Z")


def test_a_traceback_is_kept_inside_the_json_line():
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        line = _formatter("json").format(_record("failed", sys.exc_info()))

    data = json.loads(line)
    assert "RuntimeError: boom" in data["exception"]


def test_structlog_events_keep_their_fields():
    formatter = _formatter("json")
    event = {"event": "api_error", "status": 409, "code": "conflict"}
    wrapped = structlog.stdlib.ProcessorFormatter.wrap_for_formatter(None, "info", event)
    record = logging.LogRecord("ledgerkeep.api", logging.INFO, __file__, 1, wrapped[0][0], (), None)
    record._logger = None
    record._name = "info"

    data = json.loads(formatter.format(record))

    assert (data["event"], data["status"], data["code"]) == ("api_error", 409, "conflict")


def test_console_format_is_plain_text_and_unknown_formats_fail_loudly():
    assert "Not Found" in _formatter("console").format(_record("Not Found: /x"))
    with pytest.raises(ValueError, match="LOG_FORMAT='xml'"):
        logging_config(fmt="xml", level="INFO")
