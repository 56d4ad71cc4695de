"""Recovery: attempts at a fold, and the agent's search, read and analyst tools (DESIGN.md 7).

Every entry point calls one function here:

* :func:`recovery_run`: one bounded attempt (trigger scan, frozen snapshot, searches,
  hash-verified reads, claims) that always leaves a :class:`~recovery_app.models.Receipt`
  and never raises for a failed attempt (outcome ``failed``; compaction carries on);
* before every fold, :mod:`recovery_app.fold` (the hook the one fold service calls) runs
  :func:`recovery_run` and hands the fold the recovered ops, so recovered facts are judged
  like any other before they enter the ledger, each with a pointer to its entry;
* :func:`recovery_search`, :func:`recovery_read`, :func:`recovery_analyst`: the agent's
  tools. Their scope is always the caller's journal (from its credentials and session),
  never a parameter.

Order of an attempt (seed 000, "What comes back"): admission against the snapshot's scope
and revision (denied: stop, before any model), the trigger scan (no match: stop, no
snapshot, no model), the snapshot frozen, then rounds of search and read within the budget.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction

from journal_app.errors import DomainError
from journal_app.models import Entry, Journal
from ledger_app.models import Fold
from recovery_app import analyst as lexical_analyst
from recovery_app.analyst import AnalystModel, ReadView
from recovery_app.budget import Budget, BudgetExhausted, BudgetMeter
from recovery_app.cursors import Cursor, CursorRefused, cursor_open, cursor_sign, derive_key
from journal_app.privacy import filter_content, filter_text
from recovery_app.lexical import Query, QueryInvalid, parse_query, snippet
from recovery_app.models import Receipt
from recovery_app.search import Lead, backend, index_sync
from recovery_app.snapshot import (
    Denied,
    ReadCheck,
    Snapshot,
    StoredChunk,
    StoredEntry,
    admit,
    verify_read,
)
from recovery_app.triggers import WINDOW, ScanItem, TriggerScan, find_identifiers, scan
from recovery_app.writer import recovered_fact

log = logging.getLogger("ledgerkeep.recovery")
#: How far (in seq) a tool call's result is looked for before the whole journal is.
PAIR_WINDOW = 256

__all__ = [
    "BudgetExhausted",
    "CursorRefused",
    "Denied",
    "EntryNotFound",
    "QueryInvalid",
    "RecoveryError",
    "recovery_analyst",
    "recovery_budget",
    "recovery_read",
    "recovery_run",
    "recovery_search",
    "snapshot_freeze",
]


class RecoveryError(DomainError):
    """Base of recovery's own domain errors (the pure modules' errors are listed in __all__)."""

    status = 422
    code = "invalid_request"


class EntryNotFound(RecoveryError):
    """No entry of that seq or hash in the caller's journal at the revision (HTTP 404)."""

    status = 404
    code = "not_found"


def _setting(name: str, default: Any) -> Any:
    value = getattr(settings, name, default)
    return default if value is None else value


def recovery_budget() -> Budget:
    """The budget from ``settings.RECOVERY_MAX_*`` (defaults: DESIGN.md section 7)."""
    return Budget(
        rounds=int(_setting("RECOVERY_MAX_ROUNDS", 3)),
        searches=int(_setting("RECOVERY_MAX_SEARCHES", 4)),
        reads=int(_setting("RECOVERY_MAX_READS", 8)),
        sources=int(_setting("RECOVERY_MAX_SOURCES", 4)),
        tokens=int(_setting("RECOVERY_MAX_TOKENS", 8_000)),
        seconds=float(_setting("RECOVERY_MAX_SECONDS", 30.0)),
    )


def analyst_model_from_settings() -> AnalystModel | None:
    """The model-backed analyst when a model is configured, else ``None`` (the offline default).

    Configured means ``OPENAI_BASE_URL`` plus ``RECOVERY_ANALYST_MODEL`` (or, failing that,
    ``WRITER_MODEL``); calls go through :class:`ledger_app.model_client.ModelClient`.
    Called only once an attempt has been admitted and triggered.
    """
    base_url = _setting("OPENAI_BASE_URL", "")
    model = _setting("RECOVERY_ANALYST_MODEL", "") or _setting("WRITER_MODEL", "")
    if not (base_url and model):
        return None
    from ledger_app.model_client import ModelClient, ModelConfig

    config = dataclasses.replace(ModelConfig.from_settings(settings), writer_model=model)
    return lexical_analyst.ModelAnalyst(ModelClient(config), model)


# --- snapshots and reads ------------------------------------------------------------------


def _journal(journal: Journal) -> Journal:
    return Journal.objects.select_related("session__tenant").get(pk=journal.pk)


def _snapshot_spec(journal: Journal, revision: int, exclude: Sequence[int] = ()) -> Snapshot:
    scope = journal.scope_fields()
    return Snapshot(
        **scope, revision=revision, journal_id=journal.pk, exclude_seqs=tuple(sorted(exclude))
    )


def snapshot_freeze(
    *, journal: Journal, revision: int | None = None, exclude_seqs: Sequence[int] = ()
) -> Snapshot:
    """Freeze ``journal`` (its scope) at ``revision`` (default: its head).

    Records the entry hash at the revision and makes sure the search index holds every entry
    up to it. Raw entries with ``seq <= revision`` are admitted; ``exclude_seqs`` never are.

    Raises:
        RecoveryError: ``revision`` is negative or beyond the journal's head.
    """
    journal = _journal(journal)
    rev = journal.head_seq if revision is None else int(revision)
    if rev < 0 or rev > journal.head_seq:
        raise RecoveryError(
            f"revision {rev} is outside journal {journal.scope_label} (head {journal.head_seq})"
        )
    head_hash = (
        Entry.objects.filter(journal=journal, seq=rev).values_list("entry_hash", flat=True).first()
        or ""
    )
    index_sync(journal=journal, upto=rev)
    spec = _snapshot_spec(journal, rev, exclude_seqs)
    return Snapshot(**{**spec.__dict__, "head_hash": head_hash})


def _stored(entry: Entry) -> StoredEntry:
    j = entry.journal
    return StoredEntry(
        scope=j.scope_fields(),
        journal_id=j.pk,
        chunk_bytes=j.chunk_bytes,
        seq=entry.seq,
        kind=entry.kind,
        role=entry.role,
        tool_call_id=entry.tool_call_id,
        derived=entry.derived,
        body=entry.body,
        body_hash=entry.body_hash,
        byte_length=entry.byte_length,
        meta=entry.meta,
        meta_hash=entry.meta_hash,
        parent_hash=entry.parent_hash,
        entry_hash=entry.entry_hash,
        chunks=[StoredChunk(c.position, c.offset, c.length, c.hash) for c in entry.chunks.all()],
        tool_name=entry.tool_name,
        is_error=entry.is_error,
    )


@dataclass
class Read:
    """An entry re-read in full and checked: the row, the check, and the analyst's view."""

    entry: Entry
    check: ReadCheck
    view: ReadView
    admitted: bool = False

    def record(self, query: str = "") -> dict[str, Any]:
        """The receipt's line for this read."""
        e = self.entry
        return {
            "seq": e.seq,
            "entry": e.entry_hash,
            "kind": e.kind,
            "role": e.role,
            "tokens": e.token_count,
            "query": query,
            **self.check.to_dict(),
        }


def _reread(entry_id: int) -> Entry | None:
    return (
        Entry.objects.select_related("journal__session__tenant")
        .prefetch_related("chunks")
        .filter(pk=entry_id)
        .first()
    )


def read_verify(snapshot: Snapshot, entry: Entry, *, lead_seq: int, lead_hash: str) -> Read:
    """Check a re-read ``entry`` against ``snapshot`` (:func:`recovery_app.snapshot.verify_read`)."""
    check = verify_read(snapshot, _stored(entry), lead_seq=lead_seq, lead_hash=lead_hash)
    chunks = sorted((c.position, c.offset, c.length) for c in entry.chunks.all())
    view = ReadView(
        seq=entry.seq,
        entry_hash=entry.entry_hash,
        kind=entry.kind,
        role=entry.role,
        content=entry.content,
        body=entry.body,
        chunks=chunks,
        tool_call_id=entry.tool_call_id,
        tool_name=entry.tool_name,
        is_error=entry.is_error,
        derived=entry.derived,
        verified=check.ok,
        reason=check.reason,
    )
    return Read(entry, check, view)


# --- one attempt ----------------------------------------------------------------------------


@dataclass
class _Attempt:
    snapshot: Snapshot
    meter: BudgetMeter
    leads_per_query: int
    queries: list[dict[str, Any]] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    read_lines: list[dict[str, Any]] = field(default_factory=list)
    by_hash: dict[str, Read] = field(default_factory=dict)

    @property
    def verified(self) -> list[Read]:
        """Reads that passed every check and were admitted as sources."""
        return [r for r in self.reads if r.admitted]

    def read(self, entry_id: int, lead_seq: int, lead_hash: str, query: str) -> Read | None:
        """Charge and perform one read; a verified one becomes a source."""
        if lead_hash in self.by_hash:
            known = self.by_hash[lead_hash]
            if query and query not in known.view.matched:
                known.view.matched.append(query)
            return known
        self.meter.charge_read()
        entry = _reread(entry_id)
        if entry is None:
            self.read_lines.append(
                {"seq": lead_seq, "entry": lead_hash, "ok": False, "failed": ["exists"],
                 "reason": "the entry is gone", "query": query}
            )  # fmt: skip
            return None
        try:
            self.meter.admit_tokens(entry.token_count)
        except BudgetExhausted:
            self.read_lines.append(
                {"seq": entry.seq, "entry": entry.entry_hash, "ok": False, "failed": [],
                 "tokens": entry.token_count, "query": query, "discarded": True,
                 "reason": "not admitted: it would pass the token budget"}
            )  # fmt: skip
            raise
        r = read_verify(self.snapshot, entry, lead_seq=lead_seq, lead_hash=lead_hash)
        if query:
            r.view.matched.append(query)
        self.reads.append(r)
        self.by_hash[entry.entry_hash] = r
        line = r.record(query)
        self.read_lines.append(line)
        if not r.check.ok:
            line["discarded"] = True
            return r
        try:
            self.meter.add_source(entry.entry_hash)
        except BudgetExhausted:
            line.update(discarded=True, reason="verified, not admitted: the source budget is spent")
            r.view.verified, r.view.reason = False, line["reason"]
            raise
        r.admitted = True
        return r

    def read_pair(self, r: Read) -> None:
        """Read the other half of a verified tool call or result (within the budget)."""
        e = r.entry
        if not r.admitted or not e.tool_call_id or e.kind not in ("tool_call", "tool_result"):
            return
        other_kind = "tool_result" if e.kind == "tool_call" else "tool_call"
        pairs = Entry.objects.filter(
            journal_id=self.snapshot.journal_id,
            kind=other_kind,
            tool_call_id=e.tool_call_id,
            seq__lte=self.snapshot.revision,
        )
        # a result follows its call closely: look near it first (a range of the seq index),
        # the whole journal only when nothing is there
        near = (
            {"seq__gt": e.seq, "seq__lte": e.seq + PAIR_WINDOW}
            if e.kind == "tool_call"
            else {"seq__lt": e.seq, "seq__gte": e.seq - PAIR_WINDOW}
        )
        fields = ("id", "seq", "entry_hash")
        other = pairs.filter(**near).order_by("seq").values_list(*fields).first()
        if other is None:
            other = pairs.order_by("seq").values_list(*fields).first()
        if other is not None and other[2] not in self.by_hash:
            paired = self.read(other[0], other[1], other[2], "")
            if paired is not None and r.view.matched:
                paired.view.matched.extend(
                    q for q in r.view.matched if q not in paired.view.matched
                )

    def search(self, round_no: int, query: str) -> None:
        """Charge one search, record it, and read its leads."""
        self.meter.charge_search()
        q = parse_query(query)
        leads = backend().search(
            journal_id=self.snapshot.journal_id,
            revision=self.snapshot.revision,
            query=q,
            limit=self.leads_per_query,
            exclude=self.snapshot.exclude_seqs,
        )
        self.queries.append(
            {
                "round": round_no,
                "query": q.text,
                "leads": [{"seq": lead.seq, "entry": lead.entry_hash} for lead in leads],
            }
        )
        for lead in leads:
            r = self.read(lead.entry_id, lead.seq, lead.entry_hash, q.text)
            if r is not None:
                self.read_pair(r)


def _scan_items(journal: Journal, revision: int, window: int) -> list[ScanItem]:
    rows = (
        Entry.objects.filter(journal=journal, seq__lte=revision)
        .order_by("-seq")
        .only("seq", "kind", "role", "body", "derived")[:window]
    )
    return [ScanItem(e.seq, e.kind, e.role, e.text, e.derived) for e in reversed(list(rows))]


def _ledger_notes(journal: Journal) -> list[str]:
    fold = Fold.objects.filter(journal=journal).order_by("-number").first()
    if fold is None:
        return []
    return [
        f.get("text", "") for f in fold.state_dict.get("facts", {}).values() if not f.get("pin")
    ]


def _question(items: Sequence[ScanItem], trigger: TriggerScan) -> str:
    return "\n".join(i.text for i in items if i.seq in trigger.trigger_seqs)


def _claims(
    attempt: _Attempt, question: str, model: AnalystModel | None, use_model: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    views = {r.entry.entry_hash: r.view for r in attempt.reads}
    queries = [q["query"] for q in attempt.queries]
    if model is not None and use_model and attempt.verified:
        proposed = model.propose(
            filter_text(question).text,  # the question may quote a secret too
            lexical_analyst.model_reads([r.view for r in attempt.verified]),
        )
        cited = {
            str(c.get("entry", "")).removeprefix("sha256:")
            for claim in proposed
            for c in claim.get("citations") or []
            if isinstance(c, dict)
        }
        for e in Entry.objects.filter(
            journal_id=attempt.snapshot.journal_id,
            entry_hash__in=cited - views.keys(),
            derived=True,
        ):
            # never read as evidence, but named so a citation of it is rejected for what it is
            views[e.entry_hash] = ReadView(
                e.seq, e.entry_hash, e.kind, e.role, {}, e.body, derived=True, verified=False
            )
        proposed = lexical_analyst.complete_citations(proposed, views)
    else:
        proposed = lexical_analyst.analyse(queries, [r.view for r in attempt.verified])
    return lexical_analyst.check_claims(proposed, views)


def recovery_run(
    *,
    journal: Journal,
    fold: Fold | None = None,
    revision: int | None = None,
    query: str | None = None,
    question: str | None = None,
    kind: str | None = None,
    model: AnalystModel | None | str = "auto",
    budget: Budget | None = None,
    clock: Callable[[], float] | None = None,
) -> Receipt:
    """Run one bounded recovery attempt for ``journal`` and return its stored receipt.

    Args:
        journal: the caller's journal; the scope of every request is this journal's.
        fold: the fold the attempt runs after (its revision and scope define the snapshot),
            or ``None`` for the journal's head.
        revision: the revision the request has seen (default: the snapshot's). Lower than the
            snapshot's revision: denied.
        query: a manual query instead of the trigger scan (``manage.py recover --query``).
        question: the agent's question (the analyst): no trigger scan, terms from the text.
        kind: the receipt's kind (default ``fold``, ``manual`` with a query, ``analyst``).
        model: an analyst model, ``None`` for the lexical analyst, or ``"auto"`` to build one
            from settings (only after admission and the trigger, never before).
        budget: limits (default :func:`recovery_budget`).
        clock: seconds, for the time limit (default ``time.monotonic``).

    Returns:
        The :class:`Receipt` (outcome ``not_triggered``, ``denied``, ``nothing_found``,
        ``recovered``, ``budget_exhausted`` or ``failed``). Never raises for a failed attempt.
    """
    clock = clock or time.monotonic
    limits = budget or recovery_budget()
    meter = BudgetMeter(limits, clock)
    journal = _journal(journal)
    kind = kind or ("manual" if query else "analyst" if question is not None else "fold")
    data: dict[str, Any] = {
        "journal": journal,
        "kind": kind,
        "fold": fold,
        "budget": limits.to_dict(),
        "question": question or "",
    }
    requests_before = 0
    used_model: AnalystModel | None = None
    attempt: _Attempt | None = None
    try:
        with transaction.atomic():
            target = _journal(fold.journal) if fold is not None else journal
            snap_revision = fold.revision if fold is not None else journal.head_seq
            spec = _snapshot_spec(target, snap_revision)
            data["snapshot"] = {**spec.to_dict(), "frozen": False}
            asked = snap_revision if revision is None else int(revision)
            admit(spec, scope=journal.scope_fields(), revision=asked)
            if asked > target.head_seq:
                raise Denied(
                    "revision",
                    f"the request is at revision {asked}, beyond the journal's head "
                    f"{target.head_seq}",
                )
            window = WINDOW  # DESIGN.md 7: the most recent 24 entries, not configurable
            items = _scan_items(target, snap_revision, window)
            if query is not None:
                parse_query(query)
                trigger = TriggerScan(True, None, terms=[query], reason=f"manual query {query!r}")
            elif question is not None:
                terms = [v for _, v in find_identifiers(question)]
                trigger = TriggerScan(True, None, terms=terms, reason="the agent's question")
            else:
                previous = (
                    Receipt.objects.filter(journal=journal, kind=Receipt.Kind.FOLD)
                    .order_by("-scanned_to")
                    .values_list("scanned_to", flat=True)
                    .first()
                    or 0
                )
                trigger = scan(items, window=window, skip_upto=previous)
                data["scanned_to"] = trigger.window[1] if trigger.window else 0
            data["trigger"] = trigger.to_dict()
            if not trigger.fired:
                data["snapshot"] = {}
                data.update(outcome=Receipt.Outcome.NOT_TRIGGERED, reason=trigger.reason)
                return _receipt(data, meter, None, 0)
            snapshot = snapshot_freeze(
                journal=target, revision=snap_revision, exclude_seqs=trigger.trigger_seqs
            )
            data["snapshot"] = {**snapshot.to_dict(), "frozen": True}
            used_model = analyst_model_from_settings() if isinstance(model, str) else model
            requests_before = used_model.requests if used_model is not None else 0
            q_text = question if question is not None else (query or _question(items, trigger))
            plan = lexical_analyst.plan_queries(
                q_text,
                trigger.terms,
                lexical_analyst.suggest_terms(q_text, _ledger_notes(target)),
            )
            attempt = _Attempt(snapshot, meter, int(_setting("RECOVERY_LEADS_PER_QUERY", 3)))
            exhausted: BudgetExhausted | None = None
            try:
                for round_no, queries in enumerate(plan, start=1):
                    if attempt.verified:
                        break
                    meter.start_round()
                    for q in queries:
                        attempt.search(round_no, q)
            except BudgetExhausted as exc:
                exhausted = exc
            accepted, rejected = _claims(attempt, q_text, used_model, exhausted is None)
            kinds = {r.entry.entry_hash: (r.entry.kind, r.entry.is_error) for r in attempt.reads}
            data["claims"] = accepted
            data["rejected_claims"] = rejected
            data["recovered"] = [
                {"op": "add", "fact": recovered_fact(c, revision=snapshot.revision, kinds=kinds)}
                for c in accepted
            ]
            if exhausted is not None:
                data.update(outcome=Receipt.Outcome.BUDGET_EXHAUSTED, reason=str(exhausted))
            elif accepted:
                data.update(
                    outcome=Receipt.Outcome.RECOVERED,
                    reason=f"{len(accepted)} claim(s) from {len(attempt.verified)} verified read(s)",
                )
            else:
                discarded = [line for line in attempt.read_lines if not line.get("ok")]
                why = (
                    f"{len(discarded)} lead(s) discarded: "
                    + "; ".join(f"seq {d['seq']}: {d['reason']}" for d in discarded)
                    if discarded
                    else f"no raw entry matched {len(attempt.queries)} quer{'y' if len(attempt.queries) == 1 else 'ies'}"
                )
                data.update(outcome=Receipt.Outcome.NOTHING_FOUND, reason=why)
    except Denied as exc:
        data.update(outcome=Receipt.Outcome.DENIED, reason=str(exc))
    except Exception as exc:  # a failed attempt is recorded; compaction carries on
        log.exception("recovery attempt failed for %s", journal.scope_label)
        data.update(outcome=Receipt.Outcome.FAILED, reason=f"{type(exc).__name__}: {exc}")
    requests = (used_model.requests - requests_before) if used_model is not None else 0
    data["analyst"] = used_model.id if used_model is not None else "lexical"
    return _receipt(data, meter, attempt, requests)


def _receipt(
    data: dict[str, Any], meter: BudgetMeter, attempt: _Attempt | None, requests: int
) -> Receipt:
    if attempt is not None:
        data["queries"] = attempt.queries
        data["reads"] = attempt.read_lines
        data["sources"] = [
            {
                "seq": r.entry.seq,
                "entry": r.entry.entry_hash,
                "kind": r.entry.kind,
                "role": r.entry.role,
            }
            for r in attempt.verified
        ]
    usage = meter.usage()
    data.update(
        usage=usage, tokens=usage["tokens"], seconds=usage["seconds"], model_requests=requests
    )
    return Receipt.objects.create(**data)


# --- the agent's tools ----------------------------------------------------------------------


def _cursor_key() -> bytes:
    return derive_key(settings.SECRET_KEY)


@dataclass
class SearchPage:
    """One page of search results (leads) at a frozen revision."""

    query: str
    revision: int
    hits: list[dict[str, Any]]
    next_cursor: str | None


def recovery_search(
    *,
    journal: Journal,
    query: str,
    cursor: str | None = None,
    limit: int | None = None,
    now: float | None = None,
) -> SearchPage:
    """Search the caller's journal: leads with filtered snippets, paginated by signed cursors.

    Args:
        journal: the caller's journal (scope from credentials and session, never a parameter).
        query: terms (see :func:`recovery_app.lexical.parse_query`).
        cursor: from a previous page: the revision stays frozen and the page continues.
        limit: results per page (default ``RECOVERY_PAGE_SIZE``, 10; at most 50).
        now: Unix seconds (default: the clock).

    Returns:
        :class:`SearchPage`: hits ``{"seq", "entry", "kind", "role", "tool_name",
        "snippet", "filtered", "filter_labels"}`` in seq order; ``next_cursor`` when more.

    Raises:
        QueryInvalid: nothing searchable, too long, too many terms.
        CursorRefused: tampered, expired, another scope, another query.
    """
    now = time.time() if now is None else now
    journal = _journal(journal)
    q = parse_query(query)
    size = max(1, min(int(limit or _setting("RECOVERY_PAGE_SIZE", 10)), 50))
    if cursor:
        c = cursor_open(_cursor_key(), cursor, scope=journal.scope_label, query=q.text, now=now)
        revision, after = c.revision, c.position
    else:
        revision, after = journal.head_seq, 0
    snapshot = snapshot_freeze(journal=journal, revision=revision)
    leads = backend().search(
        journal_id=journal.pk, revision=snapshot.revision, query=q, after=after, limit=size + 1
    )
    page = leads[:size]
    hits = _hits(page, q)
    next_cursor = None
    if len(leads) > size:
        ttl = int(_setting("RECOVERY_CURSOR_TTL_SECONDS", 900))
        next_cursor = cursor_sign(
            _cursor_key(),
            Cursor(journal.scope_label, snapshot.revision, q.text, page[-1].seq, int(now) + ttl),
        )
    return SearchPage(q.text, snapshot.revision, hits, next_cursor)


def _hits(leads: Sequence[Lead], q: Query) -> list[dict[str, Any]]:
    rows = {e.pk: e for e in Entry.objects.filter(pk__in=[lead.entry_id for lead in leads])}
    out = []
    for lead in leads:
        e = rows[lead.entry_id]
        f = filter_text(snippet(q, e.text), kind=e.kind)
        out.append(
            {
                "seq": e.seq,
                "entry": "sha256:" + e.entry_hash,
                "kind": e.kind,
                "role": e.role,
                "tool_name": e.tool_name,
                "snippet": f.text,
                "filtered": f.filtered,
                "filter_labels": f.labels,
            }
        )
    return out


@dataclass
class ReadResult:
    """An entry re-read in full, verified, and filtered for the caller."""

    revision: int
    seq: int
    entry: str
    kind: str
    role: str
    tool_call_id: str
    tool_name: str
    verified: bool
    checks: dict[str, bool]
    reason: str
    content: dict[str, Any] | None
    text: str | None
    filtered: bool
    filter_labels: list[str]
    byte_length: int
    body_hash: str
    chunks: list[dict[str, Any]]


def recovery_read(
    *, journal: Journal, seq: int | None = None, entry: str | None = None
) -> ReadResult:
    """Read one entry of the caller's journal in full, verify it, and filter it.

    The entry is re-read with every chunk and checked against a snapshot of the caller's
    journal at its head (scope, seq, raw, entry hash, body hash, byte length, metadata hash,
    every chunk). Content is returned only when every check passes; a summary or compaction
    marker returns nothing (``verified`` false, with the reason). Secrets and hidden
    reasoning are filtered out and the result says ``filtered`` with labels.

    Args:
        journal: the caller's journal.
        seq / entry: which entry (``entry`` is ``sha256:<hex>`` or hex); exactly one.

    Raises:
        EntryNotFound: no such entry in the caller's journal (other scopes' entries do not
            exist for the caller).
        RecoveryError: neither or both of ``seq`` and ``entry``.
    """
    if (seq is None) == (entry is None):
        raise RecoveryError("give exactly one of seq and entry")
    journal = _journal(journal)
    snapshot = snapshot_freeze(journal=journal)
    qs = Entry.objects.filter(journal=journal, seq__lte=snapshot.revision)
    if seq is not None:
        row = qs.filter(seq=seq).values_list("id", "seq", "entry_hash").first()
        what = f"seq {seq}"
    else:
        hex_ = str(entry).strip().lower().removeprefix("sha256:")
        row = qs.filter(entry_hash=hex_).values_list("id", "seq", "entry_hash").first()
        what = f"entry {entry}"
    if row is None:
        raise EntryNotFound(
            f"{what} is not in {journal.scope_label} at revision {snapshot.revision}"
        )
    found = _reread(row[0])
    if found is None:
        raise EntryNotFound(f"{what} is not in {journal.scope_label}")
    r = read_verify(snapshot, found, lead_seq=row[1], lead_hash=row[2])
    content: dict[str, Any] | None = None
    text: str | None = None
    labels: list[str] = []
    if r.check.ok:
        content, labels = filter_content(found.kind, found.content)
        f = filter_text(found.text, kind=found.kind)
        text = f.text
        labels += [x for x in f.labels if x not in labels]
    return ReadResult(
        revision=snapshot.revision,
        seq=found.seq,
        entry="sha256:" + found.entry_hash,
        kind=found.kind,
        role=found.role,
        tool_call_id=found.tool_call_id,
        tool_name=found.tool_name,
        verified=r.check.ok,
        checks=r.check.checks,
        reason=r.check.reason,
        content=content,
        text=text,
        filtered=bool(labels),
        filter_labels=labels,
        byte_length=found.byte_length,
        body_hash="sha256:" + found.body_hash,
        chunks=[
            {
                "position": c.position,
                "offset": c.offset,
                "length": c.length,
                "hash": "sha256:" + c.hash,
            }
            for c in found.chunks.all()
        ],
    )


def recovery_analyst(
    *,
    journal: Journal,
    question: str,
    model: AnalystModel | None | str = "auto",
    budget: Budget | None = None,
    clock: Callable[[], float] | None = None,
) -> Receipt:
    """The agent's bounded analyst: plan lexical queries, read, return checked claims.

    Same attempt as :func:`recovery_run` (budget, snapshot of the caller's journal at its
    head, hash-verified reads) driven by ``question`` instead of the trigger scan. Claims
    are in ``receipt.claims`` (``current``/``historical``/``reported``/``unresolved``, exact
    quotes with byte ranges); rejected ones, with the reason, in ``receipt.rejected_claims``.

    Raises:
        QueryInvalid: the question has nothing searchable.
    """
    if not any(lexical_analyst.plan_queries(question)):
        raise QueryInvalid(f"question {question!r} has nothing to search for")
    return recovery_run(journal=journal, question=question, model=model, budget=budget, clock=clock)
