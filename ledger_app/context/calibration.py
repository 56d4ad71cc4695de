"""The provider's own figures calibrate a build's plan (docs/design.md 4: provider figures first).

Pure module: no Django, no database. :func:`provider_usage` finds the provider-reported
usage of the journal's last model call; :func:`calibrate` compares it with our estimate of
the same request and, when the provider counted more, lowers the builder's planning limit
(at most :data:`MAX_CALIBRATION` times) and records the decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger_app.context.build_state import Builder
from ledger_app.entry_view import EntryView, meta_get

#: The most the provider's figures may lower the planning limit by (a factor): a larger
#: ratio says the figure covers more than the journal (a runtime prompt, another request).
MAX_CALIBRATION = 4.0


def calibrate(b: Builder) -> dict[str, Any]:
    """Provider figures first (docs/design.md 4): compare the provider-reported input
    tokens of the journal's last model call with our estimate of the same request (the
    uncompacted rounds before that call, counted as the plan counts them). When the provider
    counted more, lower ``b.limit`` by that ratio (at most :data:`MAX_CALIBRATION`) so the
    decisions use the provider's scale; a lower ratio is reported and not applied (the request
    must fit the budget by our own count as well).

    Returns:
        ``{"provider", "estimate", "ratio", "applied", "limit", "decisions_source"}``, for the
        debug trace.
    """
    usage = provider_usage(b.entries)
    out: dict[str, Any] = {
        "provider": usage,
        "estimate": None,
        "ratio": None,
        "applied": False,
        "limit": b.limit,
        "decisions_source": f"{b.meter.label} estimate (no provider-reported usage in the journal)",
    }
    if usage is None:
        return out
    seq = usage["seq"]
    estimate = b.meter.per_request + b.tools_cost
    for p, cost in zip(b.plans, b.original_costs, strict=True):
        if p.round.first_seq >= seq:
            break
        if p.round.last_seq < seq:
            estimate += cost
        else:
            estimate += b.cost([x for x in p.parts if x.entry is None or x.entry.seq < seq])
    ratio = usage["input_tokens"] / estimate if estimate > 0 else 1.0
    out["estimate"] = estimate
    out["ratio"] = round(ratio, 4)
    if ratio <= 1.0:
        out["decisions_source"] = (
            f"{b.meter.label} estimate: the provider-reported usage at seq {seq} "
            f"({usage['input_tokens']} input tokens) is not above our estimate of that request "
            f"({estimate}), so our own count decides"
        )
        return out
    scale = min(ratio, MAX_CALIBRATION)
    b.limit = max(1, int(b.budget_limit / scale))
    out.update(applied=True, limit=b.limit, scale=round(scale, 4))
    out["decisions_source"] = (
        f"provider-calibrated: the provider reported {usage['input_tokens']} input tokens at seq "
        f"{seq} where we count {estimate}; decisions aim at {b.limit} of our tokens "
        f"(the limit {b.budget_limit} / {scale:.3f})"
    )
    b.decide(
        1,
        "calibrate",
        out["decisions_source"],
        b.total(),
        b.total(),
    )
    return out


def provider_usage(entries: Sequence[EntryView]) -> dict[str, Any] | None:
    """The provider-reported usage of the journal's last model call that carries one
    (``input_tokens``/``prompt_tokens``), labelled as such; ``None`` when none does."""
    for e in reversed(entries):
        usage = meta_get(e, "usage")
        if isinstance(usage, dict):
            inp = usage.get("input_tokens", usage.get("prompt_tokens"))
            out = usage.get("output_tokens", usage.get("completion_tokens"))
            if isinstance(inp, int):
                return {
                    "input_tokens": inp,
                    "output_tokens": out if isinstance(out, int) else None,
                    "seq": e.seq,
                    "source": "provider-reported usage of that call (the uncompacted request then)",
                }
    return None
