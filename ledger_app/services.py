"""Every state change of the ledger: folds, reviews, verification (DESIGN.md section 5).

``ledger_fold`` is the one function the command, the task, the API and the UI call to fold;
``ledger_review`` the one that decides a P0 retirement. Both lock the journal row, so there
is one ledger change at a time per branch (DESIGN.md section 9).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import rfc8785
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from journal_app.models import Entry, Journal, Membership
from journal_app.rounds import complete_prefix_end, group_rounds
from journal_app.services import entry_check
from journal_app.tokens import count_tokens, source_label
from ledger_app import reducer
from ledger_app.budget import plan_consolidation, render_fact
from ledger_app.facts import support_hashes
from ledger_app.loss import loss_report
from ledger_app.mechanical import EntryView, is_pin_source, pin_fact, required_pins
from ledger_app.model_client import ModelConfig
from ledger_app.model_writer import FALLBACK_NOTE as FALLBACK_NOTE  # re-exported: views
from ledger_app.model_writer import (
    Composition,
    FoldContext,
    ModelWriter,
    RoundRecord,
    WriterFailed,
    compose,
)
from ledger_app.models import Fold, FoldAttempt, Proposal, RetirementRequest, Verdict
from ledger_app.offline import OfflineWriter
from ledger_app.writers import MechanicalWriter, Writer

WRITERS: dict[str, type] = {"mechanical": MechanicalWriter, "offline": OfflineWriter}


class LedgerError(Exception):
    """Base of the ledger's domain errors."""


class FoldRefused(LedgerError):
    """A required pin is missing or altered, or a pin no longer matches its entry; nothing stored."""


class FoldFailed(LedgerError):
    """The writer's model was unreachable (or refused): the fold is recorded failed, nothing else.

    ``attempt`` is the stored ``failed`` :class:`~ledger_app.models.FoldAttempt`.
    """

    def __init__(self, message: str, *, attempt: FoldAttempt) -> None:
        super().__init__(message)
        self.attempt = attempt


class ReviewError(LedgerError):
    """A review that cannot be applied (not pending, bad decision)."""


class ReviewForbidden(LedgerError):
    """The user is not a reviewer (or admin) of the journal's tenant."""


@dataclass
class FoldResult:
    """``fold`` is the stored fold (new, or the existing one for the same range); ``created``.

    ``attempt`` is the :class:`~ledger_app.models.FoldAttempt` stored with a new fold.
    """

    fold: Fold | None
    created: bool
    reason: str = ""
    attempt: FoldAttempt | None = None


def entry_view(entry: Entry) -> EntryView:
    """The pure view of a row that the writers and :mod:`ledger_app.mechanical` read."""
    return EntryView(
        seq=entry.seq,
        entry_hash=entry.entry_hash,
        kind=entry.kind,
        role=entry.role,
        text=entry.text,
        content=entry.content,
        tool_call_id=entry.tool_call_id,
        tool_name=entry.tool_name,
        derived=entry.derived,
        is_error=entry.is_error,
        meta=entry.meta_dict,
    )


def range_hash(hashes: Sequence[str]) -> str:
    """Idempotency key of a fold: sha256 of the canonical list of covered entry hashes."""
    return hashlib.sha256(rfc8785.dumps(list(hashes))).hexdigest()


def latest_fold(journal: Journal, kind: str | None = None) -> Fold | None:
    """The journal's last fold (of ``kind`` if given), or ``None``."""
    qs = Fold.objects.filter(journal=journal)
    if kind:
        qs = qs.filter(kind=kind)
    return qs.order_by("-number").first()


def ledger_state(journal: Journal, fold: Fold | None = None) -> dict[str, Any]:
    """The ledger state after ``fold`` (default: the latest); the empty state if none."""
    fold = fold or latest_fold(journal)
    return fold.state_dict if fold else copy.deepcopy(reducer.EMPTY_STATE)


def _info(e: Entry, fold_number: int) -> dict[str, Any]:
    return {
        "seq": e.seq,
        "kind": e.kind,
        "role": e.role,
        "is_error": e.is_error,
        "derived": e.derived,
        "fold": fold_number,
    }


def _cited(ops: Sequence[dict[str, Any]]) -> set[str]:
    cited: set[str] = set()
    for op in ops:
        fact = op.get("fact")
        if isinstance(fact, dict) and isinstance(fact.get("support"), list):
            cited |= {
                s["entry"]
                for s in fact["support"]
                if isinstance(s, dict) and isinstance(s.get("entry"), str)
            }
        if isinstance(op.get("evidence"), list):
            cited |= {h for h in op["evidence"] if isinstance(h, str)}
    return cited


def _evidence(
    journal: Journal,
    covered: Sequence[Entry],
    ops: Sequence[dict[str, Any]],
    number: int,
    revision: int,
) -> dict[str, dict[str, Any]]:
    """Evidence index of a delta: covered entries plus earlier raw entries the ops cite."""
    evidence = {e.entry_hash: _info(e, number) for e in covered}
    missing = _cited(ops) - evidence.keys()
    if missing:
        ranges = list(
            Fold.objects.filter(journal=journal, kind=Fold.Kind.FOLD).values_list(
                "number", "seq_start", "seq_end"
            )
        )
        for e in Entry.objects.filter(journal=journal, entry_hash__in=missing, seq__lte=revision):
            owner = next((n for n, a, b in ranges if a <= e.seq <= b), number)
            evidence[e.entry_hash] = _info(e, owner)
    return evidence


def _active_tokens(state: dict[str, Any]) -> int:
    text = "\n".join(
        f["text"] for f in state.get("facts", {}).values() if f["lifecycle"] == "active"
    )
    return count_tokens(text, settings.TOKEN_ENCODING)


def _provider_usage(entries: Sequence[Entry]) -> dict[str, Any]:
    totals = {"input_tokens": 0, "output_tokens": 0, "entries_with_usage": 0}
    for e in entries:
        usage = e.meta_dict.get("usage")
        if isinstance(usage, dict):
            totals["entries_with_usage"] += 1
            for key in ("input_tokens", "output_tokens"):
                value = usage.get(
                    key,
                    usage.get(
                        {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens"}[key]
                    ),
                )
                if isinstance(value, int):
                    totals[key] += value
    return totals


def instructions_check(journal: Journal, state: dict[str, Any]) -> dict[str, Any]:
    """Re-hash every pin against its journal entry (issue 3, "instruction integrity").

    For each pin in ``state`` the cited entry is read, its hashes recomputed, and its text
    compared with the pin's byte for byte.

    Returns:
        ``{"pins": n, "intact": True, "pins_hash": sha256 over (entry hash, text hash) pairs}``.

    Raises:
        FoldRefused: an entry's hashes no longer match, or a pin's text differs from it.
    """
    pins = sorted(
        (f for f in state.get("facts", {}).values() if f.get("pin")),
        key=lambda f: f["support"][0]["entry"],
    )
    wanted = [f["support"][0]["entry"] for f in pins]
    rows = {
        e.entry_hash: e
        for e in Entry.objects.filter(journal=journal, entry_hash__in=wanted).prefetch_related(
            "chunks"
        )
    }
    pairs = []
    for fact in pins:
        h = fact["support"][0]["entry"]
        entry = rows.get(h)
        if entry is None:
            raise FoldRefused(f"pin {fact['id']}: entry sha256:{h} is not in this journal")
        problems = entry_check(entry)
        if problems:
            raise FoldRefused(
                f"pin {fact['id']}: entry sha256:{h} fails its hash check: {problems[0]}"
            )
        if entry.text != fact["text"]:
            raise FoldRefused(f"pin {fact['id']}: text differs from entry sha256:{h}")
        pairs.append([h, hashlib.sha256(fact["text"].encode("utf-8")).hexdigest()])
    return {
        "pins": len(pins),
        "intact": True,
        "pins_hash": hashlib.sha256(rfc8785.dumps(pairs)).hexdigest(),
    }


def _verdicts(reduction: reducer.Reduction) -> list[dict[str, Any]]:
    return [
        {"index": r.index, "op": r.op, "status": r.status, "reason": r.reason, "fact_id": r.fact_id}
        for r in reduction.results
    ]


def model_config() -> ModelConfig:
    """The model endpoint and names from the settings (``OPENAI_BASE_URL``, ...)."""
    return ModelConfig.from_settings(settings)


def default_writer() -> str:
    """``"model"`` when a model is configured (``OPENAI_BASE_URL``), else ``"offline"``."""
    return "model" if model_config().configured else "offline"


def writer_resolve(writer: str | Writer | ModelWriter) -> Writer | ModelWriter:
    """A writer object for a name (``mechanical``, ``offline``, ``model``) or the object given.

    Raises:
        LedgerError: unknown name, or ``"model"`` with no model configured.
    """
    if isinstance(writer, str):
        if writer == "model":
            config = model_config()
            if not config.configured:
                raise LedgerError(
                    "no model configured: set OPENAI_BASE_URL and WRITER_MODEL "
                    "(or use the offline writer)"
                )
            return ModelWriter(config)
        if writer not in WRITERS:
            known = ", ".join([*WRITERS, "model"])
            raise LedgerError(f"unknown writer {writer!r} (known: {known})")
        return WRITERS[writer]()
    return writer


@dataclass
class _Plan:
    """What a fold would cover, read from the journal (no lock needed to read it)."""

    start: int
    end: int
    covered: list[Entry]
    hashes: list[str]
    key: str
    previous: Fold | None
    number: int
    views: list[EntryView]
    prev_state: dict[str, Any]
    rounds: list[Any]
    revision: int


def _plan(journal: Journal, upto: int | None) -> _Plan | FoldResult:
    previous = latest_fold(journal)
    last_range = latest_fold(journal, Fold.Kind.FOLD)
    start = (last_range.seq_end or 0) + 1 if last_range else 1
    limit = journal.head_seq if upto is None else min(upto, journal.head_seq)
    entries = list(Entry.objects.filter(journal=journal, seq__gte=start).order_by("seq"))
    rounds = [r for r in group_rounds(entries) if r.last_seq <= limit]
    if rounds:
        # an ended run's unanswered tail is final: fold it, stating the calls did not complete
        rounds[-1].at_tail = rounds[-1].last_seq == journal.head_seq and journal.ended_at is None
    end = complete_prefix_end(rounds)
    if end is None or end < start:
        return FoldResult(None, False, "nothing to fold: no complete API round after the last fold")
    covered = [e for e in entries if e.seq <= end]
    hashes = [e.entry_hash for e in covered]
    key = range_hash(hashes)
    existing = Fold.objects.filter(journal=journal, range_hash=key).first()
    if existing is not None:
        return FoldResult(existing, False, "this range is already folded")
    return _Plan(
        start=start,
        end=end,
        covered=covered,
        hashes=hashes,
        key=key,
        previous=previous,
        number=(previous.number + 1) if previous else 1,
        views=[entry_view(e) for e in covered],
        prev_state=previous.state_dict if previous else copy.deepcopy(reducer.EMPTY_STATE),
        rounds=rounds,
        revision=journal.head_seq,
    )


def fold_context(
    *, journal: Journal, covered: Sequence[Entry], number: int, revision: int
) -> FoldContext:
    """What a writer may read besides the covered entries (DESIGN.md 5.1, support).

    ``resolve`` returns earlier raw entries of ``journal`` at or before ``revision`` (by seq
    or hash); ``evidence`` builds the reducer's evidence index for a list of ops.
    """

    def resolve(seqs: Iterable[int], hashes: Iterable[str]) -> list[EntryView]:
        seqs, hashes = list(seqs), list(hashes)
        if not seqs and not hashes:
            return []
        rows = Entry.objects.filter(journal=journal, seq__lte=revision).filter(
            Q(seq__in=seqs) | Q(entry_hash__in=hashes)
        )
        return [entry_view(e) for e in rows]

    def evidence(ops: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return _evidence(journal, covered, ops, number, revision)

    return FoldContext(number=number, revision=revision, resolve=resolve, evidence=evidence)


def _context(journal: Journal, plan: _Plan) -> FoldContext:
    return fold_context(
        journal=journal, covered=plan.covered, number=plan.number, revision=plan.revision
    )


def _attempt_record(composed: Composition | None, plan: _Plan, error: WriterFailed | None) -> dict:
    calls = error.calls if error is not None else composed.calls  # type: ignore[union-attr]
    writer = error.writer if error is not None else composed.writer  # type: ignore[union-attr]
    verifier = error.verifier if error is not None else composed.verifier  # type: ignore[union-attr]
    record: dict[str, Any] = {
        "covered": {"seq_start": plan.start, "seq_end": plan.end, "entries": len(plan.covered)},
        "previous_fold": plan.previous.number if plan.previous else None,
        "writer": writer,
        "verifier": verifier,
        "model_calls": [c.to_dict() for c in calls],
    }
    if composed is not None:
        record["model_usage"] = composed.usage()
        record["fallback_reason"] = composed.fallback_reason
        record["note"] = composed.note
    return record


def _store_attempt(
    *,
    journal: Journal,
    plan: _Plan,
    fold: Fold | None,
    outcome: str,
    rounds: Sequence[RoundRecord],
    record: dict[str, Any],
    error: str = "",
) -> FoldAttempt:
    """One :class:`FoldAttempt` with a :class:`Proposal` per round and its :class:`Verdict` rows."""
    writer, verifier = record.get("writer") or {}, record.get("verifier") or {}
    attempt = FoldAttempt.objects.create(
        journal=journal,
        fold=fold,
        number=plan.number,
        seq_start=plan.start,
        seq_end=plan.end,
        revision=plan.revision,
        range_hash=plan.key,
        writer=str(writer.get("id", ""))[:100],
        writer_label=str(writer.get("label", ""))[:200],
        verifier=str(verifier.get("id", ""))[:100],
        outcome=outcome,
        error=error,
        record=record,
    )
    verdicts = []
    for r in rounds:
        proposal = Proposal.objects.create(
            attempt=attempt,
            round=r.round,
            kind=r.kind,
            raw=r.raw,
            parsed=r.parsed,
            error=r.error,
            verifier_raw=r.verifier_raw,
            verifier_error=r.verifier_error,
            ops=r.ops,
        )
        for item in r.items:
            for j in item.judgements:
                verdicts.append(
                    Verdict(
                        proposal=proposal,
                        key=item.key[:100],
                        op=str(item.op.get("op", ""))[:16],
                        claim=item.claim,
                        support=item.support,
                        judge=j.judge,
                        entailment=j.entailment,
                        entailment_reason=j.entailment_reason,
                        temporal=j.temporal,
                        temporal_reason=j.temporal_reason,
                        accepted=j.accepted,
                        item_accepted=item.accepted,
                    )
                )
    Verdict.objects.bulk_create(verdicts)
    return attempt


def ledger_fold(
    *, journal: Journal, upto: int | None = None, writer: str | Writer | ModelWriter = "mechanical"
) -> FoldResult:
    """Fold the journal's unfolded complete API rounds, up to ``upto`` (default: head).

    The pins are added by code; ``writer`` proposes the other ops; the reducer judges every
    op (DESIGN.md 5.2) and the pins are re-hashed against their entries before anything is
    stored. One fold at a time per branch (the journal row is locked). A fold covering
    exactly the same entries as an existing one returns that fold (idempotency key: scope +
    covered range hash, DESIGN.md section 9).

    A model writer (DESIGN.md 5.3, :mod:`ledger_app.model_writer`) works outside the lock:
    the range is read, the models are called, then under the lock the range and the
    previous fold are checked again before the fold is stored (if another fold got there
    first, nothing is stored and the reason says so). Its outcome is ``accepted``,
    ``repaired`` (after the one repair) or ``fallback`` (mechanical facts, labelled, with
    the note to retrieve raw journal evidence). Every run that stores a fold also stores a
    :class:`~ledger_app.models.FoldAttempt` with each proposal and verdict
    (``fold.attempts``); the manifest records the writer and verifier models, their prompt
    versions and hashes, and the usage and latency of every model call.

    Args:
        journal: the scope to fold.
        upto: highest seq the fold may cover; it ends at the last complete round at or
            before it. A trailing interrupted round is left for a later fold.
        writer: ``"mechanical"`` (tool outcomes; outcome ``fallback``), ``"offline"``
            (deterministic rules, :mod:`ledger_app.offline`), ``"model"`` (the configured
            models), or a writer object.

    Returns:
        :class:`FoldResult`; ``fold`` is ``None`` with a ``reason`` when nothing is foldable.

    Raises:
        FoldFailed: the model was unreachable after the client's retries (or refused the
            request). Nothing of the fold is stored; a ``failed`` FoldAttempt records the
            error and the calls; a later run folds the same range.
        FoldRefused: a required pin missing or altered, or a pin that no longer matches its
            journal entry. Nothing is stored.
        LedgerError: unknown writer name, or ``"model"`` with no model configured.
    """
    w = writer_resolve(writer)
    composed: Composition | None = None
    first: _Plan | None = None
    if getattr(w, "calls_models", False):
        journal = Journal.objects.select_related("session__tenant").get(pk=journal.pk)
        planned = _plan(journal, upto)
        if isinstance(planned, FoldResult):
            return planned
        first = planned
        try:
            composed = compose(
                w, entries=first.views, state=first.prev_state, ctx=_context(journal, first)
            )
        except WriterFailed as exc:
            with transaction.atomic():
                attempt = _store_attempt(
                    journal=journal,
                    plan=first,
                    fold=None,
                    outcome=FoldAttempt.Outcome.FAILED,
                    rounds=exc.rounds,
                    record=_attempt_record(None, first, exc),
                    error=str(exc),
                )
            raise FoldFailed(
                f"{journal.scope_label}: fold {first.number} failed, nothing stored: {exc}",
                attempt=attempt,
            ) from exc
    with transaction.atomic():
        journal = (
            Journal.objects.select_for_update().select_related("session__tenant").get(pk=journal.pk)
        )
        planned = _plan(journal, first.end if first is not None else upto)
        if isinstance(planned, FoldResult):
            return planned
        plan = planned
        if first is not None and (
            plan.key != first.key
            or (plan.previous and plan.previous.pk) != (first.previous and first.previous.pk)
        ):
            return FoldResult(
                None,
                False,
                "another fold changed the ledger while the models were working; fold again",
            )
        if composed is None:
            composed = compose(
                w, entries=plan.views, state=plan.prev_state, ctx=_context(journal, plan)
            )
        start, end, covered, hashes, key = plan.start, plan.end, plan.covered, plan.hashes, plan.key
        previous, number, views, prev_state = (
            plan.previous,
            plan.number,
            plan.views,
            plan.prev_state,
        )
        pin_ops = [{"op": "add", "fact": pin_fact(v)} for v in views if is_pin_source(v)]
        ops = pin_ops + composed.ops
        delta = {
            "fold": number,
            "revision": journal.head_seq,
            "evidence": _evidence(journal, covered, ops, number, journal.head_seq),
            "required_pins": required_pins(views),
            "ops": ops,
        }
        try:
            reduction = reducer.apply_delta(prev_state, delta)
        except (reducer.PinViolation, reducer.DeltaInvalid) as exc:
            raise FoldRefused(str(exc)) from exc
        state = reduction.state
        instructions = instructions_check(journal, state)
        outcome = composed.outcome
        interrupted = [c for r in plan.rounds if r.last_seq <= end for c in r.interrupted_call_ids]
        ledger_text = "\n".join(
            render_fact(f) for f in state["facts"].values() if f["lifecycle"] == "active"
        )
        manifest = {
            "covered": {
                "seq_start": start,
                "seq_end": end,
                "entries": len(covered),
                "entry_hashes": hashes,
            },
            "range_hash": key,
            "previous_fold": previous.number if previous else None,
            "revision": journal.head_seq,
            "writer": composed.writer,
            "verifier": composed.verifier,
            "tokens": {
                "covered": sum(e.token_count for e in covered),
                "ledger_active": _active_tokens(state),
                "source": source_label(settings.TOKEN_ENCODING),
                "provider": {
                    **_provider_usage(covered),
                    "source": "provider-reported usage in the journal",
                },
            },
            "interrupted_calls": interrupted,
            "outcome": outcome,
            "instructions": instructions,
            "loss": loss_report(views, ledger_text).to_dict(),
        }
        if composed.calls:
            manifest["model_calls"] = [c.to_dict() for c in composed.calls]
            manifest["tokens"]["model"] = {
                **composed.usage(),
                "source": "server-reported usage of the writer and verifier calls",
            }
        if composed.rounds:
            manifest["review"] = composed.review()
        if composed.note:
            manifest["note"] = composed.note
        verdicts = _verdicts(reduction)
        try:
            with transaction.atomic():
                fold = Fold.objects.create(
                    journal=journal,
                    number=number,
                    previous=previous,
                    seq_start=start,
                    seq_end=end,
                    revision=journal.head_seq,
                    range_hash=key,
                    outcome=outcome,
                    writer=str(composed.writer.get("id", w.id))[:100],
                    verifier=str(composed.verifier.get("id", ""))[:100],
                    manifest=manifest,
                    delta=rfc8785.dumps({**delta, "verdicts": verdicts}).decode("utf-8"),
                    state=reducer.state_bytes(state).decode("utf-8"),
                    state_hash=reducer.state_hash(state),
                    facts_added=sum(
                        1 for r in reduction.results if r.op == "add" and r.status == "accepted"
                    ),
                    ops_rejected=len(reduction.rejected),
                )
        except IntegrityError:
            existing = Fold.objects.filter(journal=journal, range_hash=key).first()
            if existing is None:
                raise
            return FoldResult(existing, False, "this range is already folded")
        attempt = _store_attempt(
            journal=journal,
            plan=plan,
            fold=fold,
            outcome=outcome,
            rounds=composed.rounds,
            record=_attempt_record(composed, plan, None),
        )
        for r in reduction.results:
            if r.op == "retire" and r.status == "pending":
                fact = state["facts"][r.fact_id]
                pending = fact["pending_retirement"]
                RetirementRequest.objects.create(
                    journal=journal,
                    fact_id=r.fact_id,
                    fact_text=fact["text"],
                    requested_in=fold,
                    evidence=pending["evidence"],
                    reason=pending.get("reason", ""),
                )
    return FoldResult(fold, True, attempt=attempt)


@dataclass
class CompactRow:
    """One line of ``compact``'s table: a fold, a failed attempt, or a consolidation."""

    fold: Fold | None
    outcome: str
    created: bool = True
    reason: str = ""
    attempt: FoldAttempt | None = None


@dataclass
class CompactReport:
    """What :func:`ledger_compact` did: the writer used, one row per fold, why it stopped."""

    writer: str
    writer_label: str
    rows: list[CompactRow] = field(default_factory=list)
    stopped: str = ""

    @property
    def failed(self) -> bool:
        return any(r.outcome == FoldAttempt.Outcome.FAILED for r in self.rows)


def _slice_end(journal: Journal, budget_tokens: int) -> int | None:
    """Last seq of the next fold: whole rounds after the last fold, about ``budget_tokens``."""
    last = latest_fold(journal, Fold.Kind.FOLD)
    start = (last.seq_end or 0) + 1 if last else 1
    entries = list(
        Entry.objects.filter(journal=journal, seq__gte=start)
        .order_by("seq")
        .only("seq", "kind", "role", "tool_call_id", "token_count")
    )
    tokens = {e.seq: e.token_count for e in entries}
    end, total = None, 0
    for r in group_rounds(entries):
        size = sum(tokens[s] for s in r.seqs)
        if end is not None and total + size > budget_tokens:
            break
        end, total = r.last_seq, total + size
    return end


def ledger_compact(
    *,
    journal: Journal,
    writer: str | Writer | ModelWriter | None = None,
    fold_tokens: int | None = None,
    max_folds: int = 10_000,
) -> CompactReport:
    """Fold a journal's unfolded rounds in slices, then consolidate (``manage.py compact``).

    Each fold covers whole API rounds worth about ``fold_tokens`` covered tokens (default
    ``LEDGER_FOLD_THRESHOLD_TOKENS``; a single larger round is one fold), so a long
    session becomes a sequence of folds a model can read. Stops when nothing is left, at
    the first failed fold (the ledger keeps every fold before it; running again retries
    from there), or after ``max_folds``. Then :func:`ledger_consolidate` runs once.

    Args:
        journal: the scope.
        writer: ``"offline"``, ``"model"``, ``"mechanical"`` or a writer object; default
            :func:`default_writer` (the model when ``OPENAI_BASE_URL`` is set, else offline).
        fold_tokens: covered tokens per fold.

    Returns:
        :class:`CompactReport`.

    Raises:
        LedgerError: unknown writer, or ``"model"`` without a configured model.
        FoldRefused: a pin check failed (nothing of that fold stored).
    """
    w = writer_resolve(writer if writer is not None else default_writer())
    budget = settings.LEDGER_FOLD_THRESHOLD_TOKENS if fold_tokens is None else fold_tokens
    report = CompactReport(writer=w.id, writer_label=w.label)
    while len(report.rows) < max_folds:
        upto = _slice_end(journal, budget)
        if upto is None:
            report.stopped = "nothing left to fold"
            break
        try:
            result = ledger_fold(journal=journal, upto=upto, writer=w)
        except FoldFailed as exc:
            report.rows.append(
                CompactRow(None, FoldAttempt.Outcome.FAILED, False, str(exc), exc.attempt)
            )
            report.stopped = "a fold failed; nothing of it was stored; run compact again"
            return report
        if result.fold is None or not result.created:
            report.stopped = result.reason
            break
        report.rows.append(CompactRow(result.fold, result.fold.outcome, True, "", result.attempt))
        journal.refresh_from_db()
    consolidated = ledger_consolidate(journal=journal)
    if consolidated.fold is not None:
        report.rows.append(CompactRow(consolidated.fold, consolidated.fold.outcome))
    return report


def ledger_consolidate(
    *,
    journal: Journal,
    target_tokens: int | None = None,
    start_tokens: int | None = None,
) -> FoldResult:
    """Consolidate the ledger into a checkpoint when it has grown past the start figure.

    DESIGN.md 5.4: consolidation starts at ``LEDGER_CONSOLIDATE_AT_TOKENS`` (67,500) and aims
    for ``LEDGER_CHECKPOINT_TARGET_TOKENS`` (20,000). It evicts P3, then P2 (they stay
    recoverable from the journal) and never a P0 or P1 fact; when those alone exceed the
    target the checkpoint is stored with outcome ``target_unreachable`` and the figures.
    The evictions are an ordinary delta (``evict`` ops) judged by the reducer, stored as a
    ``consolidation`` fold whose state is the checkpoint.

    Returns:
        :class:`FoldResult`; ``fold`` is ``None`` with a reason when no consolidation is due.
    """
    target = settings.LEDGER_CHECKPOINT_TARGET_TOKENS if target_tokens is None else target_tokens
    start = settings.LEDGER_CONSOLIDATE_AT_TOKENS if start_tokens is None else start_tokens
    with transaction.atomic():
        journal = Journal.objects.select_for_update().get(pk=journal.pk)
        previous = latest_fold(journal)
        if previous is None:
            return FoldResult(None, False, "nothing to consolidate: no fold yet")
        plan = plan_consolidation(
            previous.state_dict,
            target_tokens=target,
            start_tokens=start,
            count=lambda t: count_tokens(t, settings.TOKEN_ENCODING),
        )
        if not plan.needed:
            return FoldResult(
                None, False, f"not needed: ledger {plan.before_tokens} tokens, below {start}"
            )
        if not plan.ops:
            # Nothing left to evict: another checkpoint would be the same state (a no-op loop).
            return FoldResult(
                None,
                False,
                f"target unreachable and nothing evictable: P0+P1 hold {plan.kept_p0_p1_tokens} "
                f"tokens, target {target}",
            )
        key = hashlib.sha256(f"consolidation:{previous.state_hash}:{target}".encode()).hexdigest()
        existing = Fold.objects.filter(journal=journal, range_hash=key).first()
        if existing is not None:
            return FoldResult(existing, False, "already consolidated")
        number = previous.number + 1
        delta = {"fold": number, "revision": journal.head_seq, "evidence": {}, "ops": plan.ops}
        reduction = reducer.apply_delta(previous.state_dict, delta)
        state = reduction.state
        outcome = (
            Fold.Outcome.TARGET_UNREACHABLE
            if plan.outcome == "target_unreachable"
            else Fold.Outcome.ACCEPTED
        )
        fold = Fold.objects.create(
            journal=journal,
            number=number,
            kind=Fold.Kind.CONSOLIDATION,
            previous=previous,
            revision=journal.head_seq,
            range_hash=key,
            outcome=outcome,
            writer="consolidation",
            verifier="reducer-rules",
            manifest={
                "consolidation": plan.figures(),
                "outcome": outcome,
                "previous_fold": previous.number,
                "instructions": instructions_check(journal, state),
                "tokens": {
                    "ledger_active": _active_tokens(state),
                    "source": source_label(settings.TOKEN_ENCODING),
                },
            },
            delta=rfc8785.dumps({**delta, "verdicts": _verdicts(reduction)}).decode("utf-8"),
            state=reducer.state_bytes(state).decode("utf-8"),
            state_hash=reducer.state_hash(state),
            ops_rejected=len(reduction.rejected),
        )
    return FoldResult(fold, True)


def can_review(user: Any, journal: Journal) -> bool:
    """True when ``user`` is a reviewer or admin of the journal's tenant (or a superuser)."""
    if getattr(user, "is_superuser", False):
        return True
    return Membership.objects.filter(
        user=user,
        tenant_id=journal.session.tenant_id,
        role__in=[Membership.Role.REVIEWER, Membership.Role.ADMIN],
    ).exists()


def ledger_review(
    *, request: RetirementRequest, reviewer: Any, decision: str, comment: str = ""
) -> Fold:
    """Approve or refuse a pending P0 retirement; applied to the ledger as a ``review`` fold.

    Args:
        request: the pending :class:`RetirementRequest`.
        reviewer: the deciding user (must be a reviewer or admin of the tenant).
        decision: ``"approve"`` (the fact becomes ``retired``) or ``"refuse"`` (it stays active).
        comment: free text, stored with who and when.

    Returns:
        The new review fold.

    Raises:
        ReviewForbidden: the user may not review in this tenant.
        ReviewError: the request is not pending, or ``decision`` is not approve/refuse.
    """
    if decision not in ("approve", "refuse"):
        raise ReviewError(f"decision must be 'approve' or 'refuse', got {decision!r}")
    journal = request.journal
    if not can_review(reviewer, journal):
        raise ReviewForbidden(
            f"{reviewer} is not a reviewer of tenant {journal.session.tenant.slug}"
        )
    with transaction.atomic():
        journal = Journal.objects.select_for_update().get(pk=journal.pk)
        request = RetirementRequest.objects.select_for_update().get(pk=request.pk)
        if request.status != RetirementRequest.Status.PENDING:
            raise ReviewError(f"this retirement was already {request.status}")
        previous = latest_fold(journal)
        now = timezone.now()
        op = {
            "op": "review",
            "id": request.fact_id,
            "decision": decision,
            "reviewer": reviewer.get_username(),
            "comment": comment,
            "at": now.isoformat(),
        }
        delta = {
            "fold": previous.number + 1,
            "revision": journal.head_seq,
            "evidence": {},
            "ops": [op],
        }
        reduction = reducer.apply_delta(previous.state_dict, delta)
        if reduction.rejected:
            raise ReviewError(reduction.rejected[0].reason)
        state = reduction.state
        fold = Fold.objects.create(
            journal=journal,
            number=previous.number + 1,
            kind=Fold.Kind.REVIEW,
            previous=previous,
            revision=journal.head_seq,
            range_hash=hashlib.sha256(f"review:{request.pk}".encode()).hexdigest(),
            outcome=Fold.Outcome.ACCEPTED,
            writer=f"reviewer:{reviewer.get_username()}",
            manifest={"review": {"request": request.pk, "fact_id": request.fact_id, **op}},
            delta=rfc8785.dumps({**delta, "verdicts": _verdicts(reduction)}).decode("utf-8"),
            state=reducer.state_bytes(state).decode("utf-8"),
            state_hash=reducer.state_hash(state),
        )
        request.status = (
            RetirementRequest.Status.APPROVED
            if decision == "approve"
            else RetirementRequest.Status.REFUSED
        )
        request.reviewer = reviewer
        request.comment = comment
        request.decided_at = now
        request.decided_in = fold
        request.save()
    return fold


def fold_deltas(journal: Journal) -> list[dict[str, Any]]:
    """Every stored delta of ``journal`` in fold order, verdicts removed (the reducer recomputes them)."""
    out = []
    for raw in (
        Fold.objects.filter(journal=journal).order_by("number").values_list("delta", flat=True)
    ):
        d = json.loads(raw)
        d.pop("verdicts", None)
        out.append(d)
    return out


def first_difference(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """Id of the first fact (in id order) that differs between two states, ``"(folds)"`` for the counter."""
    fa, fb = a.get("facts", {}), b.get("facts", {})
    for fact_id in sorted(fa.keys() | fb.keys()):
        if fa.get(fact_id) != fb.get(fact_id):
            return fact_id
    return None if a == b else "(state fields)"


@dataclass
class LedgerVerifyReport:
    """Result of :func:`ledger_verify`. ``mismatch`` names the fold and first differing fact."""

    folds: int = 0
    mismatch: dict[str, Any] | None = None
    checks: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.mismatch is None


def ledger_verify(*, journal: Journal) -> LedgerVerifyReport:
    """Replay every delta from scratch and compare with what is stored (DESIGN.md 5.2).

    Two comparisons per fold N: ``reduce(None, deltas[:N])`` against fold N's stored state
    (replay from scratch), and ``apply(stored state N-1, delta N)`` against it (checkpoint
    plus later deltas); also each stored ``state_hash`` against its state and each op verdict.

    Returns:
        :class:`LedgerVerifyReport` with the first mismatch (fold, fact id, which comparison).
    """
    report = LedgerVerifyReport()
    replay: dict[str, Any] = dict(reducer.EMPTY_STATE)
    stored_prev: dict[str, Any] = dict(reducer.EMPTY_STATE)
    for fold in Fold.objects.filter(journal=journal).order_by("number"):
        report.folds += 1
        delta = json.loads(fold.delta)
        verdicts = delta.pop("verdicts", [])
        stored = json.loads(fold.state)
        try:
            replayed = reducer.apply_delta(replay, delta)
            from_checkpoint = reducer.apply_delta(stored_prev, delta).state
        except (reducer.PinViolation, reducer.DeltaInvalid) as exc:
            report.mismatch = {
                "fold": fold.number,
                "fact": None,
                "check": "replay",
                "detail": str(exc),
            }
            return report
        replay = replayed.state
        for name, candidate in (
            ("replay from scratch", replay),
            ("checkpoint plus delta", from_checkpoint),
        ):
            if reducer.state_bytes(candidate) != fold.state.encode("utf-8"):
                report.mismatch = {
                    "fold": fold.number,
                    "fact": first_difference(stored, candidate),
                    "check": name,
                    "detail": f"stored state differs from {name}",
                }
                return report
        if reducer.state_hash(stored) != fold.state_hash:
            report.mismatch = {
                "fold": fold.number,
                "fact": None,
                "check": "state_hash",
                "detail": "state_hash does not match the stored state",
            }
            return report
        if _verdicts(replayed) != verdicts:
            report.mismatch = {
                "fold": fold.number,
                "fact": None,
                "check": "verdicts",
                "detail": "stored op verdicts differ from the reducer's",
            }
            return report
        stored_prev = stored
    report.checks = ["replay from scratch", "checkpoint plus delta", "state_hash", "verdicts"]
    return report


def fold_ops_cited(fold: Fold) -> list[str]:
    """Every entry hash cited by the fold's facts (for the UI's support links)."""
    return sorted({h for f in fold.state_dict.get("facts", {}).values() for h in support_hashes(f)})
