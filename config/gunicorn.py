"""Gunicorn settings of the web process: ``gunicorn -c python:config.gunicorn config.wsgi``.

The Dockerfile, docker-compose.yml, README "Run in production" and tests/test_topology.py
start gunicorn with it. Command-line flags still override any value here (``--bind``,
``--workers``).

Request limits (issue 16): gunicorn answers a request line or header over its limits itself,
in plain text, before the application sees it. The request line is read up to gunicorn's
maximum (8,190 bytes, :func:`config.production.request_line_limit`), far above the API's
own URL limit (``API_MAX_URL_BYTES``, 4,000 by default), so a URL over the API's limit is
answered by the API's 414 ``uri_too_long`` in the error shape. Headers keep gunicorn's
bounds, stated here: 100 fields of at most 8,190 bytes each (an API key header is under
100 bytes).
"""

from __future__ import annotations

from config.env import SettingError, env_int, env_str
from config.production import MAX_URL_BYTES, request_line_limit

try:
    limit_request_line = request_line_limit(env_int("API_MAX_URL_BYTES", MAX_URL_BYTES))
except ValueError as exc:
    raise SettingError(str(exc)) from None
#: most header fields in one request (gunicorn's default, 100)
limit_request_fields = 100
#: longest header field, in bytes (gunicorn's default and maximum, 8,190)
limit_request_field_size = 8190

bind = env_str("GUNICORN_BIND", "0.0.0.0:8000")
workers = env_int("WEB_CONCURRENCY", 3)
#: seconds a worker may spend on one request (a large import is one request)
timeout = env_int("GUNICORN_TIMEOUT", 120)
accesslog = "-"
