"""The Celery app the failure tests' workers run: the project's app, with broker options.

``FAILURE_VISIBILITY_TIMEOUT`` (seconds), when set, makes Redis hand an unacknowledged
message to another worker that soon after its worker died (kill -9), and the restore sweep
runs every second. Without it the project's defaults apply (an hour), so a message that a
live worker holds is never delivered twice by the broker on its own.
"""

from __future__ import annotations

import os

from config.celery import app

if os.environ.get("FAILURE_VISIBILITY_TIMEOUT"):
    app.conf.broker_transport_options = {
        "visibility_timeout": int(os.environ["FAILURE_VISIBILITY_TIMEOUT"]),
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
    }

__all__ = ["app"]
