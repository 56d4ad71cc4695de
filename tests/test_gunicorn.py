"""The web process's gunicorn settings (``config/gunicorn.py``).

Gunicorn answers a request line over its limit itself, in plain text. The config reads lines
up to gunicorn's maximum, so every URL over the API's own limit gets the API's 414 in the
error shape; the config module is loaded the way gunicorn loads it, and a real gunicorn is
started with it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from gunicorn.app.base import Application

from config.production import (
    GUNICORN_MAX_REQUEST_LINE,
    MAX_URL_BYTES,
    REQUEST_LINE_OVERHEAD,
    request_line_limit,
)

ROOT = Path(__file__).resolve().parent.parent
CONFIG = "python:config.gunicorn"


class _Loaded(Application):
    """The settings gunicorn itself takes from ``-c python:config.gunicorn``."""

    def init(self, parser, opts, args):  # no command line: nothing but the config module
        return None

    def load(self):  # pragma: no cover - never served
        raise AssertionError

    def load_config(self):
        self.load_config_from_module_name_or_filename(CONFIG)


def _loaded(monkeypatch, **env: str):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    sys.modules.pop("config.gunicorn", None)
    try:
        return _Loaded().cfg
    finally:
        sys.modules.pop("config.gunicorn", None)


def test_the_request_line_reaches_the_api_for_every_url_it_reads(monkeypatch):
    cfg = _loaded(monkeypatch)

    assert cfg.limit_request_line == GUNICORN_MAX_REQUEST_LINE == 8190
    assert cfg.limit_request_line >= settings.API_MAX_URL_BYTES + REQUEST_LINE_OVERHEAD
    assert (cfg.limit_request_fields, cfg.limit_request_field_size) == (100, 8190)
    assert cfg.bind == ["0.0.0.0:8000"] and cfg.workers == 3


def test_settings_and_gunicorn_read_the_same_url_limit(monkeypatch):
    assert settings.API_MAX_URL_BYTES == MAX_URL_BYTES == 4000
    cfg = _loaded(monkeypatch, API_MAX_URL_BYTES="8000")
    assert cfg.limit_request_line == 8190


@pytest.mark.parametrize("value", [0, 8190 - REQUEST_LINE_OVERHEAD + 1, 10**6])
def test_a_url_limit_gunicorn_cannot_read_is_refused_naming_the_variable(value):
    with pytest.raises(ValueError, match=f"API_MAX_URL_BYTES={value} does not fit"):
        request_line_limit(value)


def test_the_largest_url_limit_fits_the_longest_request_line():
    largest = 8190 - REQUEST_LINE_OVERHEAD
    assert request_line_limit(largest) == 8190
    assert len(f"OPTIONS /{'x' * (largest - 1)} HTTP/1.1") == 8190


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _raw_get(port: int, target: str) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@pytest.fixture
def gunicorn(tmp_path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "API_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DJANGO_DEBUG="true",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        CELERY_TASK_ALWAYS_EAGER="true",
    )
    command = [
        sys.executable, "-m", "gunicorn", "-c", CONFIG, "config.asgi:application",
        "--bind", f"127.0.0.1:{port}", "--workers", "1",
    ]  # fmt: skip
    log = (tmp_path / "gunicorn.log").open("wb")
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if _raw_get(port, "/healthz")[0] in (200, 503):
                    break
            except OSError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, (
                tmp_path / "gunicorn.log"
            ).read_text()
            time.sleep(0.3)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def test_a_url_over_the_api_limit_gets_the_error_shape_through_gunicorn(gunicorn):
    # 5,000 bytes: over the API's 4,000 and over gunicorn's default line of 4,094
    status, body = _raw_get(gunicorn, "/api/v1/no-such-thing/" + "x" * 5000)

    assert status == 414
    shape = json.loads(body)
    assert shape["code"] == "uri_too_long" and set(shape) == {"code", "message", "field", "entry"}

    near_gunicorns_maximum = "/api/v1/x?pad=" + "y" * (8190 - REQUEST_LINE_OVERHEAD - 20)
    assert _raw_get(gunicorn, near_gunicorns_maximum)[0] == 414
