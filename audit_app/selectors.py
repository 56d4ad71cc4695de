"""Reads of the audit app: the audit log for its page and the nav (README, "Audit log"), and
the comment counts the timeline and the facts page show (docs/architecture.md, "Layers")."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, time, timedelta
from typing import Any

from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from audit_app.models import AuditEvent, Comment
from journal_app.models import Entry, Journal, Membership, Tenant


class AuditFilterError(ValueError):
    """A filter value of the audit log is unusable (the message names the field)."""


def _day(name: str, value: str) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise AuditFilterError(f"{name}: {value!r} is not a date (YYYY-MM-DD)") from None


def audit_events(
    *,
    tenant: Tenant,
    action: str = "",
    actor: str = "",
    session: str = "",
    since: str = "",
    until: str = "",
) -> QuerySet[AuditEvent]:
    """The tenant's audit events, newest first, narrowed by the filters.

    Args:
        action: a dotted action or its prefix (``review`` matches ``review.approve``).
        actor: a username, or part of one (case-insensitive); ``system`` for events without
            a user (commands run on the server).
        session: a session key: events whose object names it (``tenant/key``, a fact or an
            entry of it through ``details["session"]``, case-insensitive).
        since, until: days (``YYYY-MM-DD``, the server's time zone), both included.

    Raises:
        AuditFilterError: a day that is not a date; nothing is read.
    """
    first, last = _day("since", since), _day("until", until)
    qs = AuditEvent.objects.filter(tenant=tenant).select_related("actor")
    if action:
        qs = qs.filter(action__startswith=action)
    if actor == "system":
        qs = qs.filter(actor__isnull=True, actor_name="")
    elif actor:
        qs = qs.filter(actor_name__icontains=actor)
    if session:
        qs = qs.filter(
            Q(object_id__iexact=f"{tenant.slug}/{session}")
            | Q(object_id__istartswith=f"{tenant.slug}/{session}/")
            | Q(details__session=session)
        )
    zone = timezone.get_current_timezone()
    if first:
        qs = qs.filter(created_at__gte=datetime.combine(first, time.min, tzinfo=zone))
    if last:
        end = datetime.combine(last + timedelta(days=1), time.min, tzinfo=zone)
        qs = qs.filter(created_at__lt=end)
    return qs.order_by("-created_at", "-pk")


def audit_tenants(user: Any) -> list[str]:
    """Slugs of the tenants whose audit log ``user`` may read (their admin memberships: the
    audit log view's rule), for the nav entry."""
    if not getattr(user, "is_authenticated", False):
        return []
    return list(
        Membership.objects.filter(user=user, role=Membership.Role.ADMIN)
        .order_by("tenant__slug")
        .values_list("tenant__slug", flat=True)
    )


def audit_nav(request: Any) -> dict[str, Any]:
    """Template context processor: ``audit_tenants`` for the nav's "Audit log" entry.

    Read at login (:func:`audit_nav_remember`, called by the login page) and kept in the
    login session, so a page pays no query for the nav; a membership change shows from the
    next login. A session without it (logged in another way) shows no entry."""
    session = getattr(request, "session", None)
    user = getattr(request, "user", None)
    kept = session.get(NAV_KEY) if session is not None else None
    if not isinstance(kept, dict) or user is None or kept.get("user") != user.pk:
        return {"audit_tenants": []}
    return {"audit_tenants": kept["tenants"]}


def audit_nav_remember(request: Any, user: Any) -> None:
    """Keep the tenants whose audit log ``user`` may read in the login session (one query)."""
    request.session[NAV_KEY] = {"user": user.pk, "tenants": audit_tenants(user)}


NAV_KEY = "ledgerkeep_audit_tenants"


def comment_counts(
    *, entry_ids: Sequence[int] = (), journal: Journal | None = None
) -> dict[Any, int]:
    """Comment counts by entry id (``entry_ids``) or by fact id (``journal``); one query.

    Args:
        entry_ids: entry pks (the timeline's page); ``{entry pk: count}``, entries without a
            comment absent.
        journal: when given, counts the journal's fact comments instead:
            ``{fact id: count}``.
    """
    if journal is not None:
        rows = (
            Comment.objects.filter(journal=journal)
            .exclude(fact_id="")
            .values("fact_id")
            .annotate(n=Count("pk"))
            .values_list("fact_id", "n")
        )
        return dict(rows)
    if not entry_ids:
        return {}
    return dict(
        Comment.objects.filter(entry_id__in=list(entry_ids))
        .values("entry_id")
        .annotate(n=Count("pk"))
        .values_list("entry_id", "n")
    )


def entry_comments(entry: Entry) -> list[Comment]:
    """The entry's comments, oldest first, with their authors; one query."""
    return list(
        Comment.objects.filter(entry=entry).select_related("author").order_by("created_at", "pk")
    )
