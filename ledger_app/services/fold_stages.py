"""The five stages of a fold, in order: plan -> compose -> judge -> reduce -> store.

:func:`ledger_app.services.fold.ledger_fold` runs them, and only it does (docs/architecture.md,
"Data flow of a fold"). Each takes the journal and what the stages before it returned:

* :func:`plan`: the unfolded complete API rounds to cover and what the writer reads
  (:class:`Plan`), or a :class:`FoldResult` saying why there is nothing to fold;
* :func:`compose`: the writer's proposed ops (:class:`~ledger_app.model_writer.Composition`);
* :func:`judge`: the delta (the pins, written by code; the writer's ops; the recovered ops)
  judged by the reducer, and the pins re-hashed against their entries (:class:`Judged`);
* :func:`reduce`: the run reduced to the fold's manifest, the record its readers read;
* :func:`store`: the fold, its fact rows, its attempt, its audit event and its pending
  retirements.

All but a model writer's :func:`plan` and :func:`compose` run under the journal row lock.
The recovery attempt run before them hands :func:`judge` its recovered ops. Only
:func:`store` and a failing model writer's :func:`compose` write rows of the ledger (and
:func:`plan` the identifiers rows of old entries:
:func:`~ledger_app.services.entries.entry_identifiers`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from audit_app.origin import current_task_id, origin_current
from audit_app.services import audit_record, journal_scope
from journal_app.content import PIN_RULES
from journal_app.identifiers import Identifier
from journal_app.models import Entry, Journal
from journal_app.rounds import complete_prefix_end, group_rounds
from journal_app.tokens import source_label
from ledger_app import hooks, model_writer, reducer
from ledger_app.delta_manifest import Manifest, covered_make, delta_make, manifest_make
from ledger_app.entry_view import EntryView
from ledger_app.errors import FoldFailed, FoldRefused
from ledger_app.fact_text import redact_op
from ledger_app.facts import Fact
from ledger_app.mechanical import stamp_keys
from ledger_app.model_writer import Composition, WriterFailed
from ledger_app.models import Fold, FoldAttempt, RetirementRequest
from ledger_app.offline.turns import cancellation_boundary
from ledger_app.pin_facts import pin_facts, required_pins
from ledger_app.pins import conservative_notes, harness_notes, pin_notes
from ledger_app.services.entries import (
    delta_evidence,
    entry_identifiers,
    entry_view,
    fold_context,
    range_hash,
    reported_usage,
)
from ledger_app.services.fold_attempts import attempt_record, attempt_store
from ledger_app.services.pins_check import instructions_check, pins_to_check
from ledger_app.services.range_figures import interrupted_calls, range_loss
from ledger_app.services.records import fold_seal
from ledger_app.services.state import facts_known, latest_fold, writer_state
from ledger_app.services.store import (
    Applied,
    FoldResult,
    active_tokens,
    delta_apply,
    fold_store,
    pins_count,
)

#: entries read past a fold's limit (see :func:`plan`)
ROUND_MARGIN = 8


def calls_models(writer: Any) -> bool:
    """Whether ``writer`` calls a model (it composes before the lock, see :func:`compose`)."""
    return bool(getattr(writer, "calls_models", False))


@dataclass
class Plan:
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

    def matches(self, other: Plan) -> bool:
        """Whether ``other`` covers the same entries after the same previous fold."""
        mine = self.previous.pk if self.previous else None
        theirs = other.previous.pk if other.previous else None
        return self.key == other.key and mine == theirs

    def columns(self) -> dict[str, Any]:
        """The planned fold's range columns, as a :class:`FoldAttempt` stores them."""
        return {
            "number": self.number,
            "seq_start": self.start,
            "seq_end": self.end,
            "revision": self.revision,
            "range_hash": self.key,
        }


def plan(journal: Journal, upto: int | None, writer: Any = None) -> Plan | FoldResult:
    """Stage 1: the unfolded complete API rounds of ``journal`` up to ``upto`` (default: head).

    The range starts after the last range fold and ends at the last complete round at or
    before ``upto`` (a trailing interrupted round waits for a later fold; a cancellation
    goes to the next fold). Reads the covered entries as views with their stored
    identifiers, the range hash (the idempotency key), the previous fold, and the part of
    the ledger ``writer`` reads (:func:`~ledger_app.services.state.writer_state`: what it
    declares in ``state_keys``, ``state_prefixes``, ``state_pin_ids``; more for a model).

    Returns:
        a :class:`Plan`, or a :class:`FoldResult` with no fold and the reason when there is
        no complete round to fold, or the existing fold when this range is folded already.
    """
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
    # each covered entry's identifiers, read once (stored at append): the writer's
    # mentions and the loss report use these instead of scanning the text again
    idents = entry_identifiers(covered)
    for v in views:
        v.identifiers = tuple(idents[v.entry_hash])
    # a writer that declares what it reads (state_keys) gets only those facts
    state_keys = getattr(writer, "state_keys", None)
    return Plan(
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
            models=calls_models(writer),
            keys=state_keys(views) if callable(state_keys) else None,
            id_prefixes=getattr(writer, "state_prefixes", ()),
            pin_ids=getattr(writer, "state_pin_ids", None),
        ),
        rounds=rounds,
        revision=journal.head_seq,
        identifiers=idents,
    )


def compose(journal: Journal, plan: Plan, writer: Any) -> Composition:
    """Stage 2: ``writer``'s proposals over the planned entries
    (:func:`ledger_app.model_writer.compose`: for a model writer, also the verifier and the
    one repair).

    Raises:
        FoldFailed: a model writer's model failed (:class:`WriterFailed`); the ``failed``
            :class:`FoldAttempt` is stored in a transaction of its own, nothing else.
    """
    ctx = fold_context(
        journal=journal, covered=plan.covered, number=plan.number, revision=plan.revision
    )
    try:
        return model_writer.compose(writer, entries=plan.views, state=plan.prev_state, ctx=ctx)
    except WriterFailed as exc:
        if not calls_models(writer):
            raise
        with transaction.atomic():
            attempt = attempt_store(
                journal=journal,
                fold=None,
                outcome=FoldAttempt.Outcome.FAILED,
                rounds=exc.rounds,
                record=_record(None, exc, plan),
                error=str(exc),
                **plan.columns(),
            )
        raise FoldFailed(
            f"{journal.scope_label}: fold {plan.number} failed, nothing stored: {exc}",
            attempt=attempt,
        ) from exc


def _record(composed: Composition | None, error: WriterFailed | None, plan: Plan) -> dict[str, Any]:
    return attempt_record(
        composed,
        error,
        covered={"seq_start": plan.start, "seq_end": plan.end, "entries": len(plan.covered)},
        previous_fold=plan.previous.number if plan.previous else None,
    )


@dataclass
class Judged:
    """What :func:`judge` decided: the pins it wrote, the delta's ``ops``, the ids of the
    ``recovered`` facts proposed, the delta ``applied`` (with the reducer's verdicts) and
    the ``instructions`` check of the pins."""

    pins: list[Fact]
    ops: list[dict[str, Any]]
    recovered: list[str]
    applied: Applied
    instructions: dict[str, Any]


def judge(
    journal: Journal, plan: Plan, composed: Composition, recovery: hooks.FoldRecovery | None
) -> Judged:
    """Stage 3: the delta, judged.

    The pins are written by code from the entries (:func:`ledger_app.pin_facts.pin_facts`);
    the writer's ops and the recovered ``add`` ops whose fact id is new follow them, with
    the evidence of the cited entries. The reducer accepts, rejects or holds (pending) each
    op on the facts the delta reads (:func:`~ledger_app.services.store.delta_apply`); the
    fold's pins and a rotating window of earlier ones are re-hashed against their entries
    (:func:`~ledger_app.services.pins_check.instructions_check`).

    Raises:
        FoldRefused: a required pin missing or altered, an invalid delta, or a pin that no
            longer matches its entry. Nothing is stored.
    """
    pins = pin_facts(
        plan.views, state=plan.prev_state, attachment_tokens=settings.PIN_ATTACHMENT_TOKENS
    )
    ops = [{"op": "add", "fact": f} for f in pins] + stamp_keys(composed.ops, plan.views)
    recovered = _take_recovered(recovery, ops, journal)
    delta = delta_make(
        fold=plan.number,
        revision=journal.head_seq,
        evidence=delta_evidence(journal, plan.covered, ops, plan.number, journal.head_seq),
        required_pins=required_pins(plan.views),
        pin_rules=PIN_RULES,
        ops=ops,
    )
    try:
        applied = delta_apply(journal, plan.previous, delta)
    except (reducer.PinViolation, reducer.DeltaInvalid) as exc:
        raise FoldRefused(str(exc)) from exc
    pins_total = pins_count(journal, applied, plan.previous)
    instructions = instructions_check(
        journal, {"facts": pins_to_check(journal, applied)}, pins_total=pins_total
    )
    return Judged(pins, ops, recovered, applied, instructions)


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


def reduce(
    journal: Journal,
    plan: Plan,
    composed: Composition,
    judged: Judged,
    recovery: hooks.FoldRecovery | None,
) -> Manifest:
    """Stage 4: the run reduced to the fold's manifest (the same whoever asked), built by
    :func:`ledger_app.delta_manifest.manifest_make`.

    Returns:
        :class:`~ledger_app.delta_manifest.Manifest` of a range fold (``covered``,
        ``range_hash``, ``interrupted_calls`` and ``loss`` included), plus ``model_calls``,
        ``review``, ``note``, ``conservative`` and ``recovery`` when there is something to
        say (``fold_store`` adds ``storage``).
    """
    applied = judged.applied
    manifest = manifest_make(
        covered=covered_make(plan.start, plan.end, plan.hashes),
        range_hash=plan.key,
        previous_fold=plan.previous.number if plan.previous else None,
        revision=journal.head_seq,
        writer=composed.writer,
        verifier=composed.verifier,
        tokens={
            "covered": sum(e.token_count for e in plan.covered),
            "ledger_active": active_tokens(journal, applied, plan.previous),
            "source": source_label(settings.TOKEN_ENCODING),
            "provider": {
                **reported_usage(plan.covered),
                "source": "provider-reported usage in the journal",
            },
        },
        interrupted_calls=interrupted_calls(plan.rounds, plan.end),
        outcome=composed.outcome,
        instructions=judged.instructions,
        loss=range_loss(journal, plan.views, plan.identifiers, applied),
    )
    if composed.calls:
        manifest["model_calls"] = [c.to_dict() for c in composed.calls]
        manifest["tokens"]["model"] = {
            **composed.usage(),
            "source": "server-reported usage of the writer and verifier calls",
        }
    analyst = ((getattr(recovery, "receipt", None) and recovery.receipt.usage) or {}).get("model")
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
    notes = pin_notes(judged.pins) + conservative_notes(judged.ops) + harness_notes(plan.views)
    if notes:  # bad input, classified conservatively
        manifest["conservative"] = {"notes": notes}
    if recovery is not None:
        manifest["recovery"] = {
            "receipt": getattr(recovery.receipt, "pk", None),
            "outcome": getattr(recovery.receipt, "outcome", "not recorded"),
            "proposed": judged.recovered,
            "from": recovery.note,
        }
    return manifest


def store(
    journal: Journal,
    plan: Plan,
    composed: Composition,
    judged: Judged,
    manifest: Manifest,
    *,
    writer_id: str,
    recovery: hooks.FoldRecovery | None,
) -> FoldResult:
    """Stage 5: store the fold and what comes with it; the caller holds the journal lock.

    In a savepoint, the :class:`Fold`, its delta and its fact rows
    (:func:`~ledger_app.services.store.fold_store`); then the :class:`FoldAttempt` with every
    proposal and verdict, the record hash (:func:`~ledger_app.services.records.fold_seal`),
    the ``fold.store`` audit event, a :class:`RetirementRequest` per pending P0 retirement,
    and the recovery's ``finish`` (its receipts marked entered).

    Returns:
        the new fold (``created``), or the existing fold when another run stored the same
        range first (``created`` false, nothing stored).
    """
    reduction = judged.applied.reduction
    try:
        with transaction.atomic():
            fold = fold_store(
                journal=journal,
                applied=judged.applied,
                previous=plan.previous,
                seq_start=plan.start,
                seq_end=plan.end,
                revision=journal.head_seq,
                range_hash=plan.key,
                outcome=composed.outcome,
                writer=str(composed.writer.get("id", writer_id))[:100],
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
        existing = Fold.objects.filter(journal=journal, range_hash=plan.key).first()
        if existing is None:
            raise
        return FoldResult(existing, False, "this range is already folded")
    attempt = attempt_store(
        journal=journal,
        fold=fold,
        outcome=composed.outcome,
        rounds=composed.rounds,
        record=_record(composed, None, plan),
        **plan.columns(),
    )
    fold_seal(fold)
    _fold_audited(journal, fold)
    for r in reduction.results:
        if r.op == "retire" and r.status == "pending":
            fact = judged.applied.after[r.fact_id]
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
        recovery.finish(fold, judged.recovered)
    return FoldResult(
        fold,
        True,
        attempt=attempt,
        receipt=recovery.receipt if recovery else None,
        recovered=judged.recovered,
    )


def _fold_audited(journal: Journal, fold: Fold) -> None:
    """Record ``fold.store`` in the fold's transaction, naming the surface that asked
    (:func:`audit_app.origin.origin_current`) and the person, when known."""
    origin = origin_current()
    details: dict[str, Any] = {
        "surface": origin.surface,
        **journal_scope(journal),
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
