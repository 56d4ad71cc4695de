"""The compaction of a request over its working budget, through the one context service.

:func:`request_compact` decides whether the request goes out as sent or as the context
:func:`ledger_app.services.context.context_build` makes (pins verbatim, ledger checkpoint with
support hashes, artifact receipts, verbatim tail); folds happen there and in the automatic fold
after an append, never here. Until the next fold lands, later calls extend the previous
compacted request (kept in the cache) with their new messages, so that its prefix stays byte
for byte the same for the provider's prompt cache (README "Prompt caching through the proxy").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache

from journal_app.models import Entry, Journal
from ledger_app.context.entry_text import short
from ledger_app.services import latest_fold
from ledger_app.services.context import context_build
from proxy_app.caching import client_marks, marks_place, stable_end
from proxy_app.errors import (
    ContextFailed,
)
from proxy_app.matching import (
    chat_as_responses,
)
from proxy_app.prefix import prefix_digest
from proxy_app.services.locks import sqlite_serial
from proxy_app.services.placement import (
    Recorded,
)
from proxy_app.services.prefix_index import (
    PREFIX_INDEX_SECONDS,
    RequestPrefix,
)
from proxy_app.services.sent_request import request_tokens, token_meter


@dataclass
class Prepared:
    """What goes upstream and the figures the response headers report."""

    body: dict[str, Any]
    compacted: bool
    tokens_before: int
    tokens_after: int
    working_budget: int
    fold: int | None


#: share of the working budget a compaction leaves free, so that the calls after it extend
#: the compacted request instead of rebuilding it (README "Prompt caching through the proxy")
COMPACT_HEADROOM = 0.2


def _compacted_key(journal: Journal, surface: str) -> str:
    return f"ledgerkeep:proxy-compacted:{journal.pk}:{surface}"


def _compacted_extend(
    surface: str,
    body: dict[str, Any],
    recorded: Recorded,
    request: RequestPrefix,
    fold: int | None,
    limit: int,
) -> tuple[dict[str, Any], int] | None:
    """The branch's previous compacted request followed by the client's messages since, when
    no fold has landed since it was built, the client's history still starts with the
    messages it replaced, and the whole fits ``limit`` tokens; else ``None`` (rebuild).

    Returns:
        ``(request, tokens)``. Everything the previous request held is its prefix, so the
        provider's prompt cache holds it.
    """
    kept = cache.get(_compacted_key(recorded.journal, surface))
    if not kept or kept["fold"] != fold or kept["messages"] > len(request.messages):
        return None
    if prefix_digest(request.head, request.messages, kept["messages"]) != kept["digest"]:
        return None
    meter = token_meter()
    new = request.messages[kept["messages"] :]
    tokens = kept["tokens"] + sum(meter.message(m) for m in new)
    if tokens > limit:
        return None
    out = {**body, "messages": [*kept["out"]["messages"], *new]}
    if surface == "anthropic":
        out.pop("system", None)
        if kept["out"].get("system"):
            out["system"] = kept["out"]["system"]
        out, _ = marks_place(out, client_marks(body), len(kept["out"]["messages"]))
    return out, tokens


def _compacted_keep(
    surface: str,
    recorded: Recorded,
    request: RequestPrefix | None,
    out: dict[str, Any],
    tokens: int,
    fold: int | None,
) -> None:
    """Remember a compacted request for :func:`_compacted_extend`."""
    if request is None:
        return
    kept = {
        "messages": len(request.messages),
        "digest": prefix_digest(request.head, request.messages, len(request.messages)),
        "fold": fold,
        "tokens": tokens,
        "out": {"messages": out["messages"], "system": out.get("system")},
    }
    cache.set(_compacted_key(recorded.journal, surface), kept, timeout=PREFIX_INDEX_SECONDS)


def request_compact(
    *,
    surface: str,
    body: dict[str, Any],
    recorded: Recorded,
    output_tokens: int,
    working: int,
    window: int,
    request: RequestPrefix | None = None,
) -> Prepared:
    """The request to forward: as sent when it fits the working budget, else the context.

    Over budget, :func:`ledger_app.services.context.context_build` builds the request as of
    the history's revision (it folds through ``ledger_fold`` when it must) and its messages
    (and, for Anthropic, ``system``) replace the sent ones; every other field is kept.
    The build aims at the working budget less :data:`COMPACT_HEADROOM` (the whole budget
    when that fails or leaves ledger facts out), and until the next fold lands the calls
    after it send that request followed by their new messages while they fit
    (:func:`_compacted_extend`): the part before the new messages stays byte for byte the
    same, for the provider's prompt cache.
    Anthropic requests get the client's ``cache_control`` markers back and one at the end
    of the stable prefix (:mod:`proxy_app.caching`).

    Args:
        working, window: from :func:`proxy_app.services.sent_request.budgets_for` (checked
            before anything is journaled).
        request: the request's messages as sent (Chat Completions and Messages), for
            extending the previous compacted request.

    Raises:
        ContextFailed: the builder's explicit failure state: nothing is forwarded.
    """
    before = request_tokens(surface, body, recorded)
    fold = latest_fold(recorded.journal)
    number = fold.number if fold else None
    if before <= working or body.get("previous_response_id"):
        # a request that continues a stored response is passed through: the upstream
        # holds its history
        return Prepared(body, False, before, before, working, number)
    limit = min(working, window - output_tokens)
    if surface != "responses" and request is not None:
        extended = _compacted_extend(surface, body, recorded, request, number, limit)
        if extended is not None:
            return Prepared(extended[0], True, before, extended[1], working, number)
    target = max(1, int(working * (1 - COMPACT_HEADROOM)))
    result = _context(surface, recorded, target, window, output_tokens)
    if (
        result.status != "ok"
        or result.model_view is None
        or result.debug_trace["ledger"].get("facts_left_out")
    ):
        # the headroom would cost ledger facts (or the request): the whole budget instead
        result = _context(surface, recorded, working, window, output_tokens)
    if result.status != "ok" or result.model_view is None:
        reason = (result.failure or {}).get("reason") or "no valid context fits the budgets"
        raise ContextFailed(f"the request cannot be compacted: {reason}; nothing forwarded")
    view = result.model_view
    fold = latest_fold(recorded.journal)
    number = fold.number if fold else None
    if surface == "responses":
        out = {k: v for k, v in body.items() if k != "instructions"}
        out["input"] = chat_as_responses(view["messages"])
        after = result.debug_trace["tokens"]["request"] or request_tokens(surface, out)
        return Prepared(out, True, before, after, working, number)
    out = {**body, "messages": view["messages"]}
    if surface == "anthropic":
        out.pop("system", None)
        if view.get("system"):
            out["system"] = view["system"]
        out = _cache_marked(recorded.journal, body, out, result.debug_trace)
    after = result.debug_trace["tokens"]["request"] or request_tokens(surface, out)
    _compacted_keep(surface, recorded, request, out, after, number)
    return Prepared(out, True, before, after, working, number)


def _context(
    surface: str, recorded: Recorded, working: int, window: int, output_tokens: int
) -> Any:
    """:func:`ledger_app.services.context.context_build` of the recorded revision."""
    with sqlite_serial():
        return context_build(
            journal=recorded.journal,
            revision=recorded.revision,
            working_budget=working,
            hard_limit=window,
            target_format="openai" if surface == "responses" else surface,
            output_reserve=output_tokens,
            views=("model", "debug"),  # the frontend view is not forwarded: not built
        )


def _cache_marked(
    journal: Journal, sent: dict[str, Any], out: dict[str, Any], trace: Mapping[str, Any]
) -> dict[str, Any]:
    """A compacted Anthropic request with the client's ``cache_control`` markers back on the
    blocks that survived and one at the end of the stable prefix, the messages before the
    verbatim tail (:mod:`proxy_app.caching`); the tail's first seq comes from the builder's
    trace (``rounds.protected_tail`` / ``unfinished_tail``), its entries' hashes from one
    query bounded by the tail."""
    rounds = trace.get("rounds") or {}
    firsts = [r[0] for r in (rounds.get("protected_tail"), rounds.get("unfinished_tail")) if r]
    tail: set[str] = set()
    if firsts:
        hashes = Entry.objects.filter(
            journal=journal,
            seq__gte=min(firsts),
            seq__lte=trace.get("revision") or journal.head_seq,
        ).values_list("entry_hash", flat=True)
        tail = {short(h) for h in hashes}
    stable = stable_end(trace.get("sources") or [], tail) if tail else 0
    marked, _ = marks_place(out, client_marks(sent), stable)
    return marked
