"""The template context every page of one journal scope shares: the scope and its pages' links."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from journal_app.models import Journal
from journal_app.views.scope_urls import scope_kwargs


def scope_context(journal: Journal) -> dict[str, Any]:
    """``journal``, its session and tenant, its ``scope_kwargs`` and the links every scope page
    shows (timeline, facts, folds, the fact comment form's action)."""
    kwargs = scope_kwargs(journal)
    return {
        "journal": journal,
        "session": journal.session,
        "tenant": journal.session.tenant,
        "scope_kwargs": kwargs,
        "timeline_url": reverse("journal:timeline", kwargs=kwargs),
        "facts_url": reverse("ledger:facts", kwargs=kwargs),
        "folds_url": reverse("ledger:folds", kwargs=kwargs),
        "comment_url": reverse("journal:fact_comment", kwargs=kwargs),
    }
