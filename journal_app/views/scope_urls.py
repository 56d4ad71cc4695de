"""The URLs of a journal scope (tenant, session, lane, branch): every page of one journal
names it in its path."""

from __future__ import annotations

from django.urls import reverse

from journal_app.models import Journal


def timeline_url(journal: Journal) -> str:
    """The timeline of ``journal`` (its scope in the path)."""
    return reverse("journal:timeline", kwargs=scope_kwargs(journal))


def scope_kwargs(journal: Journal) -> dict[str, str]:
    """URL kwargs of a journal's scope: tenant, session, lane, branch."""
    return {
        "tenant": journal.session.tenant.slug,
        "session": journal.session.key,
        "lane": journal.lane,
        "branch": journal.branch,
    }
