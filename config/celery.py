"""The Celery application. Embedded default: tasks run eagerly in-process (settings)."""

from __future__ import annotations

import os
import sys

from celery import Celery

from config.startup import settings_or_exit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

_program = sys.argv[0] if sys.argv else ""
if os.path.basename(_program).startswith("celery") or _program.endswith("celery/__main__.py"):
    # a worker or beat: a bad setting ends it with one line, not Celery's traceback
    settings_or_exit("celery")

app = Celery("ledgerkeep")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
