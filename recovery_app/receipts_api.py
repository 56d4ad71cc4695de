"""API operations of recovery receipts (docs/design.md sections 7 and 8): list and detail per scope.

Everything the receipts pages show, with typed schemas, so an API client can audit what an
operator can. Reads go through :mod:`recovery_app.selectors`, as the pages do. Mounted by
``config/api.py``; the caller's journal comes from ``request.auth`` (another tenant's or
another scope's receipt is 404).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from django.http import HttpRequest
from ninja import Path, Query, Router, Schema
from pydantic import ConfigDict

from journal_app.hashing import display
from journal_app.schemas import ERRORS, ScopePart
from recovery_app import selectors as recovery_selectors
from recovery_app.api import caller_journal

router = Router(tags=["recovery"])

SCOPE = "/sessions/{session}/{lane}/{branch}/recovery"


# Receipts (the receipts pages' data; recovery_app.selectors shapes both) --------------------


class ReceiptOut(Schema):
    """One recovery attempt's receipt, as a row of the receipts page (docs/design.md 7).

    ``fold``: the fold the attempt ran after; ``entered_fold``: the fold whose delta carried
    the recovered facts to the verifier. ``queries``, ``reads``, ``sources`` are counts.
    """

    id: int
    kind: str
    outcome: str
    reason: str
    fold: int | None
    entered_fold: int | None
    trigger: dict[str, Any]
    snapshot: dict[str, Any]
    queries: int
    reads: int
    sources: int
    tokens: int
    seconds: float
    model_requests: int
    analyst: str
    created_at: datetime


class ReceiptCheckOut(Schema):
    check: str
    ok: bool


class ReceiptReadOut(Schema):
    """One read: the entry, each verification check, ok only when every check passed."""

    model_config = ConfigDict(extra="allow")

    entry: str
    url: str
    ok: bool
    failed: list[str]
    checks: list[ReceiptCheckOut]


class ReceiptLimitOut(Schema):
    name: str
    used: Any = None
    limit: Any = None


class ReceiptDetailOut(ReceiptOut):
    """The whole receipt: each query with its leads, each read with every check, sources,
    claims, the ops proposed to the ledger and the reducer's verdicts, budget against use.
    Entry links (``url``) read the raw entry over the API."""

    question: str
    scanned_to: int
    queries_run: list[dict[str, Any]]
    reads_made: list[ReceiptReadOut]
    sources_used: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    rejected_claims: list[dict[str, Any]]
    recovered: list[dict[str, Any]]
    verdicts: list[dict[str, Any]]
    limits: list[ReceiptLimitOut]


def _api_entry_url(digest: str) -> str:
    return f"/api/v1/entries/{display(digest)}"


@router.get(
    SCOPE + "/receipts", response={200: list[ReceiptOut], **ERRORS}, summary="Recovery receipts"
)
def receipt_list(
    request: HttpRequest,
    session: ScopePart,
    lane: ScopePart,
    branch: ScopePart,
    outcome: Annotated[
        Literal[
            "not_triggered", "denied", "nothing_found", "recovered", "budget_exhausted", "failed"
        ]
        | None,
        Query(),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Any:
    """The scope's recovery receipts, newest first (every attempt leaves one, docs/design.md 7)."""
    journal = caller_journal(request, session, lane, branch)
    rows = recovery_selectors.receipts_for_journal(journal, outcome=outcome or "")[:limit]
    return [recovery_selectors.receipt_summary(r) for r in rows]


@router.get(
    SCOPE + "/receipts/{receipt_id}",
    response={200: ReceiptDetailOut, **ERRORS},
    summary="Read a recovery receipt",
)
def receipt_read(
    request: HttpRequest,
    session: ScopePart,
    lane: ScopePart,
    branch: ScopePart,
    receipt_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
) -> Any:
    """One receipt of the scope, whole (another scope's or tenant's receipt is 404)."""
    journal = caller_journal(request, session, lane, branch)
    detail = recovery_selectors.receipt_detail(
        recovery_selectors.receipt_get(journal, receipt_id), _api_entry_url
    )
    return {
        **detail,
        "queries": len(detail["queries"]),
        "reads": len(detail["reads"]),
        "sources": len(detail["sources"]),
        "queries_run": detail["queries"],
        "reads_made": detail["reads"],
        "sources_used": detail["sources"],
    }
