"""Every state change the proxy makes, through the journal's and ledger's own services.

* :func:`proxy_scope` resolves the key's tenant, the session (from the header, or derived
  from the first system and user message) and the lane.
* :func:`conversation_record` places a resent history in the journal: only the new suffix is
  appended (:func:`journal_app.services.journal_append`), the same history twice appends
  nothing, and a history that diverges opens a new branch at the divergence point
  (:mod:`proxy_app.matching`).
* :func:`request_compact` decides whether the request goes out as sent or as the context
  :func:`ledger_app.services.context.context_build` makes (pins verbatim, ledger checkpoint
  with support hashes, artifact receipts, verbatim tail); folds happen there and in the
  automatic fold after an append, never here.
* :func:`answer_record` journals the upstream's answer (text, tool calls, provider usage),
  complete or interrupted.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import astuple, dataclass, replace
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.http import HttpRequest

from journal_app.auth import api_key_authenticate, check_failure_limit, check_rate_limit
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
from ledger_app.context.entry_text import short
from ledger_app.services import latest_fold
from ledger_app.services.context import context_build
from ledger_app.validation import Meter
from proxy_app.caching import client_marks, marks_place, stable_end
from proxy_app.errors import (
    ContextFailed,
    ProxyRequestInvalid,
    Unauthenticated,
)
from proxy_app.matching import (
    MatchKey,
    RequestInvalid,
    answer_items,
    chat_as_responses,
    check_request,
    match_key,
    parsed_key,
    plan_placement,
    request_items,
    responses_as_chat,
    responses_input,
)
from proxy_app.prefix import prefix_digest
from proxy_app.upstream import tenant_key_in

HEADER_KEY = "X-Ledgerkeep-Key"
HEADER_SESSION = "X-Ledgerkeep-Session"
HEADER_LANE = "X-Ledgerkeep-Lane"
HEADER_BRANCH = "X-Ledgerkeep-Branch"
HEADER_BUDGET = "X-Ledgerkeep-Working-Budget"
SESSION_PREFIX = "px-"


def proxy_authenticate(request: HttpRequest) -> ApiKey:
    """The live key of a proxied call, counted against the API's rate limits.

    The key is ``X-Ledgerkeep-Key``, else a ledgerkeep key sent as the provider credential
    (``Authorization: Bearer lk_...`` or ``x-api-key: lk_...``,
    :func:`proxy_app.upstream.tenant_key_in`; never forwarded upstream, so the server's
    ``UPSTREAM_*_API_KEY`` is then the upstream credential). As on the API
    (:mod:`journal_app.auth`): a refused key counts against the client address
    (``API_AUTH_FAILURE_RATE``), a live one against the key (``API_RATE_LIMIT``).

    Raises:
        Unauthenticated: missing, unknown, malformed or revoked (HTTP 401).
        RateLimited: over either limit (HTTP 429 with ``Retry-After``).
    """
    raw = request.headers.get(HEADER_KEY) or tenant_key_in(request.headers)
    if not raw:
        raise Unauthenticated(
            f"no key: send {HEADER_KEY}, or the ledgerkeep key as the API key "
            "(Authorization: Bearer lk_... or x-api-key: lk_...)",
            field=HEADER_KEY,
        )
    key = api_key_authenticate(raw=raw.strip())
    if key is None:
        check_failure_limit(request)
        raise Unauthenticated(f"the {HEADER_KEY} key is unknown or revoked", field=HEADER_KEY)
    check_rate_limit(request, key)
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
    """Resolve the scope from the key and the ``X-Ledgerkeep-*`` headers.

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


#: the advisory-lock class of proxy placements (first key of ``pg_advisory_xact_lock``)
LOCK_CLASS = 0x1ED9
#: SQLite has one writer: the proxy's placements in a process take turns on this lock
_SQLITE_LOCK = threading.RLock()


@contextmanager
def session_lock(tenant_id: int, session_key: str) -> Iterator[None]:
    """One transaction in which no other proxied call of the session places a history.

    PostgreSQL: a transaction-level advisory lock on ``(LOCK_CLASS, 32 bits of sha256 of
    "tenant:session")``, taken before the session row may exist (so two first calls do not
    both create it) and released at commit or rollback; other sessions do not wait. SQLite:
    a process lock around the transaction (SQLite serialises writers anyway; the lock keeps
    two deferred transactions from deadlocking on their upgrade to writing).
    """
    if connection.vendor == "postgresql":
        digest = hashlib.sha256(f"{tenant_id}:{session_key}".encode()).digest()
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_advisory_xact_lock(%s, %s)",
                    [LOCK_CLASS, int.from_bytes(digest[:4], "big", signed=True)],
                )
            yield
        return
    with _SQLITE_LOCK, transaction.atomic():
        yield


@contextmanager
def sqlite_serial() -> Iterator[None]:
    """On SQLite, the process lock of :func:`session_lock` (a fold writes too); elsewhere
    nothing."""
    if connection.vendor == "postgresql":
        yield
        return
    with _SQLITE_LOCK:
        yield


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
        entry_hash: the entry hash at ``revision`` (it commits to the branch up to there;
            ``""`` when the branch is empty).
        known_messages, known_tokens: placed through the prefix index, how many of the
            request's messages were found stored and their tokens as
            :func:`request_tokens` counts them (``-1``: not counted yet).
        index_key: the prefix index entry that records this request (``""``: none).
    """

    journal: Journal
    revision: int
    appended: int
    branched_from: str | None = None
    entry_hash: str = ""
    known_messages: int = 0
    known_tokens: int = -1
    index_key: str = ""


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
        last = rows[plan.stored_end - 1] if plan.stored_end else None
        return Recorded(
            journal, last.seq if last else 0, 0, entry_hash=last.entry_hash if last else ""
        )
    if plan.action == "append":
        return _append_suffix(journal, list(items[plan.start :]))
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
    return Recorded(
        new, result.head_seq, result.appended, f"{journal.branch}@{fork_seq}", new.head_hash
    )


def _append_suffix(journal: Journal, fresh: list[ParsedEntry]) -> Recorded:
    """Append a history's new suffix after the branch's head (nothing when it is empty)."""
    if fresh:
        journal_append(journal=journal, items=fresh, start_seq=journal.head_seq + 1)
    return Recorded(journal, journal.head_seq, len(fresh), entry_hash=journal.head_hash)


# ---------------------------------------------------------------- prefix index

#: records the prefix index keeps per session, lane and branch header (newest first)
PREFIX_RECORDS = 16
#: stored entries after an indexed prefix that a placement reads at most (more: placed whole)
PREFIX_TAIL_LIMIT = 200
#: message counts the index tries per call (longest first)
PREFIX_TRIES = 3
#: how long an unused session's records stay in the cache
PREFIX_INDEX_SECONDS = 24 * 3600


@dataclass(frozen=True)
class PrefixRecord:
    """Where the first ``messages`` messages of a request were placed.

    Attributes:
        messages: how many messages (of :func:`proxy_app.prefix.request_messages`).
        digest: :func:`proxy_app.prefix.prefix_digest` of them.
        journal: the branch's primary key.
        seq: the seq of the last entry they were placed as.
        entry_hash: the entry hash at ``seq``, which commits to the whole branch up to it
            (the journal is a hash chain): a record is used only while it still matches.
        items: how many journal items those messages are (:func:`request_items`).
        tokens: their tokens as :func:`request_tokens` counts each message (``-1``: not
            counted yet), so a call counts only its new messages.
    """

    messages: int
    digest: str
    journal: int
    seq: int
    entry_hash: str
    items: int
    tokens: int = -1


@dataclass
class RequestPrefix:
    """A request's message list as sent (:func:`proxy_app.prefix.request_messages`)."""

    head: Any
    messages: list[Any]


def _index_key(session: Session, lane: str, branch: str | None) -> str:
    return f"ledgerkeep:proxy-prefix:{session.pk}:{session.key}:{lane}:{branch or ''}"


def _index_plan(
    session: Session,
    lane: str,
    branch: str | None,
    record: PrefixRecord,
    items: Sequence[ParsedEntry],
    every: bool,
) -> tuple[Journal, list[Entry], Any] | None:
    """The placement of ``items[record.items:]`` after ``record``'s seq, or ``None`` when
    the record no longer holds (another branch, another hash at its seq, a long tail)."""
    rows = list(
        Entry.objects.filter(
            journal_id=record.journal,
            journal__session=session,
            journal__lane=lane,
            seq__gte=record.seq,
        )
        .select_related("journal__session__tenant")
        .order_by("seq")[: PREFIX_TAIL_LIMIT + 1]
    )
    if not rows or len(rows) > PREFIX_TAIL_LIMIT or rows[0].seq != record.seq:
        return None
    if rows[0].entry_hash != record.entry_hash:
        return None
    journal = rows[0].journal
    if branch is not None and journal.branch != branch:
        return None
    tail = rows[1:]
    suffix = [parsed_key(i, every=every) for i in items[record.items :]]
    return journal, rows, plan_placement(_stored_keys(tail, every), suffix)


def _place_indexed(
    session: Session,
    lane: str,
    branch: str | None,
    request: RequestPrefix,
    items: Sequence[ParsedEntry],
    every: bool,
) -> Recorded | None:
    """Place a resent history by its new suffix only, through the prefix index.

    The longest recorded message count whose digest the request's messages still give is
    looked up (at most :data:`PREFIX_TRIES` counts); each record of it that still holds
    (:func:`_index_plan`) is planned against the suffix, the one matching the most wins
    (the oldest branch on a tie, as :func:`_place` decides). Only the stored entries after
    the prefix are read and only the suffix is keyed.

    Returns:
        Where the history landed, or ``None`` when the index has no usable record or the
        suffix diverges from the stored tail (then the history is placed whole by
        :func:`_place`, which opens the new branch).
    """
    fields = len(PrefixRecord.__dataclass_fields__)
    stored = cache.get(_index_key(session, lane, branch)) or []
    records = [PrefixRecord(*r) for r in stored if len(r) == fields]
    counts = sorted(
        {
            r.messages
            for r in records
            if r.messages <= len(request.messages) and r.items <= len(items)
        },
        reverse=True,
    )
    for m in counts[:PREFIX_TRIES]:
        digest = prefix_digest(request.head, request.messages, m)
        hits = sorted(
            (r for r in records if r.messages == m and r.digest == digest), key=lambda r: r.journal
        )
        best: tuple[int, PrefixRecord, Journal, list[Entry], Any] | None = None
        for record in hits:
            planned = _index_plan(session, lane, branch, record, items, every)
            if planned is None:
                continue
            journal, rows, plan = planned
            if best is None or plan.matched > best[0]:
                best = (plan.matched, record, journal, rows, plan)
        if best is None:
            continue
        _, record, journal, rows, plan = best
        if plan.action == "branch":
            return None
        if plan.action == "none":
            last = rows[plan.stored_end]  # rows[0] is the record's own entry
            placed = Recorded(journal, last.seq, 0, entry_hash=last.entry_hash)
        else:
            placed = _append_suffix(journal, list(items[record.items + plan.start :]))
        return replace(placed, known_messages=m, known_tokens=record.tokens)
    return None


def _index_add(
    session: Session,
    lane: str,
    branch: str | None,
    request: RequestPrefix,
    items: Sequence[ParsedEntry],
    recorded: Recorded,
) -> None:
    """Remember where this request's messages landed (newest first, deduplicated)."""
    if not recorded.revision or not recorded.entry_hash:
        return
    record = PrefixRecord(
        len(request.messages),
        prefix_digest(request.head, request.messages, len(request.messages)),
        recorded.journal.pk,
        recorded.revision,
        recorded.entry_hash,
        len(items),
    )
    key = _index_key(session, lane, branch)
    row = astuple(record)
    kept = [row, *(r for r in cache.get(key) or [] if tuple(r)[:-1] != row[:-1])]
    cache.set(key, kept[:PREFIX_RECORDS], timeout=PREFIX_INDEX_SECONDS)
    recorded.index_key = key


def _index_tokens(recorded: Recorded, tokens: int) -> None:
    """Store the token count of the request the newest record of ``recorded``'s index
    entry describes (:func:`_index_add` wrote it first)."""
    rows = cache.get(recorded.index_key) if recorded.index_key else None
    if rows and tuple(rows[0])[-1] != tokens:
        rows[0] = (*tuple(rows[0])[:-1], tokens)
        cache.set(recorded.index_key, rows, timeout=PREFIX_INDEX_SECONDS)


def _scope_place(
    scope: ProxyScope,
    items: Sequence[ParsedEntry],
    every: bool,
    request: RequestPrefix | None,
    title: str,
    source_format: str,
) -> Recorded:
    """:func:`conversation_record` for a scope (under the session's lock): by the prefix
    index when it places the history, else against every branch of the lane."""
    known = scope.session
    session = known or session_ensure(
        tenant=scope.tenant,
        key=scope.session_key,
        title=title,
        source_format=source_format,
        source_name="proxy",
    )
    recorded = None
    if request is not None and known is not None:
        recorded = _place_indexed(session, scope.lane, scope.branch, request, items, every)
    if recorded is None:
        if scope.branch is not None:
            candidates = [journal_ensure(session=session, lane=scope.lane, branch=scope.branch)]
        else:
            candidates = list(
                Journal.objects.filter(session=session, lane=scope.lane).order_by("pk")
            ) or [journal_ensure(session=session, lane=scope.lane)]
        recorded = _place(candidates, items, every)
    if request is not None:
        _index_add(session, scope.lane, scope.branch, request, items, recorded)
    return recorded


def conversation_record(
    *,
    items: Sequence[ParsedEntry],
    scope: ProxyScope | None = None,
    journal: Journal | None = None,
    title: str = "",
    source_format: str = "",
    every: bool = False,
    request: RequestPrefix | None = None,
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
        request: the request's messages as sent, when ``items`` are read from them: the
            history is then placed through the prefix index (:func:`_place_indexed`: the
            stored prefix found from one digest, only the suffix read and keyed) and the
            request's own placement is recorded there for the next call.

    Returns:
        :class:`Recorded`. Idempotent: the same history again appends nothing. One
        transaction: a refused item leaves nothing written, session included.

    Concurrent calls of one session wait for each other (:func:`session_lock`), so each
    places its history against what the others wrote: two histories that extend one prefix
    with different messages land as siblings (the second on a new branch), never as a
    conflict.

    Raises:
        EntryInvalid: from ``journal_append``; nothing written.
        ConflictError, GapError: only when a writer outside the proxy raced it twice.
    """
    if journal is not None:
        tenant_id, session_key = journal.session.tenant_id, journal.session.key
    else:
        assert scope is not None, "a scope or a journal is needed"
        tenant_id, session_key = scope.tenant.pk, scope.session_key
    for attempt in (1, 2):
        try:
            with session_lock(tenant_id, session_key):
                if journal is not None:
                    recorded = _place([journal], items, every)
                else:
                    assert scope is not None
                    recorded = _scope_place(scope, items, every, request, title, source_format)
            if scope is not None:
                scope.session = recorded.journal.session
            return recorded
        except (ConflictError, GapError):
            # only a writer outside the proxy (an import, the REST API) can race the lock
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


# ---------------------------------------------------------------- compaction


def _meter() -> Meter:
    encoding = settings.TOKEN_ENCODING
    return Meter(count=lambda text: count_tokens(text, encoding), label=source_label(encoding))


def request_tokens(surface: str, body: Mapping[str, Any], recorded: Recorded | None = None) -> int:
    """Tokens of the request as sent, counted as the context builder counts (tiktoken); a
    Responses request is counted as the Chat Completions messages its items map to
    (:func:`proxy_app.matching.responses_as_chat`).

    Args:
        recorded: the request's placement: when the prefix index found its first
            ``known_messages`` messages with their count, only the messages after them are
            counted, and the whole count is stored for the next call.
    """
    meter = _meter()
    if surface == "responses":
        messages = responses_as_chat(responses_input(dict(body)))
        if body.get("instructions"):
            messages.insert(0, {"role": "system", "content": body["instructions"]})
        return meter.per_request + sum(meter.message(m) for m in messages)
    sent = body["messages"]
    known, counted = 0, 0
    if recorded is not None and recorded.known_tokens >= 0:
        known, counted = recorded.known_messages, recorded.known_tokens
    counted += sum(meter.message(m) for m in sent[known:])
    if recorded is not None:
        _index_tokens(recorded, counted)
    total = meter.per_request + counted
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
    """``(working_budget, window)`` of a call.

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
    meter = _meter()
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
    when that fails or leaves ledger facts out), and until the next fold lands the calls after it send that request
    followed by their new messages while they fit (:func:`_compacted_extend`): the part
    before the new messages stays byte for byte the same, for the provider's prompt cache.
    Anthropic requests get the client's ``cache_control`` markers back and one at the end
    of the stable prefix (:mod:`proxy_app.caching`).

    Args:
        working, window: from :func:`budgets_for` (checked before anything is journaled).
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
OUTPUT_USAGE = {
    "openai": "completion_tokens",
    "anthropic": "output_tokens",
    "responses": "output_tokens",
}


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
    rows = _stored(first.journal)
    end = first.seq
    for row in rows[first.seq :]:
        if row.role != "assistant" and row.kind != "reasoning":
            break
        end = row.seq
    return [_as_item(e) for e in rows[:end]]
