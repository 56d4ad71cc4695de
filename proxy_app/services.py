"""Every state change the proxy makes (issue 14), through the journal's and ledger's own services.

* :func:`proxy_scope` resolves the key's tenant, the session (from the header, or derived
  from the first system and user message) and the lane.
* :func:`conversation_record` places a resent history in the journal: only the new suffix is
  appended (:func:`journal_app.services.journal_append`), the same history twice appends
  nothing, and a history that diverges opens a new branch at the divergence point
  (:mod:`proxy_app.matching`).
* :func:`request_compact` decides whether the request goes out as sent or as the context
  :func:`ledger_app.context_service.context_build` makes (pins verbatim, ledger checkpoint
  with support hashes, artifact receipts, verbatim tail); folds happen there and in the
  automatic fold after an append, never here.
* :func:`answer_record` journals the upstream's answer (text, tool calls, provider usage),
  complete or interrupted.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.db import transaction

from journal_app.auth import api_key_authenticate
from journal_app.content import content_text
from journal_app.formats.base import ParsedEntry
from journal_app.hashing import canonical_body
from journal_app.models import ApiKey, Entry, Journal, Session, Tenant
from journal_app.schemas import SCOPE_PART
from journal_app.services import (
    ConflictError,
    GapError,
    journal_append,
    journal_ensure,
    session_ensure,
)
from journal_app.tokens import count_tokens, source_label
from ledger_app.context_service import context_build
from ledger_app.services import latest_fold
from ledger_app.validation import Meter
from proxy_app.errors import (
    ContextFailed,
    ProxyRequestInvalid,
    Unauthenticated,
)
from proxy_app.matching import (
    MatchKey,
    RequestInvalid,
    answer_items,
    check_request,
    match_key,
    parsed_key,
    plan_placement,
    request_items,
)

HEADER_KEY = "X-Ledgerkeep-Key"
HEADER_SESSION = "X-Ledgerkeep-Session"
HEADER_LANE = "X-Ledgerkeep-Lane"
HEADER_BRANCH = "X-Ledgerkeep-Branch"
HEADER_BUDGET = "X-Ledgerkeep-Working-Budget"
SESSION_PREFIX = "px-"


def proxy_authenticate(raw: str | None) -> ApiKey:
    """The live key named by the ``X-Ledgerkeep-Key`` header.

    Raises:
        Unauthenticated: missing, unknown, malformed or revoked (HTTP 401).
    """
    if not raw:
        raise Unauthenticated(f"the {HEADER_KEY} header is missing", field=HEADER_KEY)
    key = api_key_authenticate(raw=raw.strip())
    if key is None:
        raise Unauthenticated(f"the {HEADER_KEY} key is unknown or revoked", field=HEADER_KEY)
    return key


def derived_session_key(items: Sequence[ParsedEntry]) -> str:
    """A stable session key from the first system and the first user message.

    ``px-`` and 24 hex digits of the sha256 of ``{"system": text, "user": text}`` in
    canonical JSON: every call of one conversation derives the same key.
    """
    first: dict[str, str] = {"system": "", "user": ""}
    for item in items:
        if item.kind == "message" and item.role in ("system", "developer") and not first["system"]:
            first["system"] = item.content.get("text", "")
        if item.kind == "message" and item.role == "user" and not first["user"]:
            first["user"] = item.content.get("text", "")
    return SESSION_PREFIX + hashlib.sha256(canonical_body(first)).hexdigest()[:24]


@dataclass
class ProxyScope:
    """The scope a proxied call writes to: tenant, session key, lane, branch header."""

    tenant: Tenant
    session_key: str
    lane: str
    branch: str | None
    session: Session | None = None


def _scope_header(headers: Mapping[str, str], name: str, part: str) -> str | None:
    """The value of a scope header, checked against the journal's scope rule; ``None`` if unset.

    Raises:
        ProxyRequestInvalid: a value the journal refuses as a session, lane or branch name
            (HTTP 422, ``field`` names the header); nothing is journaled or forwarded.
    """
    value = (headers.get(name) or "").strip()
    if not value:
        return None
    if not re.fullmatch(SCOPE_PART, value):
        raise ProxyRequestInvalid(
            f"{name}: {part} {value!r} is not valid: use 1-100 letters, digits, '.', '_' or '-'",
            field=name,
        )
    return value


def proxy_scope(
    *, key: ApiKey, headers: Mapping[str, str], items: Sequence[ParsedEntry]
) -> ProxyScope:
    """Resolve the scope from the key and the ``X-Ledgerkeep-*`` headers (issue 14).

    Sessions are per tenant (as in the REST API): the session header is looked up in the
    key's tenant only, and a name the tenant does not have yet is created there on the first
    journaled call (:func:`conversation_record`), whatever other tenants call theirs.

    Raises:
        ProxyRequestInvalid: a session, lane or branch header that is not a valid scope part
            (:data:`journal_app.schemas.SCOPE_PART`), HTTP 422 naming the header.
    """
    tenant = key.tenant
    raw = _scope_header(headers, HEADER_SESSION, "session")
    session_key = raw or derived_session_key(items)
    lane = _scope_header(headers, HEADER_LANE, "lane") or "main"
    branch = _scope_header(headers, HEADER_BRANCH, "branch")
    session = Session.objects.filter(tenant=tenant, key=session_key).first()
    return ProxyScope(tenant, session_key, lane, branch, session)


# ---------------------------------------------------------------- journal placement


def _stored(journal: Journal) -> list[Entry]:
    return list(Entry.objects.filter(journal=journal).order_by("seq"))


def _stored_keys(rows: Sequence[Entry], every: bool) -> list[MatchKey | None]:
    return [
        match_key(
            kind=e.kind,
            role=e.role,
            tool_call_id=e.tool_call_id,
            content=e.content,
            metadata=e.meta_dict,
            every=every,
        )
        for e in rows
    ]


def _as_item(e: Entry) -> ParsedEntry:
    """A stored entry as an item again, to copy it into a new branch unchanged."""
    meta = e.meta_dict
    usage = meta.pop("usage", None)
    source_ref = meta.pop("source_ref", e.source_ref)
    return ParsedEntry(
        kind=e.kind,
        role=e.role,
        content=e.content,
        tool_call_id=e.tool_call_id,
        tool_name=e.tool_name,
        derived=e.derived,
        metadata=meta,
        usage=usage if isinstance(usage, dict) else None,
        source_ref=source_ref,
        token_figure=(e.token_count, e.token_source)
        if e.token_source.startswith("provider:")
        else None,
    )


def _new_branch_name(session: Session, lane: str) -> str:
    taken = set(Journal.objects.filter(session=session, lane=lane).values_list("branch", flat=True))
    n = 2
    while f"b{n}" in taken:
        n += 1
    return f"b{n}"


@dataclass
class Recorded:
    """Where a history landed.

    Attributes:
        journal: the branch that holds it (a new one when it diverged).
        revision: the seq of its last entry in that branch.
        appended: entries written by this call (0 for a history already journaled).
        branched_from: ``"<branch>@<seq>"`` when a new branch was opened, else ``None``.
    """

    journal: Journal
    revision: int
    appended: int
    branched_from: str | None = None


def _place(
    candidates: Sequence[Journal], items: Sequence[ParsedEntry], every: bool = False
) -> Recorded:
    item_keys = [parsed_key(i, every=every) for i in items]
    best: tuple[int, Journal, list[Entry], Any] | None = None
    for journal in candidates:
        rows = _stored(journal)
        plan = plan_placement(_stored_keys(rows, every), item_keys)
        if best is None or plan.matched > best[0]:
            best = (plan.matched, journal, rows, plan)
    assert best is not None
    _, journal, rows, plan = best
    if plan.action == "none":
        revision = rows[plan.stored_end - 1].seq if plan.stored_end else 0
        return Recorded(journal, revision, 0)
    if plan.action == "append":
        fresh = list(items[plan.start :])
        if not fresh:
            return Recorded(journal, journal.head_seq, 0)
        result = journal_append(journal=journal, items=fresh, start_seq=journal.head_seq + 1)
        return Recorded(journal, result.head_seq, result.appended)
    # diverged: a new branch holding the shared prefix, then the new suffix
    fork_seq = rows[plan.stored_end - 1].seq if plan.stored_end else 0
    new = journal_ensure(
        session=journal.session,
        lane=journal.lane,
        branch=_new_branch_name(journal.session, journal.lane),
    )
    suffix = list(items[plan.start :])
    origin = {"branch": journal.branch, "seq": fork_seq}
    if plan.stored_end:
        origin["entry"] = "sha256:" + rows[plan.stored_end - 1].entry_hash
    first = suffix[0]
    suffix[0] = replace(first, metadata={**first.metadata, "branched_from": origin})
    copied = [_as_item(e) for e in rows[: plan.stored_end]]
    result = journal_append(journal=new, items=[*copied, *suffix], start_seq=1)
    return Recorded(new, result.head_seq, result.appended, f"{journal.branch}@{fork_seq}")


def conversation_record(
    *,
    items: Sequence[ParsedEntry],
    scope: ProxyScope | None = None,
    journal: Journal | None = None,
    title: str = "",
    source_format: str = "",
    every: bool = False,
) -> Recorded:
    """Journal a resent history: the new suffix only, or a new branch where it diverges.

    Args:
        scope: from :func:`proxy_scope`; its session is created on first use (needed unless
            ``journal`` is given).
        items: the whole history as journal items (:func:`proxy_app.matching.request_items`,
            plus the answer's items when recording an answer).
        journal: place in this branch only (answers go where their request went); default:
            the branch the header names, else the branch of the lane sharing the longest
            prefix with ``items`` (``main`` for a new session).
        every: match events and reasoning too (:func:`proxy_app.matching.match_key`): a
            followed file holds every record, a runtime's resent history does not.

    Returns:
        :class:`Recorded`. Idempotent: the same history again appends nothing. One
        transaction: a refused item leaves nothing written, session included.

    Raises:
        EntryInvalid, ConflictError, GapError: from ``journal_append`` (after one retry of a
            race with a concurrent call of the same session).
    """
    for attempt in (1, 2):
        try:
            with transaction.atomic():
                if journal is not None:
                    candidates = [journal]
                else:
                    assert scope is not None, "a scope or a journal is needed"
                    session = scope.session or session_ensure(
                        tenant=scope.tenant,
                        key=scope.session_key,
                        title=title,
                        source_format=source_format,
                        source_name="proxy",
                    )
                    if scope.branch is not None:
                        candidates = [
                            journal_ensure(session=session, lane=scope.lane, branch=scope.branch)
                        ]
                    else:
                        candidates = list(
                            Journal.objects.filter(session=session, lane=scope.lane).order_by("pk")
                        ) or [journal_ensure(session=session, lane=scope.lane)]
                recorded = _place(candidates, items, every)
            if scope is not None:
                scope.session = recorded.journal.session
            return recorded
        except (ConflictError, GapError):
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


# ---------------------------------------------------------------- compaction


def _meter() -> Meter:
    encoding = settings.TOKEN_ENCODING
    return Meter(count=lambda text: count_tokens(text, encoding), label=source_label(encoding))


def request_tokens(surface: str, body: Mapping[str, Any]) -> int:
    """Tokens of the request as sent, counted as the context builder counts (tiktoken)."""
    meter = _meter()
    total = meter.per_request + sum(meter.message(m) for m in body["messages"])
    system = body.get("system") if surface == "anthropic" else None
    if system:
        total += meter.message({"role": "system", "content": system})
    return total


@dataclass
class Prepared:
    """What goes upstream and the figures the response headers report."""

    body: dict[str, Any]
    compacted: bool
    tokens_before: int
    tokens_after: int
    working_budget: int
    fold: int | None


def budgets_for(*, model: str, output_tokens: int, header: str | None) -> tuple[int, int]:
    """``(working_budget, window)`` of a call (issue 14).

    The window is ``MODEL_WINDOWS[model]`` (default ``MODEL_WINDOW_DEFAULT``, 270,000); the
    working budget is the ``X-Ledgerkeep-Working-Budget`` header, else the window minus the
    requested output tokens.

    Raises:
        ProxyRequestInvalid: a header that is not a positive integer, or output tokens that
            leave no room in the window.
    """
    window = int(settings.MODEL_WINDOWS.get(model, settings.MODEL_WINDOW_DEFAULT))
    if output_tokens >= window:
        raise ProxyRequestInvalid(
            f"max_tokens {output_tokens} leaves no room in the {window}-token window of {model}",
            field="max_tokens",
        )
    if header:
        try:
            budget = int(header)
        except ValueError:
            budget = 0
        if budget < 1:
            raise ProxyRequestInvalid(
                f"{HEADER_BUDGET} must be a positive integer of tokens", field=HEADER_BUDGET
            )
        return min(budget, window - output_tokens), window
    return window - output_tokens, window


def request_compact(
    *,
    surface: str,
    body: dict[str, Any],
    recorded: Recorded,
    output_tokens: int,
    working: int,
    window: int,
) -> Prepared:
    """The request to forward: as sent when it fits the working budget, else the context.

    Over budget, :func:`ledger_app.context_service.context_build` builds the request as of
    the history's revision (it folds through ``ledger_fold`` when it must) and its messages
    (and, for Anthropic, ``system``) replace the sent ones; every other field is kept.

    Args:
        working, window: from :func:`budgets_for` (checked before anything is journaled).

    Raises:
        ContextFailed: the builder's explicit failure state: nothing is forwarded.
    """
    before = request_tokens(surface, body)
    if before <= working:
        fold = latest_fold(recorded.journal)
        return Prepared(body, False, before, before, working, fold.number if fold else None)
    result = context_build(
        journal=recorded.journal,
        revision=recorded.revision,
        working_budget=working,
        hard_limit=window,
        target_format=surface,
        output_reserve=output_tokens,
        views=("model", "debug"),  # the frontend view is not forwarded: not built
    )
    if result.status != "ok" or result.model_view is None:
        reason = (result.failure or {}).get("reason") or "no valid context fits the budgets"
        raise ContextFailed(f"the request cannot be compacted: {reason}; nothing forwarded")
    view = result.model_view
    out = {**body, "messages": view["messages"]}
    if surface == "anthropic":
        out.pop("system", None)
        if view.get("system"):
            out["system"] = view["system"]
    after = result.debug_trace["tokens"]["request"] or request_tokens(surface, out)
    fold = latest_fold(recorded.journal)
    return Prepared(out, True, before, after, working, fold.number if fold else None)


# ---------------------------------------------------------------- request and answer


def request_read(surface: str, body: Any) -> tuple[int, list[ParsedEntry]]:
    """Check a request body and read its history: ``(output_tokens, items)``.

    Raises:
        ProxyRequestInvalid: naming the field (HTTP 422); nothing is journaled.
    """
    try:
        output_tokens = check_request(surface, body)
        return output_tokens, request_items(surface, body)
    except RequestInvalid as exc:
        raise ProxyRequestInvalid(exc.reason, field=exc.field) from None


#: the usage field that counts an answer's tokens, per surface
OUTPUT_USAGE = {"openai": "completion_tokens", "anthropic": "output_tokens"}


def provider_figures(
    surface: str, usage: Mapping[str, Any] | None, items: Sequence[ParsedEntry]
) -> list[tuple[int, str]] | None:
    """The provider-reported token figures of an answer's entries (DESIGN.md section 4).

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

    Returns:
        Where the answer landed (a new branch when an earlier answer to the same request
        differs from this one).
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
    return conversation_record(
        items=[*items, *new],
        journal=recorded.journal,
    )
