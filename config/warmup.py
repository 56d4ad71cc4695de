"""Start-up warm-up of a serving process: what the first request would otherwise pay.

A process's first view of a page paid for work done once per process: importing the URL
configuration (the API's schemas are built at import: most of it), the views and the
services they import, compiling the page's templates, loading the tokenizer's ranks
(:func:`journal_app.tokens.get_encoding`) and the secret scanner's detect-secrets plugins
(:func:`journal_app.privacy.secret_spans`, imported on first use). :func:`warm_up` does that at start-up instead, so
the first view of each page costs about what later views cost.

Called by the serving entry points only (``config/asgi.py``, ``config/wsgi.py``), after
Django is set up: management commands, Celery workers and the tests never pay it. Set
``LEDGER_WARM_UP=0`` to skip it (a server that must answer its first request sooner
than it can afford the warm-up).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, cast

#: the environment variable that turns the warm-up off (``"0"``)
ENV = "LEDGER_WARM_UP"


def project_templates(root: Path | None = None) -> list[str]:
    """The template names of the project's own template directories (the ``DIRS`` of each
    Django template engine and the ``templates/`` folder of each installed app under the
    project root), sorted; third-party templates (admin, ...) are left out: the operator
    pages do not use them.

    Args:
        root: the project root (default ``settings.BASE_DIR``).

    Returns:
        names as ``get_template`` takes them (``"ledger_app/context.html"``), ``.html`` only.
    """
    from django.apps import apps
    from django.conf import settings

    base = Path(root if root is not None else settings.BASE_DIR).resolve()
    dirs: list[Path] = []
    for engine in cast(list[dict[str, Any]], settings.TEMPLATES):
        dirs += [Path(d) for d in engine.get("DIRS", [])]
        if engine.get("APP_DIRS"):
            dirs += [Path(a.path) / "templates" for a in apps.get_app_configs()]
    names: set[str] = set()
    for d in dirs:
        d = d.resolve()
        if not d.is_dir() or base not in (d, *d.parents):
            continue
        names.update(p.relative_to(d).as_posix() for p in d.rglob("*.html"))
    return sorted(names)


def warm_up() -> dict[str, float]:
    """Import the URL configuration, compile the project's templates, load the token
    encoding and the secret scanner, once per process (see the module docstring).

    Returns:
        seconds spent per step: ``{"urls", "templates", "tokenizer", "secrets"}`` (empty when
        ``LEDGER_WARM_UP=0``).

    Raises:
        nothing on a template that does not compile: it is left for its first use to report
        (the warm-up never stops a server from starting).
    """
    if os.environ.get(ENV, "1") == "0":
        return {}
    from django.conf import settings
    from django.template import TemplateSyntaxError, engines
    from django.template.exceptions import TemplateDoesNotExist
    from django.urls import get_resolver

    from journal_app.privacy import secret_spans
    from journal_app.tokens import get_encoding

    spent: dict[str, float] = {}
    t0 = time.perf_counter()
    resolver = get_resolver()
    resolver.url_patterns  # noqa: B018 - the import is the point
    resolver._populate()  # the reverse map every page's {% url %} reads
    spent["urls"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for name in project_templates():
        for engine in engines.all():
            try:
                engine.get_template(name)  # the cached loader keeps it compiled (DEBUG off)
            except (TemplateDoesNotExist, TemplateSyntaxError):
                continue
    spent["templates"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    get_encoding(settings.TOKEN_ENCODING)
    spent["tokenizer"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    secret_spans("warm-up")  # builds the detect-secrets plugins (an import of their package)
    spent["secrets"] = time.perf_counter() - t0
    return spent
