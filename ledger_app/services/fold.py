"""The one fold service (DESIGN.md 5.2, 5.3): every fold, whoever asks, runs here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q

from audit_app.origin import current_task_id, origin_current
from audit_app.services import audit_record
from journal_app.content import PIN_RULES
from journal_app.identifiers import Identifier
from journal_app.models import Entry, Journal
from journal_app.rounds import complete_prefix_end, group_rounds
from journal_app.tokens import source_label
from ledger_app import hooks, reducer
from ledger_app.budget import render_fact
from ledger_app.loss import loss_report, term_key
from ledger_app.mechanical import (
    EntryView,
    pin_facts,
    redact_op,
    required_pins,
    stamp_keys,
)
from ledger_app.mechanical_writer import Writer
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
from ledger_app.offline.turns import cancellation_boundary
from ledger_app.pins import conservative_notes, harness_notes, pin_notes
from ledger_app.services.common import (
    FoldFailed,
    FoldRefused,
    FoldResult,
    _evidence,
    _provider_usage,
    active_tokens,
    delta_apply,
    entry_identifiers,
    entry_view,
    facts_known,
    fold_store,
    instructions_check,
    latest_fold,
    pins_count,
    pins_to_check,
    range_hash,
    terms_indexed,
    writer_state,
)
from ledger_app.services.consolidate import ledger_consolidate
from ledger_app.services.records import fold_seal
from ledger_app.services.writer_registry import writer_resolve

#: entries read past a fold's limit (see :func:`_plan`)
ROUND_MARGIN = 8


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
    prev_state: dict[str, Any]  # what the writer reads: active facts and plan items
    rounds: list[Any]
    revision: int
    identifiers: dict[str, list[Identifier]]  # entry hash -> stored identifiers (covered)


def _plan(
    journal: Journal, upto: int | None, models: bool = False, writer: Any = None
) -> _Plan | FoldResult:
    previous = latest_fold(journal)
    last_range = latest_fold(journal, Fold.Kind.FOLD)
    start = (last_range.seq_end or 0) + 1 if last_range else 1
    limit = journal.head_seq if upto is None else min(upto, journal.head_seq)
    # read only up to the limit, plus a margin so the round that crosses it is seen as
    # incomplete (its entries past the limit are there): a fold reads what it may cover
    entries = list(
        Entry.objects.filter(journal=journal, seq__gte=start, seq__lte=limit + ROUND_MARGIN)
        .select_related("journal__session__tenant")
        .order_by("seq")
    )
    rounds = [r for r in group_rounds(entries) if r.last_seq <= limit]
    if rounds:
        # an ended run's unanswered tail is final: fold it, stating the calls did not complete
        rounds[-1].at_tail = rounds[-1].last_seq == journal.head_seq and journal.ended_at is None
    end = complete_prefix_end(rounds)
    if end is None or end < start:
        return FoldResult(None, False, "nothing to fold: no complete API round after the last fold")
    # the messages are read as views for the cancellation boundary, and reused for the
    # writer (the other entries only once the range is known to be new)
    asking = {
        e.seq: entry_view(e)
        for e in entries
        if e.seq <= end and e.kind == "message" and e.role in ("user", "developer")
    }
    cut = cancellation_boundary(list(asking.values()))
    if cut is not None and cut >= start:
        end = cut  # a cancellation goes to the next fold, where it may retire a pin
    covered = [e for e in entries if e.seq <= end]
    hashes = [e.entry_hash for e in covered]
    key = range_hash(hashes)
    existing = Fold.objects.filter(journal=journal, range_hash=key).defer("state").first()
    if existing is not None:
        return FoldResult(existing, False, "this range is already folded")
    views = [asking.get(e.seq) or entry_view(e) for e in covered]
    # each covered entry's identifiers, read once (stored at append, issue 18): the writer's
    # mentions and the loss report use these instead of scanning the text again
    idents = entry_identifiers(covered)
    for v in views:
        v.identifiers = tuple(idents[v.entry_hash])
    # a writer that declares what it reads (state_keys) gets only those facts (issue 18)
    state_keys = getattr(writer, "state_keys", None)
    return _Plan(
        start=start,
        end=end,
        covered=covered,
        hashes=hashes,
        key=key,
        previous=previous,
        number=(previous.number + 1) if previous else 1,
        views=views,
        prev_state=writer_state(
            journal,
            previous,
            models=models,
            keys=state_keys(views) if callable(state_keys) else None,
            id_prefixes=getattr(writer, "state_prefixes", ()),
            pin_ids=getattr(writer, "state_pin_ids", None),
        ),
        rounds=rounds,
        revision=journal.head_seq,
        identifiers=idents,
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


def _take_recovered(
    recovery: hooks.FoldRecovery | None, ops: list[dict[str, Any]], journal: Journal
) -> list[str]:
    """Append the recovered ``add`` ops whose fact id is new; return those ids."""
    if recovery is None or not recovery.ops:
        return []
    taken = facts_known(journal, (op["fact"]["id"] for op in recovery.ops)) | {
        op["fact"]["id"] for op in ops if isinstance(op.get("fact"), dict) and "id" in op["fact"]
    }
    proposed = []
    for op in recovery.ops:
        fact_id = op["fact"]["id"]
        if fact_id not in taken:
            taken.add(fact_id)
            ops.append(redact_op(dict(op)))  # recovered quotes never copy a secret
            proposed.append(fact_id)
    return proposed


def _recover(
    journal: Journal, recover: bool, options: dict[str, Any] | None
) -> hooks.FoldRecovery | None:
    hook = hooks.fold_recovery() if recover else None
    return hook(journal=journal, **(options or {})) if hook is not None else None


def _with_receipt(result: FoldResult, recovery: hooks.FoldRecovery | None) -> FoldResult:
    result.receipt = recovery.receipt if recovery is not None else None
    return result


def consolidation_due(manifest: dict[str, Any]) -> bool:
    """Whether a fold with this manifest is followed by a consolidation (DESIGN.md 5.4).

    Consolidation starts by itself once the ledger passes ``LEDGER_CONSOLIDATE_AT_TOKENS``
    (67,500 tokens of active fact text, ``manifest["tokens"]["ledger_active"]``), as a fold
    of its own, when there is something to evict (P2/P3 facts,
    ``manifest["storage"]["evictable_tokens"]`` > 0), and when it is worth a whole-ledger
    pass: the evictable facts hold at least what an ordinary consolidation frees (the start
    minus ``LEDGER_CHECKPOINT_TARGET_TOKENS``: 47,500 tokens), or the ledger has grown by
    that much since the last consolidation (``storage["consolidated_at"]``, 0 before the
    first). All three figures are carried from fold to fold, so the gate reads no ledger.
    A ledger below the target after consolidating behaves as before (it grows by 47,500
    tokens before the start); one whose P0/P1 facts alone pass the start
    (``target_unreachable``) used to be rebuilt and re-planned after every fold, evicting
    one fold's P2 facts at a time: now once per 47,500 tokens of growth (issue 18: fold
    cost independent of ledger size). ``compact`` still runs the full check at its end.
    """
    start = settings.LEDGER_CONSOLIDATE_AT_TOKENS
    active = int((manifest.get("tokens") or {}).get("ledger_active") or 0)
    storage = manifest.get("storage") or {}
    if active < start:
        return False
    if "evictable_tokens" not in storage:
        return True  # a fold stored before these figures were kept: as before
    evictable = int(storage["evictable_tokens"])
    floor = max(1, start - settings.LEDGER_CHECKPOINT_TARGET_TOKENS)
    grown = active - int(storage.get("consolidated_at") or 0)
    return evictable > 0 and (evictable >= floor or grown >= floor)


def _fold_audited(journal: Journal, fold: Fold) -> None:
    """Record ``fold.store`` in the fold's transaction, naming the surface that asked
    (:func:`audit_app.origin.origin_current`) and the person, when known."""
    origin = origin_current()
    details: dict[str, Any] = {
        "surface": origin.surface,
        "session": journal.session.key,
        "lane": journal.lane,
        "branch": journal.branch,
        "number": fold.number,
        "seq_start": fold.seq_start,
        "seq_end": fold.seq_end,
        "outcome": fold.outcome,
        "writer": fold.writer,
    }
    task_id = current_task_id()
    if task_id:
        details["task_id"] = task_id
    audit_record(
        actor=origin.actor,
        tenant=journal.session.tenant,
        action="fold.store",
        object_type="fold",
        object_id=str(fold.pk),
        object_label=f"{journal.scope_label} fold {fold.number}",
        details=details,
    )


def ledger_fold(
    *,
    journal: Journal,
    upto: int | None = None,
    writer: str | Writer | ModelWriter | None = None,
    recover: bool = True,
    recovery_options: dict[str, Any] | None = None,
) -> FoldResult:
    """THE fold service: every fold, whoever asks for it, runs here (DESIGN.md 5.2, 5.3, 7).

    Called by the automatic fold after an import or an append (the ``fold_journal`` task),
    ``compact``, the API's ``POST .../folds``, the context builder's fold-more and the UI.
    It (1) picks the writer (:func:`ledger_app.services.writer_registry.writer_resolve`: the model
    when one is configured, else the offline writer); (2) runs the recovery hook registered
    by recovery_app (trigger scan over the latest 24 entries, frozen snapshot, verified
    reads; its recovered ``add`` ops join the writer's and are judged by the reducer like any
    other op, and the manifest names the receipt); (3) folds the unfolded complete API rounds
    up to ``upto`` (default: head) and records the same manifest whoever asked.

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
        writer: ``None`` for the configured default (``model`` when a model is configured,
            else ``offline``), a name (``"offline"``, ``"model"``, ``"mechanical"``: tool
            outcomes only, outcome ``fallback``, labelled), or a writer object.
        recover: ``False`` skips the recovery hook (the what-if refold; tests).
        recovery_options: passed to the hook for this fold's attempt (``model``, ``budget``,
            ``clock`` of :func:`recovery_app.services.recovery_run`).

    Returns:
        :class:`FoldResult`; ``fold`` is ``None`` with a ``reason`` when nothing is foldable.

    Raises:
        FoldFailed: the model was unreachable after the client's retries (or refused the
            request). Nothing of the fold is stored; a ``failed`` FoldAttempt records the
            error and the calls; a later run folds the same range.
        FoldRefused: a required pin missing or altered, or a pin that no longer matches its
            journal entry. Nothing is stored.
        WriterUnknown / ModelNotConfigured: an unknown writer name, or ``"model"`` with no
            model configured (nothing stored, no receipt written).
    """
    w = writer_resolve(writer)
    recovery = _recover(journal, recover, recovery_options)
    composed: Composition | None = None
    first: _Plan | None = None
    if getattr(w, "calls_models", False):
        journal = Journal.objects.select_related("session__tenant").get(pk=journal.pk)
        planned = _plan(journal, upto, True, w)
        if isinstance(planned, FoldResult):
            return _with_receipt(planned, recovery)
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
        planned = _plan(
            journal,
            first.end if first is not None else upto,
            bool(getattr(w, "calls_models", False)),
            w,
        )
        if isinstance(planned, FoldResult):
            return _with_receipt(planned, recovery)
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
        previous, number, views = plan.previous, plan.number, plan.views
        pins = pin_facts(
            views, state=plan.prev_state, attachment_tokens=settings.PIN_ATTACHMENT_TOKENS
        )
        pin_ops = [{"op": "add", "fact": f} for f in pins]
        ops = pin_ops + stamp_keys(composed.ops, views)
        recovered = _take_recovered(recovery, ops, journal)
        delta = {
            "fold": number,
            "revision": journal.head_seq,
            "evidence": _evidence(journal, covered, ops, number, journal.head_seq),
            "required_pins": required_pins(views),
            "pin_rules": PIN_RULES,
            "lifecycle_rules": reducer.LIFECYCLE_RULES,
            "ops": ops,
        }
        try:
            applied = delta_apply(journal, previous, delta)
        except (reducer.PinViolation, reducer.DeltaInvalid) as exc:
            raise FoldRefused(str(exc)) from exc
        reduction = applied.reduction
        pins_total = pins_count(journal, applied, previous)
        instructions = instructions_check(
            journal,
            {"facts": pins_to_check(journal, applied)},
            pins_total=pins_total,
        )
        outcome = composed.outcome
        interrupted = [c for r in plan.rounds if r.last_seq <= end for c in r.interrupted_call_ids]
        # the loss report compares the covered entries' stored identifiers with the term
        # index of the active facts, and searches only the text this fold wrote (issue 18)
        idents = plan.identifiers
        ledger_text = "\n".join(render_fact(f) for f in applied.active_added())
        indexed = terms_indexed(
            journal, (term_key(i.value) for found in idents.values() for i in found), applied
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
                "ledger_active": active_tokens(journal, applied, previous),
                "source": source_label(settings.TOKEN_ENCODING),
                "provider": {
                    **_provider_usage(covered),
                    "source": "provider-reported usage in the journal",
                },
            },
            "interrupted_calls": interrupted,
            "outcome": outcome,
            "instructions": instructions,
            "loss": loss_report(views, ledger_text, identifiers=idents, indexed=indexed).to_dict(),
        }
        if composed.calls:
            manifest["model_calls"] = [c.to_dict() for c in composed.calls]
            manifest["tokens"]["model"] = {
                **composed.usage(),
                "source": "server-reported usage of the writer and verifier calls",
            }
        analyst = ((getattr(recovery, "receipt", None) and recovery.receipt.usage) or {}).get(
            "model"
        )
        if analyst:  # the recovery analyst's model calls count in the fold's usage
            model = manifest["tokens"].setdefault("model", {"calls": 0, "source": ""})
            for k in ("calls", "input_tokens", "output_tokens"):
                model[k] = int(model.get(k, 0)) + int(analyst.get(k, 0))
            model["analyst"] = analyst
            model["source"] = "server-reported usage of the writer, verifier and analyst calls"
        if composed.rounds:
            manifest["review"] = composed.review()
        if composed.note:
            manifest["note"] = composed.note
        notes = pin_notes(pins) + conservative_notes(ops) + harness_notes(views)
        if notes:  # bad input, classified conservatively (DESIGN.md 5.2, 5.5)
            manifest["conservative"] = {"notes": notes}
        if recovery is not None:
            receipt = recovery.receipt
            manifest["recovery"] = {
                "receipt": getattr(receipt, "pk", None),
                "outcome": getattr(receipt, "outcome", "not recorded"),
                "proposed": recovered,
                "from": recovery.note,
            }
        try:
            with transaction.atomic():
                fold = fold_store(
                    journal=journal,
                    applied=applied,
                    previous=previous,
                    seq_start=start,
                    seq_end=end,
                    revision=journal.head_seq,
                    range_hash=key,
                    outcome=outcome,
                    writer=str(composed.writer.get("id", w.id))[:100],
                    verifier=str(composed.verifier.get("id", ""))[:100],
                    manifest=manifest,
                    facts_added=sum(
                        1 for r in reduction.results if r.op == "add" and r.status == "accepted"
                    ),
                    # the reducer's rejections plus the verifier's (rejected proposals and
                    # repairs never reach the reducer): one count, shown everywhere
                    ops_rejected=len(reduction.rejected)
                    + int(manifest.get("review", {}).get("rejected", 0)),
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
        fold_seal(fold)
        _fold_audited(journal, fold)
        for r in reduction.results:
            if r.op == "retire" and r.status == "pending":
                fact = applied.after[r.fact_id]
                pending = fact["pending_retirement"]
                RetirementRequest.objects.create(
                    journal=journal,
                    fact_id=r.fact_id,
                    fact_text=fact["text"],
                    requested_in=fold,
                    evidence=pending["evidence"],
                    reason=pending.get("reason", ""),
                )
        if recovery is not None and recovery.finish is not None:
            recovery.finish(fold, recovered)
    consolidation = None
    if consolidation_due(fold.manifest):
        consolidation = ledger_consolidate(journal=journal).fold
    return FoldResult(
        fold,
        True,
        consolidation=consolidation,
        attempt=attempt,
        receipt=recovery.receipt if recovery else None,
        recovered=recovered,
    )
