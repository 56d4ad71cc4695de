"""One bounded recovery attempt, always leaving a receipt (docs/design.md section 7).

Order (seed 000, "What comes back"): admission against the snapshot's scope and revision
(denied: stop, before any model), the trigger scan over the latest 24 entries (no match:
stop, no snapshot, no model), the snapshot frozen, then rounds of search and read within the
budget (3 rounds, 4 searches, 8 reads, 4 sources, about 8,000 tokens, 30 seconds).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction

from journal_app.models import Entry, Journal
from journal_app.privacy import filter_text
from ledger_app.models import Fold
from recovery_app import analyst as lexical_analyst
from recovery_app.analyst import AnalystModel
from recovery_app.budget import Budget, BudgetExhausted, BudgetMeter
from recovery_app.citations import ReadView, check_claims, complete_citations
from recovery_app.lexical import parse_query
from recovery_app.models import Receipt
from recovery_app.query_plan import plan_queries, suggest_terms
from recovery_app.search import backend
from recovery_app.services.from_settings import analyst_model_from_settings, recovery_budget
from recovery_app.services.reads import (
    Read,
    entry_reread,
    journal_reload,
    read_verify,
    snapshot_freeze,
    snapshot_spec,
)
from recovery_app.snapshot import (
    Denied,
    Snapshot,
    admit,
)
from recovery_app.triggers import WINDOW, ScanItem, TriggerScan, find_identifiers, scan
from recovery_app.writer import recovered_fact

log = logging.getLogger("ledgerkeep.recovery")
#: How far (in seq) a tool call's result is looked for before the whole journal is.
PAIR_WINDOW = 256


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
        entry = entry_reread(entry_id)
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
    left = attempt.meter.budget.seconds - attempt.meter.elapsed
    if model is not None and use_model and attempt.verified and left > 0:
        # the model call is inside the recovery budget: bounded by the time left
        bound = {"timeout_s": left} if getattr(model, "bounded", False) else {}
        proposed = model.propose(
            filter_text(question).text,  # the question may quote a secret too
            lexical_analyst.model_reads([r.view for r in attempt.verified]),
            **bound,
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
        proposed = complete_citations(proposed, views)
    else:
        proposed = lexical_analyst.analyse(queries, [r.view for r in attempt.verified])
    return check_claims(proposed, views)


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
    journal = journal_reload(journal)
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
            target = journal_reload(fold.journal) if fold is not None else journal
            snap_revision = fold.revision if fold is not None else journal.head_seq
            spec = snapshot_spec(target, snap_revision)
            data["snapshot"] = {**spec.to_dict(), "frozen": False}
            asked = snap_revision if revision is None else int(revision)
            admit(spec, scope=journal.scope_fields(), revision=asked)
            if asked > target.head_seq:
                raise Denied(
                    "revision",
                    f"the request is at revision {asked}, beyond the journal's head "
                    f"{target.head_seq}",
                )
            window = WINDOW  # docs/design.md 7: the most recent 24 entries, not configurable
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
            plan = plan_queries(
                q_text,
                trigger.terms,
                suggest_terms(q_text, _ledger_notes(target)),
            )
            attempt = _Attempt(snapshot, meter, int(settings.RECOVERY_LEADS_PER_QUERY))
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
            errors_before = len(getattr(used_model, "errors", None) or [])
            accepted, rejected = _claims(attempt, q_text, used_model, exhausted is None)
            analyst_errors = (getattr(used_model, "errors", None) or [])[errors_before:]
            kinds = {r.entry.entry_hash: (r.entry.kind, r.entry.is_error) for r in attempt.reads}
            data["claims"] = accepted
            data["rejected_claims"] = rejected
            data["recovered"] = [
                {"op": "add", "fact": recovered_fact(c, revision=snapshot.revision, kinds=kinds)}
                for c in accepted
            ]
            if exhausted is not None:
                data.update(outcome=Receipt.Outcome.BUDGET_EXHAUSTED, reason=str(exhausted))
            elif analyst_errors and not accepted:
                # the reads were never judged: not "nothing found"
                over = meter.elapsed >= meter.budget.seconds
                data.update(
                    outcome=(Receipt.Outcome.BUDGET_EXHAUSTED if over else Receipt.Outcome.FAILED),
                    reason=(
                        "the analyst's model call gave no answer "
                        + (
                            f"within RECOVERY_MAX_SECONDS ({meter.budget.seconds:g} s)"
                            if over
                            else "it could use"
                        )
                        + f" after {len(attempt.verified)} verified read(s): {analyst_errors[-1]}"
                    ),
                )
            elif accepted:
                data.update(
                    outcome=Receipt.Outcome.RECOVERED,
                    reason=f"{len(accepted)} claim(s) from {len(attempt.verified)} verified read(s)",
                )
            else:
                data.update(
                    outcome=Receipt.Outcome.NOTHING_FOUND,
                    reason=nothing_found_reason(
                        queries=len(attempt.queries),
                        verified=len(attempt.verified),
                        discarded=[line for line in attempt.read_lines if not line.get("ok")],
                        rejected=rejected,
                    ),
                )
    except Denied as exc:
        data.update(outcome=Receipt.Outcome.DENIED, reason=str(exc))
    except Exception as exc:  # a failed attempt is recorded; compaction carries on
        log.exception("recovery attempt failed for %s", journal.scope_label)
        data.update(outcome=Receipt.Outcome.FAILED, reason=f"{type(exc).__name__}: {exc}")
    requests = (used_model.requests - requests_before) if used_model is not None else 0
    data["analyst"] = used_model.id if used_model is not None else "lexical"
    usage = getattr(used_model, "usage", None)
    return _receipt(data, meter, attempt, requests, usage() if callable(usage) else None)


def nothing_found_reason(
    *, queries: int, verified: int, discarded: list[dict[str, Any]], rejected: list[dict[str, Any]]
) -> str:
    """Why an attempt recovered nothing, consistent with what it read (README, "Recovery").

    Args:
        queries: searches run.
        verified: reads that passed every check (the receipt's sources).
        discarded: read lines that failed a check (``seq``, ``reason``).
        rejected: claims proposed from the verified reads and rejected (``reason``).

    Returns:
        One sentence: verified reads that yielded no accepted claim are said to be read (and
        why no claim stood), never "no raw entry matched"; that is said only when nothing
        was read at all.
    """
    parts = []
    if verified:
        said = f"{verified} verified read(s) gave no accepted claim"
        if rejected:
            said += ": " + "; ".join(f"claim rejected: {c.get('reason', '')}" for c in rejected[:3])
        else:
            said += ": the reads hold nothing the question asks about"
        parts.append(said)
    if discarded:
        parts.append(
            f"{len(discarded)} lead(s) discarded: "
            + "; ".join(f"seq {d.get('seq')}: {d.get('reason')}" for d in discarded[:5])
        )
    if not parts:
        parts.append(f"no raw entry matched {queries} quer{'y' if queries == 1 else 'ies'}")
    return "; ".join(parts)


def _receipt(
    data: dict[str, Any],
    meter: BudgetMeter,
    attempt: _Attempt | None,
    requests: int,
    model_usage: dict[str, Any] | None = None,
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
    if model_usage and model_usage.get("calls"):
        usage["model"] = model_usage  # the analyst's calls: added to the fold's usage
    data.update(
        usage=usage, tokens=usage["tokens"], seconds=usage["seconds"], model_requests=requests
    )
    for name in _FILTERED_FIELDS:
        if name in data:
            data[name] = _filtered(data[name])
    return Receipt.objects.create(**data)


#: Receipt fields that quote the journal (terms, queries, claims, reads): stored filtered,
#: like every other surface (journal_app.privacy), so no receipt page or endpoint shows a
#: secret. Hashes, seqs, budgets and usage are not text and pass unchanged.
_FILTERED_FIELDS = (
    "trigger",
    "queries",
    "question",
    "claims",
    "rejected_claims",
    "reason",
    "reads",
    "recovered",
)


def _filtered(value: Any) -> Any:
    if isinstance(value, str):
        return filter_text(value).text
    if isinstance(value, list):
        return [_filtered(v) for v in value]
    if isinstance(value, dict):
        return {k: _filtered(v) for k, v in value.items()}
    return value
