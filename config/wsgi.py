"""WSGI entry point (``config.wsgi:application``), for tools that only speak WSGI.

Production serves ``config.asgi`` (``config/gunicorn.py``): under WSGI the proxy's async
views answer, but a streamed answer is collected whole before it is sent, and each request
holds a worker for its whole duration.
"""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

from config.warmup import warm_up  # noqa: E402 - after Django is set up

warm_up()  # what the first request would pay: URLs, templates, tokenizer
