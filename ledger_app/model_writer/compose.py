"""The one entry point of the writers: :func:`compose` (docs/design.md 5.3). Pure.

The fold service calls :func:`compose` to get a fold's non-pin ops from any writer, with the
record of how they were reached (a :class:`~ledger_app.model_writer.records.Composition`):

* a :class:`~ledger_app.model_writer.model_writer.ModelWriter`: propose, verify, one repair,
  mechanical fallback (see that module);
* the offline writer (:class:`ledger_app.offline.OfflineWriter`): its items go through the
  rules (:func:`ledger_app.offline.check_item`); the ones rejected are dropped and recorded.
  Outcome ``accepted``;
* any other :class:`ledger_app.mechanical_writer.Writer`: its ops unchanged (the mechanical writer's
  outcome is ``fallback``, labelled with :data:`FALLBACK_NOTE`).

Whatever the writer, the ops returned never carry a secret value in a non-pin fact's text,
support quotes, or an op's reason (:func:`ledger_app.fact_text.redact_op`). The
mechanical and offline writers already redact what they quote before clipping it; this is
the last check, for every other writer (models, recovery, scripted).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger_app.entry_view import EntryView
from ledger_app.fact_text import redact_op
from ledger_app.mechanical_writer import Writer
from ledger_app.model_writer.judges import (
    FoldContext,
    closure_judgement,
    earlier_entries,
    rules_judgement,
)
from ledger_app.model_writer.model_writer import ModelWriter
from ledger_app.model_writer.records import (
    FALLBACK_NOTE,
    Composition,
    ItemRecord,
    Judgement,
    RoundRecord,
)
from ledger_app.offline import EvidenceIndex, OfflineWriter, check_item


def compose(
    writer: Writer | ModelWriter,
    *,
    entries: Sequence[EntryView],
    state: dict[str, Any],
    ctx: FoldContext,
) -> Composition:
    """The non-pin ops of one fold from ``writer``, with the record of how they were reached.

    Args:
        writer: a :class:`ModelWriter`, an :class:`~ledger_app.offline.OfflineWriter`, or any
            writer with ``propose``.
        entries: the covered entries in seq order.
        state: the ledger state before the fold (not modified).
        ctx: fold number, revision, and access to earlier entries.

    Returns:
        :class:`Composition`.

    Raises:
        WriterFailed: a model writer's model was unreachable or refused the request.
    """
    composition = _compose(writer, entries, state, ctx)
    composition.ops = [redact_op(op) for op in composition.ops]
    return composition


def _compose(
    writer: Writer | ModelWriter,
    entries: Sequence[EntryView],
    state: dict[str, Any],
    ctx: FoldContext,
) -> Composition:
    if isinstance(writer, ModelWriter):
        return writer.compose(entries=entries, state=state, ctx=ctx)
    info = {
        "id": writer.id,
        "label": writer.label,
        "kind": "offline" if isinstance(writer, OfflineWriter) else writer.id,
        "prompt_version": writer.prompt_version,
    }
    if isinstance(writer, OfflineWriter):
        return _compose_offline(writer, entries, state, ctx, info)
    ops = writer.propose(entries, state)
    outcome = "fallback" if writer.id == "mechanical" else "accepted"
    return Composition(
        ops=ops,
        outcome=outcome,
        writer=info,
        verifier={"id": "reducer-rules", "prompt_version": None},
        note=("mechanical facts only: " + FALLBACK_NOTE) if outcome == "fallback" else "",
    )


def _compose_offline(
    writer: OfflineWriter,
    entries: Sequence[EntryView],
    state: dict[str, Any],
    ctx: FoldContext,
    info: dict[str, Any],
) -> Composition:
    ops = writer.propose(entries, state)
    index = EvidenceIndex(entries, earlier_entries(ctx, ops, state, entries))
    items: list[ItemRecord] = []
    kept: list[dict[str, Any]] = []
    dropped: set[str] = set()
    ended: set[str] = set()  # closed by an earlier op of this fold (a request's parts)
    for n, op in enumerate(ops):
        target = str(op.get("id", ""))
        if target in dropped and op.get("op") == "supersede":
            op = {"op": "add", "fact": op["fact"]}  # what it replaced was not recorded
        fact = op.get("fact") if isinstance(op.get("fact"), dict) else None
        record = ItemRecord(
            key=(fact or {}).get("id") or f"{op.get('op')}:{op.get('id', n)}",
            op=op,
            claim=(fact or {}).get("text", "") or f"{op.get('op')} {op.get('id', '')}",
            support=[s["entry"] for s in (fact or {}).get("support", [])]
            or list(op.get("evidence", [])),
            judgements=[
                rules_judgement(
                    check_item(op, index, state), closure_judgement(op, index, state, ended)
                )
            ],
        )
        if target in dropped and op.get("op") in ("close", "cancel", "retire"):
            record.judgements.append(
                Judgement("rules", "not_entailed", f"fact {target!r} was not recorded")
            )
        items.append(record)
        if record.accepted:
            kept.append(op)
            if op.get("op") == "close":
                ended.add(target)
        elif fact is not None:
            dropped.add(str(fact.get("id", "")))
    return Composition(
        ops=kept,
        outcome="accepted",
        writer=info,
        verifier={
            "id": "offline-rules",
            "label": "the verifier's rules applied mechanically (no model)",
            "prompt_version": None,
        },
        rounds=[RoundRecord(round=0, kind="offline", items=items, ops=kept)],
        note="offline writer: deterministic rules over the journal, no model output",
    )
