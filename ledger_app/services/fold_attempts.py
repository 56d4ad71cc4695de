"""The attempt record of a fold: one :class:`~ledger_app.models.FoldAttempt` per run, with
a :class:`~ledger_app.models.Proposal` per writer round and its
:class:`~ledger_app.models.Verdict` rows.

Writes those rows (:func:`attempt_store`), for a stored fold and for a failed one alike
(``fold.attempts``; the failed ones are listed on the fold pages). The caller holds the
transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from journal_app.models import Journal
from ledger_app.model_writer import Composition, RoundRecord, WriterFailed
from ledger_app.models import Fold, FoldAttempt, Proposal, Verdict
from ledger_app.ops_refs import ItemRefs, ops_refer


def attempt_record(
    composed: Composition | None,
    error: WriterFailed | None,
    *,
    covered: dict[str, int],
    previous_fold: int | None,
) -> dict[str, Any]:
    """The ``record`` of an attempt: what was covered, the writer and verifier, every model call.

    Args:
        composed: the writer's composition (``None`` when it failed).
        error: the failure (``None`` when it composed); its calls are recorded instead.
        covered: ``{"seq_start", "seq_end", "entries"}`` of the planned range.
        previous_fold: the number of the fold before, or ``None``.

    Returns:
        ``{"covered", "previous_fold", "writer", "verifier", "model_calls"}``, plus
        ``"model_usage"``, ``"fallback_reason"`` and ``"note"`` when it composed.
    """
    source: Any = error if error is not None else composed
    record: dict[str, Any] = {
        "covered": covered,
        "previous_fold": previous_fold,
        "writer": source.writer,
        "verifier": source.verifier,
        "model_calls": [c.to_dict() for c in source.calls],
    }
    if composed is not None:
        record["model_usage"] = composed.usage()
        record["fallback_reason"] = composed.fallback_reason
        record["note"] = composed.note
    return record


def attempt_store(
    *,
    journal: Journal,
    fold: Fold | None,
    outcome: str,
    rounds: Sequence[RoundRecord],
    record: dict[str, Any],
    error: str = "",
    **columns: Any,
) -> FoldAttempt:
    """Store one :class:`FoldAttempt` with a :class:`Proposal` per round and its
    :class:`Verdict` rows.

    Args:
        fold: the stored fold, or ``None`` for a failed attempt.
        outcome: a :class:`FoldAttempt.Outcome` value.
        rounds: the writer's rounds (``Composition.rounds`` or ``WriterFailed.rounds``).
        record: from :func:`attempt_record`.
        error: the failure's message (failed attempts).
        columns: ``number``, ``seq_start``, ``seq_end``, ``revision``, ``range_hash`` of the
            planned fold (``Plan.columns()``).
    """
    writer, verifier = record.get("writer") or {}, record.get("verifier") or {}
    attempt = FoldAttempt.objects.create(
        journal=journal,
        fold=fold,
        **columns,
        writer=str(writer.get("id", ""))[:100],
        writer_label=str(writer.get("label", ""))[:200],
        verifier=str(verifier.get("id", ""))[:100],
        outcome=outcome,
        error=error,
        record=record,
    )
    verdicts = []
    # a round's ops that are a run of the fold's delta ops are stored as a reference to it
    # (ledger_app.ops_refs): the delta already holds them
    delta_ops = json.loads(fold.delta).get("ops", []) if fold is not None and fold.delta else []
    for r in rounds:
        refer = ops_refer(r.ops, delta_ops)
        proposal = Proposal.objects.create(
            attempt=attempt,
            round=r.round,
            kind=r.kind,
            raw=r.raw,
            parsed=r.parsed,
            error=r.error,
            verifier_raw=r.verifier_raw,
            verifier_error=r.verifier_error,
            stored_ops=r.ops if refer is None else [],
            ops_from=None if refer is None else refer[0],
            ops_count=0 if refer is None else refer[1],
        )
        # a verdict on an item that stood names its op instead of copying its text and
        # citations (ledger_app.ops_refs.ItemRefs)
        refs = ItemRefs(r.ops)
        for item in r.items:
            at = refs.find(item.claim, item.support)
            for j in item.judgements:
                verdicts.append(
                    Verdict(
                        proposal=proposal,
                        key=item.key[:100],
                        op=str(item.op.get("op", ""))[:16],
                        stored_claim=item.claim if at is None else "",
                        stored_support=item.support if at is None else [],
                        op_at=at,
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
