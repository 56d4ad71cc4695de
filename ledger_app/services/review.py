"""P0 retirement review (docs/design.md 5.2 and 9): THE one service, called by the UI and the API.

:func:`retirement_review` checks the actor's permission in the request's tenant, requires
a comment, applies the decision to the ledger as a ``review`` fold and writes the audit
event, all in one transaction. The htmx view and the API operation both call it and answer
with the status of the error it raises (``config/api.py`` maps it once for the API), so the
same decision gets the same answer on both.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.db import transaction
from django.utils import timezone

from audit_app.roles import REVIEW_PERMISSION, tenant_role
from audit_app.services import COMMENT_MAX_CHARS, audit_record
from journal_app.auth import ApiCaller
from journal_app.models import ApiKey, Journal, Membership, Tenant
from ledger_app.delta_manifest import delta_make, manifest_make
from ledger_app.errors import ReviewError, ReviewForbidden
from ledger_app.models import Fold, RetirementRequest
from ledger_app.services.pins_check import instructions_check, pins_to_check
from ledger_app.services.state import latest_fold
from ledger_app.services.store import active_tokens, delta_apply, fold_store, pins_count

DECISIONS = ("approve", "refuse")
_REVIEW_ROLES = (Membership.Role.REVIEWER, Membership.Role.ADMIN)


class ReviewCommentInvalid(ReviewError):
    """A decision without a comment, or with one too long or holding NUL (HTTP 400)."""

    status = 400
    code = "invalid_comment"


class ReviewDecisionInvalid(ReviewError):
    """A decision that is neither ``approve`` nor ``refuse`` (HTTP 422, like the API's schema)."""

    status = 422
    code = "invalid_decision"


def _key_of(actor: Any) -> ApiKey | None:
    if isinstance(actor, ApiCaller):
        return actor.key
    return actor if isinstance(actor, ApiKey) else None


def review_actor(actor: Any, tenant: Tenant) -> tuple[Any, str | None]:
    """The user a review by ``actor`` is recorded under, and why it is refused (or ``None``).

    Args:
        actor: a user (the UI), an :class:`~journal_app.models.ApiKey` or the API's
            :class:`~journal_app.auth.ApiCaller`. A key acts as its reviewer user: it must
            be a ``reviewer`` key of the tenant and name a user.
        tenant: the tenant of the retirement request.

    Returns:
        ``(user, refusal)``: ``refusal`` is ``None`` when the user holds the role permission
        ``audit_app.review_retirement`` *and* is a reviewer or admin of this tenant
        (superusers are admins everywhere); ``user`` is ``None`` for a key without one.
    """
    key = _key_of(actor)
    if key is not None:
        if key.role != ApiKey.Role.REVIEWER:
            return key.user, (
                f"key {key.prefix} is a {key.role} key; deciding a P0 retirement needs a "
                "reviewer key"
            )
        if key.user is None:
            return None, (f"key {key.prefix} names no reviewer user to record the decision under")
        if key.tenant_id != tenant.pk:
            return key.user, f"key {key.prefix} belongs to another tenant"
        actor = key.user
    role = tenant_role(actor, tenant.pk)
    if not (getattr(actor, "is_active", False) and actor.has_perm(REVIEW_PERMISSION)) or (
        role not in _REVIEW_ROLES
    ):
        return actor, (
            f"{actor.get_username()} is not a reviewer of tenant {tenant.slug} (role: "
            f"{role or 'none'}): only reviewers and admins decide P0 retirements"
        )
    return actor, None


def can_review(user: Any, journal: Journal) -> bool:
    """True when ``user`` (or key) may decide P0 retirements of the journal's tenant."""
    return review_actor(user, journal.session.tenant)[1] is None


def _comment(comment: str) -> str:
    text = (comment or "").strip()
    if not text:
        raise ReviewCommentInvalid("a decision needs a comment saying why", field="comment")
    if len(text) > COMMENT_MAX_CHARS:
        raise ReviewCommentInvalid(
            f"a comment is at most {COMMENT_MAX_CHARS:,} characters", field="comment"
        )
    if "\x00" in text:
        raise ReviewCommentInvalid("a comment cannot hold NUL characters", field="comment")
    return text


def retirement_review(
    *, request: RetirementRequest, actor: Any, decision: str, comment: str
) -> Fold:
    """Approve or refuse a pending P0 retirement; the one review path (docs/design.md 5.2, 9).

    Checks, in this order: the actor's permission (:func:`review_actor`), the decision, the
    comment; then, holding the journal's row lock, that the request is still pending. The
    decision becomes a ``review`` fold (the reducer applies the ``review`` op: ``approve``
    retires the fact, ``refuse`` keeps it active); the request records who, when, why and
    in which fold; the audit event ``review.approve`` / ``review.refuse`` (target
    ``retirement`` ``<pk>``, details ``comment``, ``fold``, ``fact_id``) is written in the
    same transaction. A refused actor is logged as ``review.denied`` and nothing else is
    written.

    Args:
        request: the :class:`RetirementRequest` to decide.
        actor: the deciding user, or an API key / ``ApiCaller`` acting as its reviewer user.
        decision: ``"approve"`` or ``"refuse"``.
        comment: why (required; at most ``COMMENT_MAX_CHARS`` characters, stripped).

    Returns:
        The new review fold.

    Raises:
        ReviewForbidden: (403) the actor may not review in this tenant, or a key is not a
            reviewer key or names no user.
        ReviewDecisionInvalid: (422, field ``decision``) not approve/refuse.
        ReviewCommentInvalid: (400, field ``comment``) empty, too long or holding NUL.
        ReviewError: (409 ``review_conflict``) the request is no longer pending, or the
            reducer refused the op.
    """
    journal = request.journal
    tenant = journal.session.tenant
    label = f"{journal.scope_label} fact {request.fact_id}"
    user, refusal = review_actor(actor, tenant)
    if refusal is not None:
        key = _key_of(actor)
        audit_record(
            actor=user,
            tenant=tenant,
            action="review.denied",
            object_type="retirement",
            object_id=str(request.pk),
            object_label=label,
            details={
                "decision": decision,
                "role": tenant_role(user, tenant.pk) if user is not None else None,
                **({"key": key.prefix} if key is not None else {}),
            },
        )
        raise ReviewForbidden(refusal)
    if decision not in DECISIONS:
        raise ReviewDecisionInvalid(
            f"decision must be 'approve' or 'refuse', got {decision!r}", field="decision"
        )
    comment = _comment(comment)
    with transaction.atomic():
        journal = Journal.objects.select_for_update().get(pk=journal.pk)
        request = RetirementRequest.objects.select_for_update().get(pk=request.pk)
        if request.status != RetirementRequest.Status.PENDING:
            raise ReviewError(f"this retirement was already {request.status}")
        previous = latest_fold(journal)
        assert previous is not None  # a retirement request is raised by a fold
        now = timezone.now()
        op = {
            "op": "review",
            "id": request.fact_id,
            "decision": decision,
            "reviewer": user.get_username(),
            "comment": comment,
            "at": now.isoformat(),
        }
        delta = delta_make(fold=previous.number + 1, revision=journal.head_seq, ops=[op])
        applied = delta_apply(journal, previous, delta)
        if applied.reduction.rejected:
            raise ReviewError(applied.reduction.rejected[0].reason)
        fold = fold_store(
            journal=journal,
            applied=applied,
            kind=Fold.Kind.REVIEW,
            previous=previous,
            revision=journal.head_seq,
            range_hash=hashlib.sha256(f"review:{request.pk}".encode()).hexdigest(),
            outcome=Fold.Outcome.ACCEPTED,
            writer=f"reviewer:{user.get_username()}",
            manifest=manifest_make(
                review={"request": request.pk, "fact_id": request.fact_id, **op},
                outcome=Fold.Outcome.ACCEPTED,
                previous_fold=previous.number,
                revision=journal.head_seq,
                writer=f"reviewer:{user.get_username()}",
                verifier="reducer-rules",
                instructions=instructions_check(
                    journal,
                    {"facts": pins_to_check(journal, applied)},
                    pins_total=pins_count(journal, applied),
                ),
                tokens={"ledger_active": active_tokens(journal, applied)},
            ),
        )
        request.status = (
            RetirementRequest.Status.APPROVED
            if decision == "approve"
            else RetirementRequest.Status.REFUSED
        )
        request.reviewer = user
        request.comment = comment
        request.decided_at = now
        request.decided_in = fold
        request.save()
        audit_record(
            actor=user,
            tenant=tenant,
            action=f"review.{decision}",
            object_type="retirement",
            object_id=str(request.pk),
            object_label=label,
            details={
                "comment": comment,
                "fold": fold.number,
                "fact_id": request.fact_id,
                **({"key": key.prefix} if (key := _key_of(actor)) is not None else {}),
            },
        )
    return fold
