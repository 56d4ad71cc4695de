"""The read layer of recovery receipts (docs/design.md sections 7 and 8), shared by the receipts
pages (:mod:`recovery_app.views`) and the API (``GET .../recovery/receipts``).

Receipts are read inside one journal only (resolved and tenant-checked by the caller), so
another tenant's or another scope's receipt answers ``Http404``. The presenters shape a
receipt the same way for both: entry links are made by the caller's ``entry_url``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import F, QuerySet
from django.http import Http404

from journal_app.hashing import display
from journal_app.models import Journal
from recovery_app.models import Receipt
from recovery_app.snapshot import CHECKS

#: the order of a read's checks (recovery_app.snapshot.verify_read)
CHECK_ORDER = ("exists", *CHECKS)


def receipts_for_journal(journal: Journal, *, outcome: str = "") -> QuerySet[Receipt]:
    """The journal's receipts, newest first (``outcome`` narrows when it is one; ``triggered``:
    every outcome but ``not_triggered``), without the large columns (claims, recovered ops,
    verdicts, question); ``fold_number`` and ``entered_number`` annotated."""
    qs = (
        Receipt.objects.filter(journal=journal)
        .annotate(fold_number=F("fold__number"), entered_number=F("entered_fold__number"))
        .defer("claims", "rejected_claims", "recovered", "verdicts", "question")
        .order_by("-created_at", "-pk")
    )
    if outcome in Receipt.Outcome.values:
        qs = qs.filter(outcome=outcome)
    elif outcome == TRIGGERED:
        qs = qs.exclude(outcome=Receipt.Outcome.NOT_TRIGGERED)
    return qs


#: the receipts list's default filter: attempts whose trigger fired
TRIGGERED = "triggered"


def receipt_get(journal: Journal, pk: int) -> Receipt:
    """Receipt ``pk`` of ``journal`` (whole, with its folds' numbers); ``Http404`` otherwise."""
    receipt = (
        Receipt.objects.filter(journal=journal, pk=pk)
        .select_related("fold", "entered_fold")
        .defer(
            "fold__delta",
            "fold__state",
            "fold__manifest",
            "entered_fold__delta",
            "entered_fold__state",
            "entered_fold__manifest",
        )
        .annotate(fold_number=F("fold__number"), entered_number=F("entered_fold__number"))
        .first()
    )
    if receipt is None:
        raise Http404("no such receipt in this journal")
    return receipt


def receipt_summary(r: Receipt) -> dict[str, Any]:
    """One row of the receipts list (the API's ``ReceiptOut``)."""
    return {
        "id": r.pk,
        "kind": r.kind,
        "outcome": r.outcome,
        "reason": r.reason,
        "fold": getattr(r, "fold_number", None),
        "entered_fold": getattr(r, "entered_number", None),
        "trigger": r.trigger if isinstance(r.trigger, dict) else {},
        "snapshot": r.snapshot if isinstance(r.snapshot, dict) else {},
        "queries": len(r.queries) if isinstance(r.queries, list) else 0,
        "reads": len(r.reads) if isinstance(r.reads, list) else 0,
        "sources": len(r.sources) if isinstance(r.sources, list) else 0,
        "tokens": r.tokens,
        "seconds": r.seconds,
        "model_requests": r.model_requests,
        "analyst": r.analyst,
        "created_at": r.created_at,
    }


def _read(line: dict[str, Any], entry_url: Callable[[str], str]) -> dict[str, Any]:
    checks = line.get("checks") if isinstance(line.get("checks"), dict) else {}
    failed = (
        [str(f) for f in line.get("failed", [])] if isinstance(line.get("failed"), list) else []
    )
    names = [c for c in CHECK_ORDER if c in checks or c in failed]
    names += [c for c in [*checks, *failed] if c not in names]
    digest = str(line.get("entry", ""))
    return {
        **line,
        "entry": display(digest) if digest else "",
        "url": entry_url(digest) if digest else "",
        "ok": bool(line.get("ok")),
        "failed": failed,
        "checks": [
            {"check": c, "ok": bool(checks.get(c, c not in failed)) and c not in failed}
            for c in names
        ],
    }


def _linked(item: dict[str, Any], entry_url: Callable[[str], str]) -> dict[str, Any]:
    digest = str(item.get("entry", ""))
    return {
        **item,
        "entry": display(digest) if digest else "",
        "url": entry_url(digest) if digest else "",
    }


def receipt_detail(r: Receipt, entry_url: Callable[[str], str]) -> dict[str, Any]:
    """The whole receipt (the API's ``ReceiptDetailOut``): trigger, snapshot, each query with
    its leads, each read with every check ok or failed, sources, claims, the ops proposed
    to the ledger and the reducer's verdicts on them, budget against use.

    Args:
        r: from :func:`receipt_get`.
        entry_url: hex entry hash -> the link to the raw entry (the UI page or the API).
    """
    budget = r.budget if isinstance(r.budget, dict) else {}
    usage = r.usage if isinstance(r.usage, dict) else {}
    return {
        **receipt_summary(r),
        "question": r.question,
        "scanned_to": r.scanned_to,
        "queries": [
            {
                **q,
                "leads": [
                    _linked(lead, entry_url)
                    for lead in q.get("leads", [])
                    if isinstance(lead, dict)
                ],
            }
            for q in r.queries
            if isinstance(q, dict)
        ],
        "reads": [_read(line, entry_url) for line in r.reads if isinstance(line, dict)],
        "sources": [_linked(s, entry_url) for s in r.sources if isinstance(s, dict)],
        "claims": [c for c in r.claims if isinstance(c, dict)],
        "rejected_claims": [c for c in r.rejected_claims if isinstance(c, dict)],
        "recovered": [op for op in r.recovered if isinstance(op, dict)],
        "verdicts": [v for v in r.verdicts if isinstance(v, dict)],
        "limits": [
            {"name": name, "used": usage.get(name), "limit": budget.get(name)}
            for name in dict.fromkeys([*budget, *usage])
        ],
        "budget": budget,
        "usage": usage,
    }
