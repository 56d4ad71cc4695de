"""Structured logs: JSON lines in production, readable key=value lines locally.

Pure module (structlog and the standard library only). :func:`logging_config` returns the
``LOGGING`` dict for Django's ``dictConfig``; :func:`configure_structlog` routes
``structlog.get_logger(...)`` through the same standard-library handlers, so Django's own
records, Celery's and the API's structlog events come out in one format. A JSON line looks
like::

    {"event": "api_error", "status": 409, "code": "conflict", "path": "/api/v1/...",
     "level": "info", "logger": "ledgerkeep.api", "timestamp": "2025-01-01T00:00:00Z"}
"""

from __future__ import annotations

from typing import Any

import structlog

FORMATS = ("json", "console")

_PRE_CHAIN: list[Any] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_logger_name,
    structlog.stdlib.add_log_level,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


def logging_config(*, fmt: str, level: str) -> dict[str, Any]:
    """The ``LOGGING`` setting: one console handler on the root logger.

    Args:
        fmt: ``"json"`` (one JSON object per line, tracebacks included as text) or
            ``"console"`` (aligned key=value lines).
        level: the root level name (``"WARNING"``, ``"INFO"``, ...).

    Raises:
        ValueError: ``fmt`` is not one of :data:`FORMATS`.
    """
    if fmt not in FORMATS:
        raise ValueError(f"LOG_FORMAT={fmt!r} is not one of {', '.join(FORMATS)}")
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "structured": {
                "()": structlog.stdlib.ProcessorFormatter,
                "processors": [
                    structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info,
                    renderer,
                ],
                "foreign_pre_chain": _PRE_CHAIN,
            }
        },
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "structured"}},
        "root": {"handlers": ["console"], "level": level},
    }


def configure_structlog() -> None:
    """Send structlog events to the standard-library handlers set up by :func:`logging_config`."""
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_PRE_CHAIN,
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
