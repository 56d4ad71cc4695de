"""Journaling the upstream's answer after the request it answers.

* :func:`answer_record`: the answer (text, tool calls, provider usage), complete or
  interrupted, appended right after its request;
* :func:`provider_figures`: the provider's output token figure shared out over the answer's
  entries;
* :func:`previous_history`: the journaled history a Responses ``previous_response_id``
  continues.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings

from audit_app.services import journal_event
from journal_app.content import content_text
from journal_app.formats.base import ParsedEntry
from journal_app.hashing import canonical_body
from journal_app.models import Entry, Tenant
from journal_app.privacy import filter_text
from journal_app.services import (
    ConflictError,
    journal_append,
)
from journal_app.tokens import count_tokens
from proxy_app.matching import (
    answer_items,
)
from proxy_app.services.conversation import conversation_record
from proxy_app.services.locks import session_lock
from proxy_app.services.placement import (
    Recorded,
    entry_as_item,
    stored_entries,
)

#: the usage field that counts an answer's tokens, per surface
OUTPUT_USAGE = {
    "openai": "completion_tokens",
    "anthropic": "output_tokens",
    "responses": "output_tokens",
}


def provider_figures(
    surface: str, usage: Mapping[str, Any] | None, items: Sequence[ParsedEntry]
) -> list[tuple[int, str]] | None:
    """The provider-reported token figures of an answer's entries.

    The provider reports one output figure for the whole answer (``usage.completion_tokens``
    for OpenAI, ``usage.output_tokens`` for Anthropic). An answer of one entry carries it
    whole, source ``provider:<field>``; an answer of several entries (text and tool calls)
    shares it out in proportion to each entry's tiktoken count (the journal's own counter),
    the shares summing to the provider's figure, source ``provider:<field>/share``.

    Returns:
        One ``(tokens, source)`` per item (:attr:`ParsedEntry.token_figure`, honoured by
        ``journal_append``), or ``None`` when the usage has no such figure (then the journal
        counts with tiktoken, as for any entry without one).
    """
    name = OUTPUT_USAGE[surface]
    total = (usage or {}).get(name)
    if not isinstance(total, int) or isinstance(total, bool) or total < 0 or not items:
        return None
    if len(items) == 1:
        return [(total, f"provider:{name}")]
    encoding = settings.TOKEN_ENCODING
    weights = [max(1, count_tokens(content_text(i.kind, i.content), encoding)) for i in items]
    whole = sum(weights)
    shares = [total * w // whole for w in weights]
    shares[0] += total - sum(shares)
    return [(n, f"provider:{name}/share") for n in shares]


def answer_record(
    *,
    surface: str,
    body: dict[str, Any],
    items: Sequence[ParsedEntry],
    recorded: Recorded,
    answer: dict[str, Any],
    usage: dict[str, Any] | None,
    meta: dict[str, Any],
    interrupted: bool = False,
    prefix: Sequence[ParsedEntry] = (),
) -> Recorded:
    """Journal the upstream's answer after the request it answers.

    Args:
        answer: the assistant message in the surface's request shape.
        usage: the provider-reported usage: kept in the first item's ``usage`` and, through
            :func:`provider_figures`, stored as the answer entries' token figures.
        meta: the response's own fields (model, id, finish or stop reason).
        interrupted: the stream ended before the answer did (the client left, the upstream
            broke off): every item is marked ``metadata["interrupted"]``, so a resend that
            lacks it still matches.
        prefix: the stored history a ``previous_response_id`` request continues
            (:func:`previous_history`), placed before ``items``.

    Returns:
        Where the answer landed. It is appended by ``journal_append`` at the seq after its
        request (``start_seq``): written when the branch still ends at the request, nothing
        when the same entries are already there, and only when something else followed the
        request (a ``ConflictError``, nothing written) is it placed as a history is (a new
        branch after the request). No second placement of the history in the usual case:
        its cost does not grow with the history.
    """
    new = answer_items(surface, body, answer, items)
    if not new:
        return recorded
    figures = provider_figures(surface, usage, new)
    if figures is not None:
        for item, figure in zip(new, figures, strict=True):
            item.token_figure = figure
    new[0].usage = usage or None
    new[0].metadata = {**new[0].metadata, **meta}
    if interrupted:
        for item in new:
            item.metadata = {**item.metadata, "interrupted": True}
    session = recorded.journal.session
    try:
        with session_lock(session.tenant_id, session.key):
            # the append service places the answer right after its request: appended when
            # the branch still ends there, nothing when the same answer is there already,
            # ConflictError when something else followed the request
            journal = recorded.journal
            result = journal_append(journal=journal, items=new, start_seq=recorded.revision + 1)
            return Recorded(journal, recorded.revision + len(new), result.appended)
    except ConflictError:
        pass
    return conversation_record(
        items=[*prefix, *items, *new],
        journal=recorded.journal,
    )


def previous_history(tenant: Tenant, response_id: str) -> list[ParsedEntry]:
    """The journaled history a Responses ``previous_response_id`` continues.

    The answer whose first entry carries ``metadata["response_id"] == response_id`` in the
    tenant's journals, with every entry before it and the rest of that answer (the
    assistant's items up to the next user, system or tool output entry).

    Returns:
        Those entries as items (to place before the request's own ``input``), or ``[]``
        when no journaled answer has that id (then the input is journaled as it is).
    """
    needle = canonical_body({"response_id": response_id}).decode("utf-8")[1:-1]
    first = (
        Entry.objects.filter(journal__session__tenant=tenant, meta__contains=needle)
        .select_related("journal")
        .order_by("-pk")
        .first()
    )
    if first is None:
        return []
    rows = stored_entries(first.journal)
    end = first.seq
    for row in rows[first.seq :]:
        if row.role != "assistant" and row.kind != "reasoning":
            break
        end = row.seq
    return [entry_as_item(e) for e in rows[:end]]


#: characters of an upstream's error body kept with its record (filtered for secrets)
UPSTREAM_ERROR_CHARS = 500


def upstream_failure_record(
    *, surface: str, recorded: Recorded, status: int, detail: str | bytes
) -> None:
    """Record a model call the upstream did not answer (an HTTP error status passed back, or
    no answer at all: unreachable, timed out) as the audit event ``model_call.failed`` on
    the call's journal: the proxy's API (``format``), the revision the call was journaled at, the status
    (502 unreachable, 504 timed out, else the upstream's) and the first
    :data:`UPSTREAM_ERROR_CHARS` characters of its error, secrets filtered
    (:mod:`journal_app.privacy`). The session's overview lists them (README "Context
    views"): the call's messages are journaled, its failed answer is not an entry."""
    text = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
    journal_event(
        journal=recorded.journal,
        action="model_call.failed",
        revision=recorded.revision,
        details={
            "format": surface,  # the proxy's API: openai, anthropic or responses
            "status": status,
            "error": filter_text(text[: UPSTREAM_ERROR_CHARS * 2]).text[:UPSTREAM_ERROR_CHARS],
        },
    )
