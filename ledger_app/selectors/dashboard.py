"""The dashboard's reads: per session of one tenant, tokens, computed cost, folds, fallbacks,
failed fold attempts and blockers (README "The UI", Dashboard).

One query for the sessions (:func:`ledger_app.selectors.sessions.sessions_for_user`, annotated), one
per count grouped by session, and the cost (cached per journal head,
:func:`journal_app.selectors.session_costs`): a fixed number of queries whatever the number
of sessions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db.models import Count

from journal_app import selectors as journal_selectors
from journal_app.models import Journal, Session
from journal_app.pricing import cost_sum, cost_text
from ledger_app.models import Fold, FoldAttempt, LedgerFact
from ledger_app.selectors.sessions import failed_call_counts, sessions_for_user

#: the dashboard's sort keys -> the row attribute (largest first)
DASHBOARD_SORTS = {
    "tokens": "tokens",
    "cost": "cost",
    "folds": "folds",
    "fallbacks": "fallbacks",
    "failed": "failed",
    "failed_calls": "failed_calls",
    "blockers": "blockers",
}


@dataclass
class SessionRow:
    """One session's figures on the dashboard."""

    session: Session
    tokens: int = 0
    entries: int = 0
    cost: Decimal | None = None  # USD of the priced calls; None: no priced call
    unpriced: int = 0  # calls whose model has no price (journal_app.pricing.CostTotal)
    cost_text: str = ""  # "$1.2300 + 4 unpriced calls" (journal_app.pricing.cost_text)
    cost_short: str = ""  # the same to the cent, for the chart: "$1.23 + 4 unpriced calls"
    folds: int = 0
    fallbacks: int = 0
    failed: int = 0
    failed_calls: int = 0  # failed context requests and model calls (the overview lists them)
    blockers: int = 0


@dataclass
class Dashboard:
    """Rows (sorted), their totals, and whether costs are computed (a price table is set)."""

    rows: list[SessionRow] = field(default_factory=list)
    totals: dict[str, Any] = field(default_factory=dict)
    priced: bool = False


def _by_session(qs: Any) -> dict[int, int]:
    return dict(
        qs.order_by()
        .values("journal__session_id")
        .annotate(n=Count("pk"))
        .values_list("journal__session_id", "n")
    )


def tenant_dashboard(
    *, user: Any, tenant: str = "", activity: str = "", sort: str = "tokens"
) -> Dashboard:
    """The figures of every session ``user`` may read (of tenant ``tenant`` when given;
    ``activity`` as on the sessions list), sorted by ``sort`` (a key of
    :data:`DASHBOARD_SORTS`, largest first; unknown: tokens).

    Fallbacks are folds whose writer fell back to mechanical facts (outcome ``fallback``);
    failed are fold attempts that stored nothing (model unreachable); failed calls are the
    context requests that could not be built and the proxied model calls the upstream did not
    answer (:func:`~ledger_app.selectors.sessions.failed_call_counts`, listed on each session's overview); blockers are the active
    ``blocker`` facts of the current ledgers. Costs are computed from the provider-reported
    usage and ``LEDGER_MODEL_PRICES``.
    """
    sessions = sessions_for_user(user, tenant=tenant, activity=activity)
    listed = list(sessions)
    ids = [s.pk for s in listed]
    fallbacks = _by_session(
        Fold.objects.filter(journal__session__in=ids, outcome=Fold.Outcome.FALLBACK)
    )
    failed = _by_session(
        FoldAttempt.objects.filter(journal__session__in=ids, outcome=FoldAttempt.Outcome.FAILED)
    )
    blockers = _by_session(
        LedgerFact.objects.filter(
            journal__session__in=ids, until__isnull=True, lifecycle="active", category="blocker"
        )
    )
    session_of = dict(Journal.objects.filter(session__in=ids).values_list("pk", "session_id"))
    failed_calls: dict[int, int] = {}
    for (jid, _), n in failed_call_counts(list(session_of)).items():
        failed_calls[session_of[jid]] = failed_calls.get(session_of[jid], 0) + n
    priced = bool(journal_selectors.model_prices())
    costs = journal_selectors.session_costs(listed) if priced else {}
    rows = [
        SessionRow(
            session=s,
            tokens=s.token_total,
            entries=s.entry_count,
            cost=costs[s.pk].usd if s.pk in costs and costs[s.pk].priced else None,
            unpriced=costs[s.pk].unpriced if s.pk in costs else 0,
            cost_text=cost_text(costs.get(s.pk), places=4),
            cost_short=cost_text(costs.get(s.pk)),
            folds=s.fold_count,
            fallbacks=fallbacks.get(s.pk, 0),
            failed=failed.get(s.pk, 0),
            failed_calls=failed_calls.get(s.pk, 0),
            blockers=blockers.get(s.pk, 0),
        )
        for s in listed
    ]
    key = DASHBOARD_SORTS.get(sort, "tokens")
    rows.sort(key=lambda r: (-(getattr(r, key) or 0), r.session.key))
    totals: dict[str, Any] = {
        name: sum(getattr(r, name) for r in rows)
        for name in (
            "tokens",
            "entries",
            "folds",
            "fallbacks",
            "failed",
            "failed_calls",
            "blockers",
        )
    }
    totals["sessions"] = len(rows)
    total = cost_sum(costs.values())
    totals["cost"] = total.usd if priced else None
    totals["unpriced"] = total.unpriced
    totals["cost_text"] = cost_text(total) if priced else ""
    return Dashboard(rows=rows, totals=totals, priced=priced)
