"""When the source says an entry happened, read from the entry's metadata. Pure.

Used by the timeline (times, gaps, durations), the sessions list (last activity) and the
append (``Journal.last_source_at``), so all of them read a source's time the same way.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

TIME_KEYS = ("timestamp", "step_timestamp", "created_at", "time", "ts")


def entry_time(meta: dict[str, Any]) -> datetime | None:
    """When the source says an entry happened: the first of ``timestamp``, ``step_timestamp``,
    ``created_at``, ``time``, ``ts`` in its metadata, as an aware datetime (ISO 8601 text, or
    seconds/milliseconds since the epoch); ``None`` when absent or unreadable."""
    for key in TIME_KEYS:
        value = meta.get(key)
        if value is None or isinstance(value, bool):
            continue
        try:
            if isinstance(value, (int, float)):
                seconds = value / 1000 if value > 10**11 else value
                return datetime.fromtimestamp(seconds, tz=UTC)
            if isinstance(value, str) and value:
                at = datetime.fromisoformat(value.replace("Z", "+00:00"))
                return at if at.tzinfo else at.replace(tzinfo=UTC)
        except (ValueError, OverflowError, OSError):
            continue
    return None
