"""ASGI entry point: ``gunicorn -c python:config.gunicorn config.asgi:application``.

The web process serves the whole site through it (uvicorn workers, ``config/gunicorn.py``):
the proxy's views are async, so a worker holds many long model streams at once; the other
views are synchronous and run in Django's thread pool (README "Run in production").
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_asgi_application()

from config.warmup import warm_up  # noqa: E402 - after Django is set up

warm_up()  # what the first request would pay: URLs, templates, tokenizer
