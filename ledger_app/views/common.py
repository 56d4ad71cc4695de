"""Shared pieces of the ledger's htmx views: partial rendering, the scope's links."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest
from django.urls import reverse

from journal_app.models import Journal
from journal_app.views import is_fragment_request, scope_kwargs
from ledger_app.model_writer import FALLBACK_NOTE

FALLBACK_NOTICE = "mechanical facts only: " + FALLBACK_NOTE


def partial(request: HttpRequest, template: str, region: str) -> str:
    """``template#region`` for an htmx (non-boosted) request, else the whole ``template``."""
    return f"{template}#{region}" if is_htmx(request) else template


def is_htmx(request: HttpRequest) -> bool:
    """True for an htmx request that swaps a fragment (not a boosted page load, not a
    Back/Forward history restore, which needs the whole page)."""
    return is_fragment_request(request)


def fold_number(request: HttpRequest) -> int | None:
    """``?fold=N`` as a number, ``None`` when absent; ``Http404`` when not a number."""
    value = request.GET.get("fold", "")
    if value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise Http404("fold must be a number") from None


def scope_context(journal: Journal) -> dict[str, Any]:
    """Template context every scope page shares: the scope and its pages' links."""
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
