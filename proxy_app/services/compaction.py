"""The compaction of a request over its working budget, through the one context service.

:func:`request_compact` decides whether the request goes out as sent or as the context
:func:`ledger_app.services.context.context_build` makes (pins verbatim, ledger checkpoint with
support hashes, artifact receipts, verbatim tail); folds happen there (within
``PROXY_FOLD_SECONDS``, else 503 ``fold_pending``) and in the automatic fold after an append
(after the call, :func:`ledger_app.receivers.fold_soon`), never here. Until the next fold lands, later calls extend the previous
compacted request (kept in the cache) with their new messages, so that its prefix stays byte
for byte the same for the provider's prompt cache (README "Prompt caching through the proxy").
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache

from journal_app.models import Entry, Journal
from ledger_app.context.entry_text import short
from ledger_app.receivers import fold_soon
from ledger_app.services import latest_fold
from ledger_app.services.context import (
    ContextResult,
    context_build,
    context_failure_record,
)
from proxy_app.caching import client_marks, marks_place, stable_end
from proxy_app.errors import ContextFailed, FoldPending
from proxy_app.matching import chat_as_responses, responses_input
from proxy_app.services.locks import sqlite_serial
from proxy_app.services.placement import (
    Recorded,
)
from proxy_app.services.prefix_index import (
    PREFIX_INDEX_SECONDS,
    RequestPrefix,
)
from proxy_app.services.scope import HEADER_BUDGET
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

#: ``Retry-After`` of a call answered 503 ``fold_pending``, seconds
FOLD_RETRY_AFTER = 10


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
    if request.digest(kept["messages"]) != kept["digest"]:
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
        "digest": request.digest(len(request.messages)),
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
    the history's revision (when it must fold, in slices through ``ledger_compact``, none
    started after ``PROXY_FOLD_SECONDS``) and its messages (and, for Anthropic, ``system``)
    replace the sent ones; every other field is kept (Responses: :func:`_responses_compacted`).
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
        FoldPending: no context fits yet, the time budget was spent folding, and more
            folding could make it fit (the rest is queued: :func:`ledger_app.receivers.fold_soon`).
        ContextFailed: the builder's explicit failure state: nothing is forwarded; the
            message names a working budget that would fit, or says none within the window can.
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
    # a fold the build needs runs in slices, none started after the time budget
    deadline = time.monotonic() + settings.PROXY_FOLD_SECONDS
    result, failed = _fitting(surface, recorded, target, working, window, output_tokens, deadline)
    if result is None and time.monotonic() >= deadline and not _mandatory_over(failed, working):
        fold_soon(recorded.journal, recorded.revision)
        seconds = settings.PROXY_FOLD_SECONDS
        raise FoldPending(
            f"the request fits its budget only once more of its history is folded, and "
            f"the fold did not finish within PROXY_FOLD_SECONDS ({seconds:g} s); it goes "
            f"on in the background: send the request again in {FOLD_RETRY_AFTER} s; "
            "nothing forwarded",
            retry_after=FOLD_RETRY_AFTER,
        )
    if result is None:
        context_failure_record(
            journal=recorded.journal,
            result=failed,
            target_format="openai" if surface == "responses" else surface,
        )
        raise ContextFailed(_failure_message(failed, window - output_tokens))
    view = result.model_view
    assert view is not None  # _fitting returns only results with a model view
    fold = latest_fold(recorded.journal)
    number = fold.number if fold else None
    if surface == "responses":
        out = _responses_compacted(body, view["messages"], result.debug_trace, recorded)
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
    surface: str,
    recorded: Recorded,
    working: int,
    window: int,
    output_tokens: int,
    deadline: float,
) -> ContextResult:
    """:func:`ledger_app.services.context.context_build` of the recorded revision, folding
    in slices until ``deadline`` (a :func:`time.monotonic` value) when it must fold."""
    with sqlite_serial():
        return context_build(
            journal=recorded.journal,
            revision=recorded.revision,
            working_budget=working,
            hard_limit=window,
            target_format="openai" if surface == "responses" else surface,
            output_reserve=output_tokens,
            views=("model", "debug"),  # the frontend view is not forwarded: not built
            fold_deadline=deadline,
            record_failure=False,  # one call, one record: the failure answered (_prepare)
        )


def _fitting(
    surface: str,
    recorded: Recorded,
    target: int,
    working: int,
    window: int,
    output_tokens: int,
    deadline: float,
) -> tuple[ContextResult | None, ContextResult]:
    """The context at ``target`` tokens, or at the whole ``working`` budget when the
    headroom fails or would leave ledger facts out: ``(usable result or None, the last
    result built)`` (the last one carries the failure to report)."""
    result = _context(surface, recorded, target, window, output_tokens, deadline)
    if (
        result.status == "ok"
        and result.model_view is not None
        and not result.debug_trace["ledger"].get("facts_left_out")
    ):
        return result, result
    result = _context(surface, recorded, working, window, output_tokens, deadline)
    if result.status == "ok" and result.model_view is not None:
        return result, result
    return None, result


#: the builder's failure figures that no fold can shrink: the last round stays verbatim and
#: the reply needs its reserve (pins and task state are not among them: a fold closes
#: requests and turns older ones into one line each)
_UNFOLDABLE = ("last_round_tokens", "output_reserve")


def _mandatory_over(failed: ContextResult, working: int) -> bool:
    """Whether the failed build's last round and output reserve alone are over ``working``
    tokens: folding more cannot help, so the call is answered 422 at once, not 503
    ``fold_pending``."""
    figures = (failed.failure or {}).get("figures") or {}
    return sum(int(figures.get(k) or 0) for k in _UNFOLDABLE) > working


def _failure_message(failed: ContextResult, limit: int) -> str:
    """The 422 sentence of a context that cannot be built: the builder's reason and, when
    one is known, a working budget that would fit (the failure's ``next_step``, the one the
    API answers and the session's overview lists:
    :func:`ledger_app.services.context.context_build`), or, when that budget is over
    ``limit`` (the model's window less the output, tokens), that no budget can fit."""
    reason = (failed.failure or {}).get("reason") or "no valid context fits the budgets"
    step = (failed.failure or {}).get("next_step") or {}
    hint = ""
    budget = int(step.get("working_budget") or 0)
    if budget > limit:
        hint = (
            f"; it needs a working budget of about {budget:,} tokens, over what the model's "
            f"window leaves ({limit:,} tokens): no budget fits, shorten the request"
        )
    elif budget:
        hint = f"; a working budget of {budget:,} tokens would fit (header {HEADER_BUDGET})"
    return f"the request cannot be compacted: {reason}{hint}; nothing forwarded"


#: the journal entry kind of each Responses input item type (anything else: ``event``)
_ITEM_KINDS = {
    "message": "message",
    "function_call": "tool_call",
    "custom_tool_call": "tool_call",
    "function_call_output": "tool_result",
    "custom_tool_call_output": "tool_result",
    "reasoning": "reasoning",
}


def _tail_first(trace: Mapping[str, Any]) -> int | None:
    """The first seq of the verbatim tail the builder kept (``rounds.protected_tail`` /
    ``unfinished_tail`` of its trace), or ``None``."""
    rounds = trace.get("rounds") or {}
    firsts = [r[0] for r in (rounds.get("protected_tail"), rounds.get("unfinished_tail")) if r]
    return min(firsts) if firsts else None


def _responses_compacted(
    body: dict[str, Any],
    messages: list[dict[str, Any]],
    trace: Mapping[str, Any],
    recorded: Recorded,
) -> dict[str, Any]:
    """A compacted Responses request: the client's ``instructions`` kept as sent (not turned
    into a system item: a backend may check them), the context's messages before the
    verbatim tail as ``input`` items, then the client's own items for the tail, byte for
    byte (``reasoning`` with its ``encrypted_content``, item ids, content parts).

    The tail's entries (from the builder's trace up to the request's revision) are the
    client's last items, one entry per item (the Responses importer's rule); when their
    kinds do not line up (a derived entry between them, an item type the importer keeps as
    an event), the whole context is converted instead (:func:`chat_as_responses`).
    """
    out = dict(body)
    instructions = body.get("instructions")
    if instructions:  # journaled as the first system message: sent once, as instructions
        for n, m in enumerate(messages):
            if m.get("role") == "system" and m.get("content") == instructions:
                messages = [*messages[:n], *messages[n + 1 :]]
                trace = {**trace, "sources": _without(trace.get("sources") or [], n)}
                break
    first = _tail_first(trace)
    items = responses_input(body)
    if first is not None and first <= recorded.revision:
        rows = list(
            Entry.objects.filter(
                journal=recorded.journal, seq__gte=first, seq__lte=recorded.revision
            )
            .order_by("seq")
            .values_list("entry_hash", "kind", "derived")
        )
        tail = items[len(items) - len(rows) :] if len(rows) <= len(items) else []
        kinds = [
            _ITEM_KINDS.get(i.get("type", "message" if "role" in i else ""), "event")
            if isinstance(i, dict)
            else ""
            for i in tail
        ]
        if (
            rows
            and kinds == [k for _, k, derived in rows if not derived]
            and len(kinds) == len(rows)
        ):
            stable = stable_end(trace.get("sources") or [], {short(h) for h, _, _ in rows})
            out["input"] = [*chat_as_responses(messages[:stable]), *tail]
            return out
    out["input"] = chat_as_responses(messages)
    return out


def _without(sources: list[Any], n: int) -> list[Any]:
    return [*sources[:n], *sources[n + 1 :]]


def _cache_marked(
    journal: Journal, sent: dict[str, Any], out: dict[str, Any], trace: Mapping[str, Any]
) -> dict[str, Any]:
    """A compacted Anthropic request with the client's ``cache_control`` markers back on the
    blocks that survived and one at the end of the stable prefix, the messages before the
    verbatim tail (:mod:`proxy_app.caching`); the tail's first seq comes from the builder's
    trace (``rounds.protected_tail`` / ``unfinished_tail``), its entries' hashes from one
    query bounded by the tail."""
    first = _tail_first(trace)
    tail: set[str] = set()
    if first is not None:
        hashes = Entry.objects.filter(
            journal=journal,
            seq__gte=first,
            seq__lte=trace.get("revision") or journal.head_seq,
        ).values_list("entry_hash", flat=True)
        tail = {short(h) for h in hashes}
    stable = stable_end(trace.get("sources") or [], tail) if tail else 0
    marked, _ = marks_place(out, client_marks(sent), stable)
    return marked
