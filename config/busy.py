"""A write refused because SQLite is busy answers 503 with ``Retry-After``, not a 500.

The embedded default (one SQLite file, README "Configuration") lets page views read while
an import writes (WAL), but a request that must write (a login records its session and an
audit event) waits for the import's one transaction at most ``SQLITE_BUSY_TIMEOUT_SECONDS``;
a larger import holds it longer. That request is then told what happened and when to try
again. PostgreSQL never raises this error.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog
from django.conf import settings
from django.db import OperationalError
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

log = structlog.get_logger(__name__)

#: SQLite's messages for a lock it waited on until the busy timeout
BUSY = ("database is locked", "database table is locked")
#: seconds a client is told to wait before trying again
RETRY_AFTER = 5


def database_busy(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's "database is locked" (the busy timeout ran out)."""
    return isinstance(exc, OperationalError) and str(exc).strip() in BUSY


class DatabaseBusyMiddleware:
    """Answer a view's "database is locked" with ``503`` and ``Retry-After`` (HTML page)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if not database_busy(exc):
            return None
        wait = settings.DATABASES["default"].get("OPTIONS", {}).get("timeout", 0)
        log.warning("database_busy", method=request.method, path=request.path, waited_s=wait)
        body = render_to_string("busy.html", {"waited": wait, "retry_after": RETRY_AFTER})
        response = HttpResponse(body, status=503)
        response["Retry-After"] = str(RETRY_AFTER)
        return response
