"""The ledger's reads behind the session pages: the sessions list, a session's overview and
the ``sessions`` command (docs/architecture.md, "Layers").

These pages show journal rows with ledger figures (fold counts, pending P0 reviews, open
obligations and blockers, failed fold attempts), so their reads live here, with the ledger's
models, and import them directly: a renamed ledger column breaks this module, never
:mod:`journal_app`. The journal's own reads (tenant filter, entries, costs) come from
:mod:`journal_app.selectors`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.db.models import (
    Count,
    F,
    IntegerField,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce
from django.utils import timezone

from audit_app.models import AuditEvent
from journal_app.models import Entry, Journal, Session, Tenant
from journal_app.selectors import User, tenants_for_user
from ledger_app.models import Fold, FoldAttempt, LedgerFact, RetirementRequest


def _count_subquery(qs: QuerySet[Any], group: str) -> Coalesce:
    """The rows of ``qs`` per ``group`` (a correlated subquery; 0 for none)."""
    counted = qs.order_by().values(group).annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def _tokens_subquery(qs: QuerySet[Entry], group: str) -> Coalesce:
    """The summed ``token_count`` of the entries ``qs`` per ``group`` (0 for none)."""
    summed = qs.order_by().values(group).annotate(n=Sum("token_count")).values("n")
    return Coalesce(Subquery(summed, output_field=IntegerField()), Value(0))


#: the sessions list's activity filter: days since the last entry (``idle``: more than 30).
ACTIVITY_DAYS = {"day": 1, "week": 7, "month": 30, "idle": 30}


ACTIVITY_LABELS = {
    "day": "active in the last 24 hours",
    "week": "active in the last 7 days",
    "month": "active in the last 30 days",
    "idle": "idle for more than 30 days",
}


#: the sessions list's sort keys: ``?sort=`` value -> ORDER BY (``-`` is descending).
SESSION_SORTS = {
    "newest": ("-created_at", "pk"),
    "key": ("key", "pk"),
    "entries": ("-entry_count", "pk"),
    "tokens": ("-token_total", "pk"),
    "folds": ("-fold_count", "pk"),
    "activity": ("-last_activity", "pk"),
}


def sessions_for_user(
    user: User,
    q: str = "",
    *,
    tenant: str = "",
    lane: str = "",
    activity: str = "",
    sort: str = "newest",
) -> QuerySet[Session]:
    """Sessions of the user's tenants, newest first, annotated for the sessions list.

    Args:
        q: matches key, title or the text of a fact in any fold of the session's ledger,
            case-insensitively.
        sort: a key of :data:`SESSION_SORTS` (unknown: newest first).
        tenant: a tenant slug (one of the user's; another answers nothing).
        lane: sessions with a journal of this lane.
        activity: a key of :data:`ACTIVITY_DAYS` (by the time of the newest entry).

    Annotations: ``entry_count`` (the sum of the journals' heads: seq is gapless from 1, so a
    head *is* the journal's entry count; no scan of the entries), ``head_seq`` (highest head),
    ``journal_count``, and correlated subqueries ``fold_count``, ``pending_reviews`` (P0
    retirements awaiting a reviewer) and ``last_activity`` (newest head entry's time; one
    index lookup per journal). Subqueries, so folds and requests never multiply the journal
    join. A page costs a fixed number of queries; open obligations come from
    :func:`open_obligations_by_session`.
    """
    qs = Session.objects.filter(tenant__in=tenants_for_user(user)).select_related("tenant")
    q = q.strip()
    if q:
        # any version of any fact of the session's ledger (every version is a row)
        in_facts = LedgerFact.objects.filter(text__icontains=q).values("journal__session_id")
        qs = qs.filter(Q(key__icontains=q) | Q(title__icontains=q) | Q(pk__in=in_facts))
    if tenant:
        qs = qs.filter(tenant__slug=tenant)
    if lane:
        qs = qs.filter(pk__in=Journal.objects.filter(lane=lane).values("session_id"))
    newest = (
        Entry.objects.filter(journal__session=OuterRef("pk"), seq=F("journal__head_seq"))
        .order_by("-created_at")
        .values("created_at")[:1]
    )
    qs = qs.annotate(
        entry_count=Coalesce(Sum("journals__head_seq"), Value(0)),
        head_seq=Coalesce(Max("journals__head_seq"), Value(0)),
        journal_count=Count("journals"),
        fold_count=_count_subquery(
            Fold.objects.filter(journal__session=OuterRef("pk")), "journal__session"
        ),
        pending_reviews=_count_subquery(
            RetirementRequest.objects.filter(journal__session=OuterRef("pk"), status="pending"),
            "journal__session",
        ),
        source_at=Max("journals__last_source_at"),
        last_activity=Coalesce(Max("journals__last_source_at"), Subquery(newest)),
        token_total=_tokens_subquery(
            Entry.objects.filter(journal__session=OuterRef("pk")), "journal__session"
        ),
    )
    if activity in ACTIVITY_DAYS:
        since = timezone.now() - timedelta(days=ACTIVITY_DAYS[activity])
        if activity == "idle":
            qs = qs.filter(Q(last_activity__lt=since) | Q(last_activity__isnull=True))
        else:
            qs = qs.filter(last_activity__gte=since)
    return qs.order_by(*SESSION_SORTS.get(sort, SESSION_SORTS["newest"]))


def session_totals(sessions: QuerySet[Session]) -> dict[str, int]:
    """Totals over the (filtered) sessions of :func:`sessions_for_user`: ``sessions``,
    ``entries``, ``tokens``, ``folds``, ``open_obligations`` and ``blockers`` (the active
    facts of the current ledgers). Two queries, whatever the number of sessions."""
    sums = sessions.order_by().aggregate(
        sessions=Count("pk", distinct=True),
        entries=Sum("entry_count"),
        tokens=Sum("token_total"),
        folds=Sum("fold_count"),
    )
    by_category = dict(
        LedgerFact.objects.filter(
            journal__session__in=sessions.order_by().values("pk"),
            until__isnull=True,
            lifecycle="active",
            category__in=["open_obligation", "blocker"],
        )
        .order_by()
        .values("category")
        .annotate(n=Count("pk"))
        .values_list("category", "n")
    )
    return {
        **{k: int(v or 0) for k, v in sums.items()},
        "open_obligations": by_category.get("open_obligation", 0),
        "blockers": by_category.get("blocker", 0),
    }


def latest_folds(journal_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """The latest fold of each journal: ``{journal_id: {"id", "number", "outcome", "kind",
    "state_hash", "open_obligations", "blockers"}}`` (journals without a fold are absent).

    Two queries: the latest folds' small columns, then the active ``open_obligation`` and
    ``blocker`` facts counted per journal from the current fact rows.
    """
    if not journal_ids:
        return {}
    top = Fold.objects.filter(journal=OuterRef("journal")).order_by("-number").values("number")[:1]
    rows = list(
        Fold.objects.filter(journal_id__in=journal_ids, number=Subquery(top)).values(
            "id", "journal_id", "number", "outcome", "kind", "state_hash"
        )
    )
    # the current facts are rows: one grouped count, no state parsed
    counts: dict[tuple[int, str], int] = {
        (j, c): n
        for j, c, n in LedgerFact.objects.filter(
            journal_id__in=[r["journal_id"] for r in rows],
            until__isnull=True,
            lifecycle="active",
            category__in=["open_obligation", "blocker"],
        )
        .order_by()
        .values("journal_id", "category")
        .annotate(n=Count("pk"))
        .values_list("journal_id", "category", "n")
    }
    out = {}
    for r in rows:
        j = r["journal_id"]
        r["open_obligations"] = counts.get((j, "open_obligation"), 0)
        r["blockers"] = counts.get((j, "blocker"), 0)
        out[r["journal_id"]] = r
    return out


def open_obligations_by_session(sessions: Sequence[Session]) -> dict[int, int]:
    """Active open obligations per session (summed over its journals' latest folds).

    Three queries for any number of sessions: the journals, then :func:`latest_folds`.
    """
    journals = dict(
        Journal.objects.filter(session__in=[s.pk for s in sessions]).values_list("id", "session_id")
    )
    counts: dict[int, int] = {}
    for journal_id, fold in latest_folds(list(journals)).items():
        sid = journals[journal_id]
        counts[sid] = counts.get(sid, 0) + fold["open_obligations"]
    return counts


def session_journals(session: Session) -> list[Journal]:
    """The session's journals (lanes and branches) with ``fold_count``, ``pending_reviews``
    and ``latest`` (see :func:`latest_folds`, or ``None``); a fixed number of queries."""
    journals = list(
        session.journals.annotate(
            fold_count=_count_subquery(Fold.objects.filter(journal=OuterRef("pk")), "journal"),
            pending_reviews=_count_subquery(
                RetirementRequest.objects.filter(journal=OuterRef("pk"), status="pending"),
                "journal",
            ),
        ).order_by("lane", "branch")
    )
    latest = latest_folds([j.pk for j in journals])
    for j in journals:
        j.session = session  # no query per journal for scope_label
        j.latest = latest.get(j.pk)
    return journals


def fold_points(journal: Journal) -> list[dict[str, Any]]:
    """Every fold's number, kind, outcome, end seq and active ledger tokens, for the chart.

    Reads ``manifest.tokens.ledger_active`` in the database (``KT``), never the manifest
    itself (it lists every covered entry hash).
    """
    rows = (
        Fold.objects.filter(journal=journal)
        .order_by("number")
        .values("number", "kind", "outcome", "seq_end", "revision")
        .annotate(ledger_active=KT("manifest__tokens__ledger_active"))
    )
    out = []
    for r in rows:
        value = r["ledger_active"]
        r["ledger_active"] = int(value) if value not in (None, "") else None
        r["seq"] = r["seq_end"] or r["revision"]
        out.append(r)
    return out


def failure_summary(session: Session, journals: Sequence[Journal]) -> dict[str, Any]:
    """Failed and rejected model work of a session: ``attempts`` (the newest
    20 failed fold attempts: the model was unreachable, no fold stored; with ``journal``),
    ``contexts`` (the newest :data:`CONTEXT_FAILURES_SHOWN` context requests that failed, the
    ``context.failed`` audit events: ``event``, ``journal`` and the event's details: surface,
    revision, budgets, cause, suggested budgets) and ``contexts_total`` (all of them),
    ``calls`` / ``calls_total`` (model calls the upstream did not answer, proxied:
    ``model_call.failed``, with status and error), ``by_journal`` ({journal pk:
    {"failed_attempts", "fallbacks", "with_rejections", "context_failures",
    "model_call_failures" (the last two when any)}}) and ``total`` (the sum of the counts).
    Five queries."""
    ids = [j.pk for j in journals]
    by_journal = {i: {"failed_attempts": 0, "fallbacks": 0, "with_rejections": 0} for i in ids}
    attempts = list(
        FoldAttempt.objects.filter(journal_id__in=ids, outcome="failed")
        .select_related("journal")
        .order_by("-created_at", "-pk")
    )
    for a in attempts:
        by_journal[a.journal_id]["failed_attempts"] += 1
    for jid, outcome, rejected in (
        Fold.objects.filter(journal_id__in=ids)
        .filter(Q(outcome="fallback") | Q(ops_rejected__gt=0))
        .values_list("journal_id", "outcome", "ops_rejected")
    ):
        by_journal[jid]["fallbacks"] += outcome == "fallback"
        by_journal[jid]["with_rejections"] += bool(rejected)
    newest = _failed_calls(ids).order_by("-created_at", "-pk")
    contexts = list(newest.filter(action="context.failed")[:CONTEXT_FAILURES_SHOWN])
    calls = list(newest.filter(action="model_call.failed")[:CONTEXT_FAILURES_SHOWN])
    by_id = {str(j.pk): j for j in journals}
    for (jid, action), n in failed_call_counts(ids).items():
        by_journal[jid][_FAILED_CALLS[action]] = n
    total = sum(sum(v.values()) for v in by_journal.values())
    return {
        "attempts": attempts[:20],
        "by_journal": by_journal,
        "total": total,
        "contexts": [{"event": e, "journal": by_id[e.object_id], **e.details} for e in contexts],
        "contexts_total": sum(v.get("context_failures", 0) for v in by_journal.values()),
        "calls": [{"event": e, "journal": by_id[e.object_id], **e.details} for e in calls],
        "calls_total": sum(v.get("model_call_failures", 0) for v in by_journal.values()),
    }


#: the newest failed context requests (and failed model calls) a session's overview lists
CONTEXT_FAILURES_SHOWN = 20
#: audit actions of failed calls -> their count's key in ``by_journal``
_FAILED_CALLS = {"context.failed": "context_failures", "model_call.failed": "model_call_failures"}
#: the audit actions of a failed call: a context request not built, a model call unanswered
FAILED_CALL_ACTIONS = tuple(_FAILED_CALLS)


def _failed_calls(journal_ids: Sequence[int]) -> QuerySet[AuditEvent]:
    """The failed-call events (:data:`FAILED_CALL_ACTIONS`) of these journals."""
    return AuditEvent.objects.filter(
        action__in=FAILED_CALL_ACTIONS,
        object_type="journal",
        object_id__in=[str(i) for i in journal_ids],
    )


def failed_call_counts(journal_ids: Sequence[int]) -> dict[tuple[int, str], int]:
    """``{(journal pk, action): count}`` of the failed calls of these journals (the
    ``context.failed`` and ``model_call.failed`` events): what the session overview and the
    dashboard count. One query."""
    rows = _failed_calls(journal_ids).values_list("object_id", "action").annotate(n=Count("pk"))
    return {(int(object_id), action): n for object_id, action, n in rows.order_by()}


def journal_summaries(tenant: str = "") -> list[dict[str, Any]]:
    """Every journal (of ``tenant`` when given), for the ``sessions`` command: ``scope``
    (tenant/session/lane/branch), ``title``, ``entries`` (the head seq: seqs are gapless),
    ``tokens`` (ours, summed), ``folds`` and ``last_activity`` (the source's time of the
    newest entry, else its import time; ``None`` when empty). A fixed number of queries.

    Raises:
        Tenant.DoesNotExist: ``tenant`` names no tenant.
    """
    qs = Journal.objects.select_related("session__tenant")
    if tenant:
        qs = qs.filter(session__tenant=Tenant.objects.get(slug=tenant))
    newest = Entry.objects.filter(journal=OuterRef("pk"), seq=OuterRef("head_seq")).values(
        "created_at"
    )
    rows = qs.annotate(
        fold_count=_count_subquery(Fold.objects.filter(journal=OuterRef("pk")), "journal"),
        token_total=_tokens_subquery(Entry.objects.filter(journal=OuterRef("pk")), "journal"),
        newest_at=Coalesce(F("last_source_at"), Subquery(newest[:1])),
    ).order_by("session__tenant__slug", "session__key", "lane", "branch")
    return [
        {
            "scope": f"{j.session.tenant.slug}/{j.session.key}/{j.lane}/{j.branch}",
            "title": j.session.shown_title,
            "entries": j.head_seq,
            "tokens": j.token_total,
            "folds": j.fold_count,
            "last_activity": j.newest_at,
        }
        for j in rows
    ]
