"""P0 retirement review (DESIGN.md 5.2): one service for the UI and the API."""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785
from django.db import transaction
from django.utils import timezone

from journal_app.models import Journal, Membership
from ledger_app import reducer
from ledger_app.model_writer import FALLBACK_NOTE as FALLBACK_NOTE  # re-exported: views
from ledger_app.models import Fold, RetirementRequest
from ledger_app.services.common import ReviewError, ReviewForbidden, _verdicts, latest_fold


def can_review(user: Any, journal: Journal) -> bool:
    """True when ``user`` is a reviewer or admin of the journal's tenant (or a superuser)."""
    if getattr(user, "is_superuser", False):
        return True
    return Membership.objects.filter(
        user=user,
        tenant_id=journal.session.tenant_id,
        role__in=[Membership.Role.REVIEWER, Membership.Role.ADMIN],
    ).exists()


def ledger_review(
    *, request: RetirementRequest, reviewer: Any, decision: str, comment: str = ""
) -> Fold:
    """Approve or refuse a pending P0 retirement; applied to the ledger as a ``review`` fold.

    Args:
        request: the pending :class:`RetirementRequest`.
        reviewer: the deciding user (must be a reviewer or admin of the tenant).
        decision: ``"approve"`` (the fact becomes ``retired``) or ``"refuse"`` (it stays active).
        comment: free text, stored with who and when.

    Returns:
        The new review fold.

    Raises:
        ReviewForbidden: the user may not review in this tenant.
        ReviewError: the request is not pending, or ``decision`` is not approve/refuse.
    """
    if decision not in ("approve", "refuse"):
        raise ReviewError(f"decision must be 'approve' or 'refuse', got {decision!r}")
    journal = request.journal
    if not can_review(reviewer, journal):
        raise ReviewForbidden(
            f"{reviewer} is not a reviewer of tenant {journal.session.tenant.slug}"
        )
    with transaction.atomic():
        journal = Journal.objects.select_for_update().get(pk=journal.pk)
        request = RetirementRequest.objects.select_for_update().get(pk=request.pk)
        if request.status != RetirementRequest.Status.PENDING:
            raise ReviewError(f"this retirement was already {request.status}")
        previous = latest_fold(journal)
        now = timezone.now()
        op = {
            "op": "review",
            "id": request.fact_id,
            "decision": decision,
            "reviewer": reviewer.get_username(),
            "comment": comment,
            "at": now.isoformat(),
        }
        delta = {
            "fold": previous.number + 1,
            "revision": journal.head_seq,
            "evidence": {},
            "ops": [op],
        }
        reduction = reducer.apply_delta(previous.state_dict, delta)
        if reduction.rejected:
            raise ReviewError(reduction.rejected[0].reason)
        state = reduction.state
        fold = Fold.objects.create(
            journal=journal,
            number=previous.number + 1,
            kind=Fold.Kind.REVIEW,
            previous=previous,
            revision=journal.head_seq,
            range_hash=hashlib.sha256(f"review:{request.pk}".encode()).hexdigest(),
            outcome=Fold.Outcome.ACCEPTED,
            writer=f"reviewer:{reviewer.get_username()}",
            manifest={"review": {"request": request.pk, "fact_id": request.fact_id, **op}},
            delta=rfc8785.dumps({**delta, "verdicts": _verdicts(reduction)}).decode("utf-8"),
            state=reducer.state_bytes(state).decode("utf-8"),
            state_hash=reducer.state_hash(state),
        )
        request.status = (
            RetirementRequest.Status.APPROVED
            if decision == "approve"
            else RetirementRequest.Status.REFUSED
        )
        request.reviewer = reviewer
        request.comment = comment
        request.decided_at = now
        request.decided_in = fold
        request.save()
    return fold
