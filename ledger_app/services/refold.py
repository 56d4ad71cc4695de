"""Refold: a range folded with mechanical facts folded again by a better writer.

Recorded as a new fold of kind ``refold``, never an edit: its delta ``withdraw``s the
active non-pin facts born in the refolded fold (the reducer allows that only for
``"refold_of": n`` and facts of fold ``n``) and adds the new writer's ops over the same
entries, judged by the same reducer. Pins are untouched (they are written by code and were
already verbatim). ``verify_ledger`` replays refolds like any other fold.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q

from journal_app.models import Entry, Journal
from journal_app.rounds import group_rounds
from journal_app.services import entry_check
from journal_app.tokens import source_label
from ledger_app import reducer
from ledger_app.delta_manifest import covered_make, delta_make, manifest_make
from ledger_app.errors import LedgerError
from ledger_app.model_writer import compose
from ledger_app.models import Fold
from ledger_app.services.entries import (
    delta_evidence,
    entry_identifiers,
    entry_view,
    fold_context,
    range_hash,
)
from ledger_app.services.pins_check import instructions_check, pins_to_check
from ledger_app.services.range_figures import interrupted_calls, range_loss
from ledger_app.services.state import current_facts, facts_known, latest_fold, writer_state
from ledger_app.services.store import FoldResult, active_tokens, delta_apply, fold_store, pins_count
from ledger_app.services.writer_registry import writer_resolve


class RefoldRefused(LedgerError):
    """The fold cannot be refolded: not a range fold, already refolded, its range no longer
    verifies, or the writer asked for is the mechanical one; nothing stored."""

    status = 409
    code = "refold_refused"


def _renamed(ops: list[dict[str, Any]], taken: set[str], number: int) -> list[dict[str, Any]]:
    """The writer's ops with fact ids that clash with existing facts suffixed ``~r<number>``."""
    out = []
    for op in ops:
        fact = op.get("fact")
        if isinstance(fact, dict) and fact.get("id") in taken:
            op = {**op, "fact": {**fact, "id": f"{fact['id']}~r{number}"}}
        out.append(op)
    return out


def ledger_refold_apply(*, journal: Journal, fold: Fold, writer: Any = None) -> FoldResult:
    """Fold ``fold``'s range again with ``writer``, as a new ``refold`` fold.

    Args:
        journal: the fold's journal.
        fold: a range fold (kind ``fold``); typically a mechanical fallback.
        writer: ``None`` (the configured default), a name or a writer object; never
            ``"mechanical"``.

    Returns:
        :class:`FoldResult` with the new fold, or the existing refold of the same range and
        writer (``created`` false).

    Raises:
        RefoldRefused: see the class; WriterUnknown / ModelNotConfigured: a bad writer.
        WriterFailed: the model failed (nothing stored).
    """
    w = writer_resolve(writer)
    if w.id == "mechanical":
        raise RefoldRefused("a refold needs a better writer than 'mechanical'", field="writer")
    if fold.kind != Fold.Kind.FOLD or fold.journal_id != journal.pk:
        raise RefoldRefused(f"fold {fold.number} is not a range fold of {journal.scope_label}")
    with transaction.atomic():
        journal = Journal.objects.select_for_update().get(pk=journal.pk)
        key = hashlib.sha256(f"refold:{fold.range_hash}:{w.id}".encode()).hexdigest()
        existing = Fold.objects.filter(journal=journal, range_hash=key).first()
        if existing is not None:
            return FoldResult(existing, False, f"fold {fold.number} was already refolded")
        covered = list(
            Entry.objects.filter(
                journal=journal, seq__gte=fold.seq_start, seq__lte=fold.seq_end
            ).order_by("seq")
        )
        if range_hash([e.entry_hash for e in covered]) != fold.range_hash:
            raise RefoldRefused(f"fold {fold.number}: its covered range no longer verifies")
        bad = next((e for e in covered if entry_check(e)), None)
        if bad is not None:
            raise RefoldRefused(f"fold {fold.number}: entry seq {bad.seq} fails its hash check")
        previous = latest_fold(journal)
        assert previous is not None
        state = writer_state(journal, previous, models=bool(getattr(w, "calls_models", False)))
        number = previous.number + 1
        views = [entry_view(e) for e in covered]
        ctx = fold_context(
            journal=journal, covered=covered, number=number, revision=journal.head_seq
        )
        composed = compose(w, entries=views, state=state, ctx=ctx)
        born_here = current_facts(
            journal, where=Q(origin_fold=fold.number, pin=False, lifecycle="active")
        )
        withdraw = [{"op": "withdraw", "id": fact_id} for fact_id in sorted(born_here)]
        proposed = [
            op["fact"]["id"]
            for op in composed.ops
            if isinstance(op.get("fact"), dict) and isinstance(op["fact"].get("id"), str)
        ]
        ops = withdraw + _renamed(composed.ops, facts_known(journal, proposed), number)
        delta = delta_make(
            fold=number,
            revision=journal.head_seq,
            refold_of=fold.number,
            evidence=delta_evidence(journal, covered, ops, number, journal.head_seq),
            ops=ops,
        )
        try:
            applied = delta_apply(journal, previous, delta)
        except (reducer.PinViolation, reducer.DeltaInvalid) as exc:
            raise RefoldRefused(f"fold {fold.number}: {exc}") from exc
        reduction = applied.reduction
        # the same shape as the fold it redoes: range, interrupted calls, loss, tokens
        idents = entry_identifiers(covered)
        manifest = manifest_make(
            refold_of=fold.number,
            covered=covered_make(
                fold.seq_start or 0, fold.seq_end or 0, [e.entry_hash for e in covered]
            ),
            range_hash=fold.range_hash,
            previous_fold=previous.number,
            revision=journal.head_seq,
            writer=composed.writer,
            verifier=composed.verifier,
            outcome=composed.outcome,
            withdrawn=[op["id"] for op in withdraw],
            instructions=instructions_check(
                journal,
                {"facts": pins_to_check(journal, applied)},
                pins_total=pins_count(journal, applied),
            ),
            tokens={
                "covered": sum(e.token_count for e in covered),
                "ledger_active": active_tokens(journal, applied),
                "source": source_label(settings.TOKEN_ENCODING),
            },
            interrupted_calls=interrupted_calls(group_rounds(covered), fold.seq_end or 0),
            loss=range_loss(journal, views, idents, applied),
        )
        if composed.note:
            manifest["note"] = composed.note
        try:
            with transaction.atomic():
                new = fold_store(
                    journal=journal,
                    applied=applied,
                    kind=Fold.Kind.REFOLD,
                    previous=previous,
                    seq_start=fold.seq_start,
                    seq_end=fold.seq_end,
                    revision=journal.head_seq,
                    range_hash=key,
                    outcome=composed.outcome,
                    writer=str(composed.writer.get("id", w.id))[:100],
                    verifier=str(composed.verifier.get("id", ""))[:100],
                    manifest=manifest,
                    facts_added=sum(
                        1 for r in reduction.results if r.op == "add" and r.status == "accepted"
                    ),
                    ops_rejected=len(reduction.rejected),
                )
        except IntegrityError:
            existing = Fold.objects.filter(journal=journal, range_hash=key).first()
            if existing is None:
                raise
            return FoldResult(existing, False, f"fold {fold.number} was already refolded")
    return FoldResult(new, True)


def ledger_refold_fallbacks(*, journal: Journal, writer: Any = None) -> Any:
    """Refold every range fold of ``journal`` that fell back to mechanical facts.

    ``compact --refold``. Each becomes a new ``refold`` fold (:func:`ledger_refold_apply`); folds
    already refolded with the same writer are skipped.

    Returns:
        :class:`~ledger_app.services.compact.CompactReport`, one row per refold.
    """
    from ledger_app.services.compact import CompactReport, CompactRow

    w = writer_resolve(writer)
    report = CompactReport(writer=w.id, writer_label=w.label)
    fallbacks = Fold.objects.filter(
        journal=journal, kind=Fold.Kind.FOLD, outcome=Fold.Outcome.FALLBACK
    ).order_by("number")
    for fold in fallbacks:
        result = ledger_refold_apply(journal=journal, fold=fold, writer=w)
        if result.created:
            report.rows.append(CompactRow(result.fold, result.fold.outcome))
    report.stopped = f"{len(report.rows)} of {fallbacks.count()} fallback fold(s) refolded"
    return report
