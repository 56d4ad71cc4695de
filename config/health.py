"""``/healthz``: is this process able to serve? Database and broker reachability, as JSON.

docs/design.md section 2 (production topology). Used by docker-compose's health checks
and load balancers; no authentication, no tenant data, no connection strings in the answer.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

#: Seconds to wait for the broker before calling it unreachable.
BROKER_TIMEOUT = 2.0


def database_check() -> dict[str, Any]:
    """``SELECT 1`` on the default database: ``{"ok": bool, "vendor": str, "error"?: str}``."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any failure means "not reachable"; the type says why
        return {"ok": False, "vendor": connection.vendor, "error": type(exc).__name__}
    return {"ok": True, "vendor": connection.vendor}


def broker_check() -> dict[str, Any]:
    """Connect to the Celery broker: ``{"ok": bool, "transport": str, "error"?: str}``.

    In the embedded default (tasks eager, ``memory://``) there is no broker to reach; the
    answer says ``"transport": "memory"`` and ``"eager": true``.
    """
    from config.celery import app

    if settings.CELERY_TASK_ALWAYS_EAGER or settings.CELERY_BROKER_URL.startswith("memory://"):
        return {"ok": True, "transport": "memory", "eager": True}
    try:
        with app.connection_for_write(settings.CELERY_BROKER_URL) as conn:
            conn.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT)
            transport = conn.transport_cls
    except Exception as exc:  # same as above: unreachable, for whatever reason
        return {"ok": False, "transport": _transport(), "error": type(exc).__name__}
    return {"ok": True, "transport": str(transport), "eager": False}


def _transport() -> str:
    return settings.CELERY_BROKER_URL.split("://", 1)[0]


@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    """``200 {"status": "ok", ...}`` when database and broker answer, else ``503``."""
    checks = {"database": database_check(), "broker": broker_check()}
    ok = all(c["ok"] for c in checks.values())
    return JsonResponse({"status": "ok" if ok else "fail", **checks}, status=200 if ok else 503)
