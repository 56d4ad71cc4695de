"""Where the stored ledger checks live: a row per journal (:class:`~ledger_app.models.StoredCheck`),
read by every web and worker process, so a restart or another worker never runs a check
again in a user's request (README, "Settings": ``LEDGER_CHECK_MAX_AGE_SECONDS``).

:func:`ledger_app.services.full_check.ledger_check` writes through :func:`check_store`;
:func:`ledger_app.services.full_check.ledger_warnings` reads through :func:`check_lookup` and
queues a check through :func:`check_claim`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F, OuterRef, Q, Subquery
from django.utils import timezone

from journal_app.models import Journal
from ledger_app.models import Fold, StoredCheck


def check_store(*, journal_id: int, state: list[Any], problems: list[str], at: datetime) -> None:
    """Store the check of ``journal_id`` run at ``state`` (replacing the previous one)."""
    StoredCheck.objects.update_or_create(
        journal_id=journal_id,
        defaults={"state": state, "problems": problems, "checked_at": at},
    )


def check_lookup(*, journal: Journal) -> tuple[list[Any], dict[str, Any] | None, dict[str, Any]]:
    """In one query: the ledger's state (``[head_seq, head_hash, last fold pk]``), its stored
    check (``{"state", "problems", "checked_at"}`` with an ISO time, or ``None``) and the
    current claim
    (``{"key", "at"}``, empty values when none)."""
    last = Fold.objects.filter(journal=OuterRef("pk")).order_by("-number").values("pk")[:1]
    row = (
        Journal.objects.filter(pk=journal.pk)
        .annotate(
            last_fold=Subquery(last),
            s_state=F("stored_check__state"),
            s_problems=F("stored_check__problems"),
            s_checked_at=F("stored_check__checked_at"),
            s_queued_state=F("stored_check__queued_state"),
            s_queued_at=F("stored_check__queued_at"),
        )
        .values(
            "last_fold", "s_state", "s_problems", "s_checked_at", "s_queued_state", "s_queued_at"
        )
        .first()
    ) or {}
    state = [journal.head_seq, journal.head_hash, row.get("last_fold")]
    stored = None
    if row.get("s_checked_at") is not None:
        stored = {
            "state": row["s_state"],
            "problems": row["s_problems"] or [],
            "checked_at": row["s_checked_at"].isoformat(),
        }
    return state, stored, {"key": row.get("s_queued_state") or "", "at": row.get("s_queued_at")}


def claim_fresh(claim: dict[str, Any], *, key: str, ttl_seconds: int) -> bool:
    """Whether ``claim`` (from :func:`check_lookup`) already names ``key`` and is younger
    than ``ttl_seconds``: the check is on its way, nothing to queue (no query)."""
    at = claim.get("at")
    return (
        claim.get("key") == key
        and at is not None
        and at > timezone.now() - timedelta(seconds=ttl_seconds)
    )


#: how a claim whose message never reached the broker starts (the broker's error follows)
NOT_QUEUED = "not queued: "
#: seconds before a page asks again after the broker could not be reached
NOT_QUEUED_RETRY_SECONDS = 60


def check_not_queued(*, journal_id: int, why: str) -> None:
    """Record on the claim that the check's message never reached the broker (``why``: the
    broker's error), so pages say so and ask again after :data:`NOT_QUEUED_RETRY_SECONDS`
    instead of trusting a check on its way."""
    StoredCheck.objects.filter(journal_id=journal_id).update(
        queued_state=(NOT_QUEUED + why)[:200], queued_at=timezone.now()
    )


def claim_not_queued(claim: dict[str, Any]) -> tuple[str, bool]:
    """Whether the claim (from :func:`check_lookup`) records a check never queued: the
    broker's error (``""`` when it does not) and whether it is too recent to ask again."""
    key = claim.get("key") or ""
    if not key.startswith(NOT_QUEUED):
        return "", False
    at = claim.get("at")
    recent = at is not None and at > timezone.now() - timedelta(seconds=NOT_QUEUED_RETRY_SECONDS)
    return key[len(NOT_QUEUED) :], recent


def check_claim(*, journal_id: int, key: str, ttl_seconds: int) -> bool:
    """Claim the queueing of a check for ``key`` (a ledger state, plus a period for the
    hourly re-check): ``True`` for the one caller that moved the claim to ``key``, ``False``
    when it already names ``key`` and is younger than ``ttl_seconds`` (the check is on its
    way). A compare-and-set on the row, so concurrent pages of any process queue it once."""
    now = timezone.now()
    fresh = Q(queued_state=key, queued_at__gt=now - timedelta(seconds=ttl_seconds))
    moved = (
        StoredCheck.objects.filter(journal_id=journal_id)
        .exclude(fresh)
        .update(queued_state=key, queued_at=now)
    )
    if moved:
        return True
    if StoredCheck.objects.filter(journal_id=journal_id).exists():
        return False
    try:
        with transaction.atomic():
            StoredCheck.objects.create(journal_id=journal_id, queued_state=key, queued_at=now)
    except IntegrityError:  # another process created it first: its claim stands
        return False
    return True
