"""The waterfall page's read: a journal's model calls and tool runs as spans, one page of
entries at a time (:mod:`journal_app.waterfall` lays them out; the page and
``GET .../waterfall`` both read here)."""

from __future__ import annotations

import json
from typing import Any

from journal_app.models import Entry, Journal
from journal_app.pricing import entry_cost, source_model
from journal_app.selectors.costs import model_prices
from journal_app.selectors.entries import entry_started
from journal_app.times import entry_time
from journal_app.waterfall import Step, Waterfall, waterfall

#: entries a waterfall page reads (its spans start among them)
WATERFALL_ENTRIES = 300
#: entries read past a waterfall page to find the results of its last tool calls
WATERFALL_MARGIN = 60


def _usage_int(usage: Any, *keys: str) -> int:
    if not isinstance(usage, dict):
        return 0
    for k in keys:
        v = usage.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return 0


def journal_waterfall(journal: Journal, page: int = 1) -> tuple[Waterfall, int, int]:
    """Page ``page`` (from 1) of the journal's waterfall (:mod:`journal_app.waterfall`): the
    spans starting among :data:`WATERFALL_ENTRIES` entries, with their durations, provider
    tokens and computed cost (:func:`model_prices`).

    Returns:
        ``(waterfall, page, pages)``: the page number clamped to ``1..pages``. Two queries
        (the page's entries with a margin; no count: a journal's head is its entry count).
    """
    pages = max(1, -(-journal.head_seq // WATERFALL_ENTRIES))
    page = min(max(1, page), pages)
    first = (page - 1) * WATERFALL_ENTRIES + 1
    last = first + WATERFALL_ENTRIES - 1
    prices = model_prices()
    rows = (
        Entry.objects.filter(journal=journal, seq__gte=first, seq__lte=last + WATERFALL_MARGIN)
        .order_by("seq")
        .values_list("seq", "kind", "role", "tool_call_id", "tool_name", "meta", "is_error")
    )
    steps = []
    for seq, kind, role, call_id, tool_name, meta_text, is_error in rows:
        meta = json.loads(meta_text or "{}")
        usage = meta.get("usage")
        try:
            cost = entry_cost(prices, meta) if prices else None
        except ValueError:
            cost = None
        at = entry_time(meta)
        started = entry_started(meta)  # the turn_context's time when it is earlier
        steps.append(
            Step(
                seq=seq,
                kind=kind,
                role=role,
                tool_call_id=call_id,
                tool_name=tool_name,
                at=at,
                started=started if started != at else None,
                input_tokens=_usage_int(usage, "input_tokens", "prompt_tokens"),
                output_tokens=_usage_int(usage, "output_tokens", "completion_tokens"),
                cost=cost,
                is_error=is_error,
                model=source_model(meta),
            )
        )
    built = waterfall(steps)
    kept = [s for s in built.spans if s.first_seq <= last]
    if len(kept) != len(built.spans):
        built = waterfall(
            [s for s in steps if s.seq <= max((k.last_seq for k in kept), default=last)]
        )
        built.spans = [s for s in built.spans if s.first_seq <= last]
    return built, page, pages
