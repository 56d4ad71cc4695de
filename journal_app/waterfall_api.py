"""API operation of the waterfall: the same spans as the scope's "Waterfall" page
(:func:`journal_app.selectors.journal_waterfall`). Mounted by ``config/api.py``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Query, Router, Schema

from journal_app import selectors
from journal_app.schemas import ERRORS, ScopePart

router = Router(tags=["journal"])


class SpanOut(Schema):
    """A model call (``call``) or a tool run (``tool``); times are the source's."""

    kind: str
    label: str
    first_seq: int
    last_seq: int
    start: datetime | None
    end: datetime | None
    duration_ms: int | None
    input_tokens: int
    output_tokens: int
    cost_usd: str | None
    #: why ``cost_usd`` is null, in words ("" when it is known)
    cost_note: str
    failed: bool
    open: bool


class WaterfallOut(Schema):
    """One page (300 entries) of the scope's waterfall."""

    page: int
    pages: int
    timed: bool
    total_ms: int | None
    spans: list[SpanOut]


def _ms(delta: Any) -> int | None:
    return None if delta is None else round(delta.total_seconds() * 1000)


@router.get(
    "/sessions/{session}/{lane}/{branch}/waterfall",
    response={200: WaterfallOut, **ERRORS},
    summary="The waterfall of calls and tool runs",
)
def waterfall(
    request: HttpRequest,
    session: ScopePart,
    lane: ScopePart,
    branch: ScopePart,
    page: Annotated[int, Query(ge=1, le=10**9)] = 1,
) -> Any:
    """Model calls and tool runs with durations, provider tokens and computed cost
    (``LEDGER_MODEL_PRICES``), 300 entries a page; a page past the last is the last."""
    journal = request.auth.journal(session, lane, branch)
    built, number, pages = selectors.journal_waterfall(journal, page)
    return {
        "page": number,
        "pages": pages,
        "timed": built.timed,
        "total_ms": _ms(built.total),
        "spans": [
            {
                "kind": s.kind,
                "label": s.label,
                "first_seq": s.first_seq,
                "last_seq": s.last_seq,
                "start": s.start,
                "end": s.end,
                "duration_ms": _ms(s.duration),
                "input_tokens": s.input_tokens,
                "output_tokens": s.output_tokens,
                "cost_usd": None if s.cost is None else str(s.cost),
                "cost_note": s.cost_note,
                "failed": s.failed,
                "open": s.open,
            }
            for s in built.spans
        ],
    }
