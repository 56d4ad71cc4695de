"""Why a context failed, for the context page (README, "Context views"; docs/design.md 6).

A failed context (:func:`ledger_app.services.context.context_preview`) carries its problems
and figures; this adds what an operator needs next, read from the ledger: the fold that
reported the cause (a consolidation fold whose target was unreachable), the facts that hold
the space, and a working budget that would fit. Read-only; a bounded number of queries.
"""

from __future__ import annotations

from typing import Any

from journal_app.models import Journal
from journal_app.privacy import filter_text
from ledger_app.models import Fold, LedgerFact

#: facts listed as holding the space
FACTS_SHOWN = 8
#: a suggested budget is rounded up to a multiple of this many tokens
ROUND_TO = 1_000


def _round_up(tokens: int) -> int:
    return -(-tokens // ROUND_TO) * ROUND_TO


def context_failure_explain(
    *, journal: Journal, revision: int, failure: dict[str, Any] | None, scale: float = 1.0
) -> dict[str, Any] | None:
    """What caused a context failure and what to do next.

    Args:
        journal: the scope.
        revision: the revision the context was built at.
        failure: the context's ``failure`` (``reason``, ``problems``, ``figures``,
            ``checkpoint``), or ``None``.
        scale: the provider calibration the build applied (the trace's
            ``tokens.calibration.scale``; 1 when none): our tokens count that many times
            fewer than the provider's, so a budget must be that much larger.

    Returns:
        ``None`` without a failure; else ``{"cause": sentence, "fold": number or None (the
        latest fold at or before ``revision``; the consolidation fold that found the target
        unreachable when there is one), "unreachable": consolidation figures or None,
        "facts": [{"fact_id", "priority", "category", "tokens", "text"}] (the active facts of
        that fold holding the most tokens, P0 and P1 first), "held_tokens": int (their sum
        over all active P0/P1 facts), "budget": int or None (a working budget that would fit
        the failed request, or at least its mandatory part (pins and task state, the last
        round), at the provider's scale, plus the output reserve and a tenth, rounded up to
        1,000 tokens), "hard_limit": int or None (a hard limit that would hold that budget
        and the output reserve, when the one given is smaller), "checkpoint": the checkpoint
        note}``. Fact texts and the cause are
        filtered by the one detector (:mod:`journal_app.privacy`): this is a display.
    """
    if not failure:
        return None
    figures = failure.get("figures") or {}
    folds = Fold.objects.filter(journal=journal, revision__lte=revision).order_by("-number")
    fold = folds.only("number", "kind", "manifest").first()
    reporting = None
    for f in folds.filter(kind=Fold.Kind.CONSOLIDATION).only("number", "manifest")[:1]:
        figs = (f.manifest or {}).get("consolidation") or {}
        if figs.get("outcome") == "target_unreachable":
            reporting = (f.number, figs)
    number = reporting[0] if reporting else (fold.number if fold else None)
    facts: list[dict[str, Any]] = []
    held = 0
    if number is not None:
        active = LedgerFact.objects.filter(
            journal=journal, since__lte=number, lifecycle="active"
        ).exclude(until__lte=number)
        mandatory = active.filter(priority__in=["P0", "P1"])
        held = sum(mandatory.values_list("tokens", flat=True))
        for row in active.order_by("priority", "-tokens").values(
            "fact_id", "priority", "category", "tokens", "text"
        )[:FACTS_SHOWN]:
            # shown to an operator: secrets filtered (the one detector) before the cut
            facts.append({**row, "text": filter_text(row["text"]).text[:200]})
    need = sum(
        int(figures.get(k) or 0)
        for k in ("pins_and_task_state_tokens", "last_round_tokens", "output_reserve")
    )
    base = max(int(figures.get("request_tokens") or 0), need)
    fit = int(base * max(scale, 1.0) * 1.1) + int(figures.get("output_reserve") or 0)
    budget = _round_up(fit) if base else None
    working = int(figures.get("working_budget") or 0)
    hard = int(figures.get("hard_limit") or 0)
    # the hard limit less the output reserve must hold the request too (``fit`` holds both)
    needed_hard = _round_up(fit) if base else 0
    if reporting:
        figs = reporting[1]
        cause = (
            f"the ledger's P0 and P1 facts keep {int(figs.get('kept_p0_p1_tokens') or 0):,} "
            f"tokens, over the consolidation target of {int(figs.get('target_tokens') or 0):,} "
            f"(fold {reporting[0]} found the target unreachable): they cannot be evicted"
        )
    elif need > working:
        cause = (
            f"the mandatory part (pins and task state, the last round, the output reserve: "
            f"{need:,} tokens) is over the working budget of {working:,} tokens"
        )
    else:
        cause = filter_text(str(failure.get("reason") or "validation failed")).text[:500]
    return {
        "cause": cause,
        "fold": number,
        "unreachable": reporting[1] if reporting else None,
        "facts": facts,
        "held_tokens": held,
        "budget": budget if budget and budget > working else None,
        "hard_limit": needed_hard if hard and needed_hard > hard else None,
        "checkpoint": filter_text((failure.get("checkpoint") or {}).get("reason", "")).text,
    }
