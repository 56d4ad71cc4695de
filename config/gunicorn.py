"""Gunicorn settings of the web process:
``gunicorn -c python:config.gunicorn config.asgi:application``.

Workers are uvicorn's (``uvicorn_worker.UvicornWorker``, an event loop each): the proxy's
async views hold many long model streams per worker, and the worker timeout (a heartbeat
the event loop sends, not a limit on one request) is never shorter than
``UPSTREAM_TIMEOUT_SECONDS`` plus a margin, so no streamed answer is cut while the upstream
may still send it (README "Run in production").

The Dockerfile, docker-compose.yml, README "Run in production" and tests/test_topology.py
start gunicorn with it. Command-line flags still override any value here (``--bind``,
``--workers``).

Request limits: the URL limit is the API's own (414 in the error shape); under
uvicorn workers the request line is read up to h11's 16 KiB event limit, above gunicorn's
maximum. The values below are what a synchronous gunicorn worker would use: gunicorn answers a request line or header over its limits itself,
in plain text, before the application sees it. The request line is read up to gunicorn's
maximum (8,190 bytes, :func:`config.production.request_line_limit`), far above the API's
own URL limit (``API_MAX_URL_BYTES``, 4,000 by default), so a URL over the API's limit is
answered by the API's 414 ``uri_too_long`` in the error shape. Headers keep gunicorn's
bounds, stated here: 100 fields of at most 8,190 bytes each (an API key header is under
100 bytes).
"""

from __future__ import annotations

import math

from config.env import SettingError, env_count, env_float, env_int, env_str
from config.production import MAX_URL_BYTES, UPSTREAM_TIMEOUT_SECONDS, request_line_limit
from config.startup import configuration_error, settings_or_exit

# the master checks every setting at start: a bad one stops it with one line naming the
# variable (status 2), not a traceback per worker
settings_or_exit("gunicorn")


try:
    limit_request_line = request_line_limit(env_int("API_MAX_URL_BYTES", MAX_URL_BYTES))
except ValueError as exc:  # SettingError included
    configuration_error("gunicorn", exc)
#: most header fields in one request (gunicorn's default, 100)
limit_request_fields = 100
#: longest header field, in bytes (gunicorn's default and maximum, 8,190)
limit_request_field_size = 8190

bind = env_str("GUNICORN_BIND", "0.0.0.0:8000")
#: event-loop workers: many concurrent streams each (``GUNICORN_WORKER_CLASS`` overrides)
worker_class = env_str("GUNICORN_WORKER_CLASS", "uvicorn_worker.UvicornWorker")
#: seconds of slack beyond the upstream timeout before gunicorn restarts a silent worker
TIMEOUT_MARGIN = 30
try:
    #: worker processes: ``WEB_CONCURRENCY`` (default 3), 1 or more; 0, a negative or a
    #: non-numeric value stops gunicorn at start with one line naming the variable
    workers = env_count("WEB_CONCURRENCY", 3, minimum=1)
    #: seconds a worker may stay silent: ``GUNICORN_TIMEOUT`` (default 120), raised to the
    #: upstream timeout plus :data:`TIMEOUT_MARGIN` when shorter
    timeout = max(
        env_int("GUNICORN_TIMEOUT", 120),
        math.ceil(env_float("UPSTREAM_TIMEOUT_SECONDS", UPSTREAM_TIMEOUT_SECONDS)) + TIMEOUT_MARGIN,
    )
except SettingError as exc:
    configuration_error("gunicorn", exc)
#: seconds a worker has to finish its streams on a restart (SIGTERM) before it is killed
graceful_timeout = timeout
accesslog = "-"
