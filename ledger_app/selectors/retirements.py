"""Reads of the P0 retirement requests: the review queue of a user's tenants or of a tenant
(the API's), one request, who may decide it, and its audit trail.

A request reached by id is filtered by the user's tenants or the key's tenant and answers
``Http404`` outside them.
"""

from __future__ import annotations

from django.db.models import Case, QuerySet, When
from django.http import Http404

from audit_app.models import AuditEvent
from journal_app.models import Journal, Membership, Tenant
from journal_app.selectors import User, tenants_for_user
from ledger_app.models import RetirementRequest


def _retirements() -> QuerySet[RetirementRequest]:
    return RetirementRequest.objects.select_related(
        "journal__session__tenant", "requested_in", "decided_in", "reviewer"
    ).defer(
        "requested_in__manifest",
        "requested_in__delta",
        "requested_in__state",
        "decided_in__manifest",
        "decided_in__delta",
        "decided_in__state",
    )


def retirements_for_user(user: User, *, tenant: str = "", status: str = "") -> QuerySet:
    """P0 retirement requests of the user's tenants, pending first, then newest.

    Args:
        tenant: a tenant slug to narrow to.
        status: ``pending``, ``approved`` or ``refused`` (anything else: all).
    """
    qs = _retirements().filter(journal__session__tenant__in=tenants_for_user(user))
    if tenant:
        qs = qs.filter(journal__session__tenant__slug=tenant)
    if status in RetirementRequest.Status.values:
        qs = qs.filter(status=status)
    return qs.order_by(
        Case(When(status=RetirementRequest.Status.PENDING, then=0), default=1),
        "-created_at",
        "-pk",
    )


def retirement_for_user(user: User, pk: int) -> RetirementRequest:
    """The retirement request ``pk`` if the user may read it; ``Http404`` otherwise."""
    request = retirements_for_user(user).filter(pk=pk).first()
    if request is None:
        raise Http404("no such retirement request")
    return request


def retirements_for_tenant(
    tenant: Tenant,
    *,
    journal: Journal | None = None,
    status: str | None = None,
    fact_id: str | None = None,
) -> QuerySet:
    """P0 retirement requests of ``tenant`` (of ``journal``, ``status``, ``fact_id`` when
    given), newest first."""
    qs = _retirements().filter(journal__session__tenant=tenant)
    if journal is not None:
        qs = qs.filter(journal=journal)
    if fact_id is not None:
        qs = qs.filter(fact_id=fact_id)
    if status:
        qs = qs.filter(status=status)
    return qs.order_by("-created_at", "-pk")


def retirement_for_tenant(tenant: Tenant, pk: int) -> RetirementRequest:
    """The retirement request ``pk`` of ``tenant``; ``Http404`` otherwise (other tenants too)."""
    request = retirements_for_tenant(tenant).filter(pk=pk).first()
    if request is None:
        raise Http404("no such retirement request")
    return request


def retirement_deciders(tenant_id: int, limit: int = 5) -> list[str]:
    """Usernames of the tenant's reviewers and admins (who may decide a P0 retirement), at
    most ``limit``, for the note a user who may not decide sees instead of the buttons."""
    return list(
        Membership.objects.filter(
            tenant_id=tenant_id, role__in=[Membership.Role.REVIEWER, Membership.Role.ADMIN]
        )
        .order_by("user__username")
        .values_list("user__username", flat=True)[:limit]
    )


def retirement_events(request: RetirementRequest) -> list[AuditEvent]:
    """The audit events of a retirement request (decisions and refused attempts), in order."""
    return list(
        AuditEvent.objects.filter(
            tenant_id=request.journal.session.tenant_id,
            object_type="retirement",
            object_id=str(request.pk),
        ).order_by("created_at", "pk")
    )
