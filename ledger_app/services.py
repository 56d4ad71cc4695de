"""Every state change of the ledger: folds (DESIGN.md section 5).

``ledger_fold`` is the one function the command, the task, the API and the UI call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import rfc8785
from django.conf import settings
from django.db import IntegrityError, transaction

from journal_app.models import Entry, Journal
from journal_app.rounds import complete_prefix_end, group_rounds
from journal_app.tokens import count_tokens, source_label
from ledger_app import reducer
from ledger_app.mechanical import EntryView, mechanical_ops, required_pins
from ledger_app.models import Fold

WRITER_MECHANICAL = "mechanical"


class LedgerError(Exception):
    """Base of the ledger's domain errors."""


class FoldRefused(LedgerError):
    """The reducer refused the fold (a required pin missing or altered); nothing stored."""


@dataclass
class FoldResult:
    """``fold`` is the stored fold (new or the existing one for the same range); ``created``."""

    fold: Fold | None
    created: bool
    reason: str = ""


def entry_view(entry: Entry) -> EntryView:
    """The pure view of a row that :mod:`ledger_app.mechanical` reads."""
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
    )


def range_hash(hashes: Sequence[str]) -> str:
    """Idempotency key of a fold: sha256 of the canonical list of covered entry hashes."""
    return hashlib.sha256(rfc8785.dumps(list(hashes))).hexdigest()


def latest_fold(journal: Journal) -> Fold | None:
    """The journal's last fold (any kind), or ``None``."""
    return Fold.objects.filter(journal=journal).order_by("-number").first()


def ledger_state(journal: Journal, fold: Fold | None = None) -> dict[str, Any]:
    """The ledger state after ``fold`` (default: the latest); the empty state if none."""
    fold = fold or latest_fold(journal)
    return fold.state_dict if fold else dict(reducer.EMPTY_STATE)


def _evidence(entries: Sequence[Entry], fold_number: int) -> dict[str, dict[str, Any]]:
    return {
        e.entry_hash: {
            "seq": e.seq,
            "kind": e.kind,
            "role": e.role,
            "is_error": e.is_error,
            "derived": e.derived,
            "fold": fold_number,
        }
        for e in entries
    }


def _render_tokens(state: dict[str, Any]) -> int:
    text = "\n".join(
        f["text"] for f in state.get("facts", {}).values() if f["lifecycle"] == "active"
    )
    return count_tokens(text, settings.TOKEN_ENCODING)


def ledger_fold(
    *, journal: Journal, upto: int | None = None, writer: str = WRITER_MECHANICAL
) -> FoldResult:
    """Fold the journal's unfolded complete API rounds, up to ``upto`` (default: head).

    One fold at a time per branch: the journal row is locked for the whole fold. A fold
    covering exactly the same entries as an existing one returns that fold (idempotency key:
    scope + covered range hash, DESIGN.md section 9).

    Args:
        journal: the scope to fold.
        upto: the highest seq the fold may cover; the fold ends at the last complete round
            at or before it. A trailing interrupted round is left for a later fold.
        writer: ``"mechanical"`` (pins and tool outcomes; outcome ``fallback``).

    Returns:
        :class:`FoldResult`; ``fold`` is ``None`` with a ``reason`` when nothing is foldable.

    Raises:
        FoldRefused: the reducer found a required pin missing or altered. Nothing stored.
        LedgerError: unknown writer.
    """
    if writer != WRITER_MECHANICAL:
        raise LedgerError(f"unknown writer {writer!r} (known: {WRITER_MECHANICAL})")
    with transaction.atomic():
        journal = (
            Journal.objects.select_for_update().select_related("session__tenant").get(pk=journal.pk)
        )
        previous = latest_fold(journal)
        start = (previous.seq_end or 0) + 1 if previous else 1
        limit = journal.head_seq if upto is None else min(upto, journal.head_seq)
        entries = list(
            Entry.objects.filter(
                journal=journal, seq__gte=start, seq__lte=journal.head_seq
            ).order_by("seq")
        )
        rounds = [r for r in group_rounds(entries) if r.last_seq <= limit]
        if rounds:
            rounds[-1].at_tail = rounds[-1].last_seq == journal.head_seq
        end = complete_prefix_end(rounds)
        if end is None or end < start:
            return FoldResult(
                None, False, "nothing to fold: no complete API round after the last fold"
            )
        covered = [e for e in entries if e.seq <= end]
        hashes = [e.entry_hash for e in covered]
        key = range_hash(hashes)
        existing = Fold.objects.filter(journal=journal, range_hash=key).first()
        if existing is not None:
            return FoldResult(existing, False, "this range is already folded")
        number = (previous.number + 1) if previous else 1
        views = [entry_view(e) for e in covered]
        ops = mechanical_ops(views)
        delta = {
            "fold": number,
            "revision": journal.head_seq,
            "evidence": _evidence(covered, number),
            "required_pins": required_pins(views),
            "ops": ops,
        }
        prev_state = previous.state_dict if previous else dict(reducer.EMPTY_STATE)
        try:
            reduction = reducer.apply_delta(prev_state, delta)
        except reducer.PinViolation as exc:
            raise FoldRefused(str(exc)) from exc
        verdicts = [
            {
                "index": r.index,
                "op": r.op,
                "status": r.status,
                "reason": r.reason,
                "fact_id": r.fact_id,
            }
            for r in reduction.results
        ]
        stored_delta = {**delta, "verdicts": verdicts}
        state = reduction.state
        covered_tokens = sum(e.token_count for e in covered)
        interrupted = [c for r in rounds if r.last_seq <= end for c in r.interrupted_call_ids]
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
            "writer": {"id": writer, "prompt_version": None, "label": "mechanical (no model)"},
            "verifier": {"id": "reducer-rules", "prompt_version": None},
            "tokens": {
                "covered": covered_tokens,
                "ledger_active": _render_tokens(state),
                "source": source_label(settings.TOKEN_ENCODING),
            },
            "interrupted_calls": interrupted,
            "outcome": Fold.Outcome.FALLBACK,
            "note": "mechanical facts only: retrieve raw journal evidence before relying on omitted state",
            "instructions": {
                "pins": len(delta["required_pins"]),
                "intact": True,
                "pins_hash": range_hash([p["entry"] for p in delta["required_pins"]]),
            },
        }
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
                    outcome=Fold.Outcome.FALLBACK,
                    writer=writer,
                    verifier="reducer-rules",
                    manifest=manifest,
                    delta=rfc8785.dumps(stored_delta).decode("utf-8"),
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
    return FoldResult(fold, True)


def fold_deltas(journal: Journal) -> list[dict[str, Any]]:
    """Every stored delta of ``journal`` in fold order (verdicts removed: the reducer recomputes them)."""
    out = []
    for fold in Fold.objects.filter(journal=journal).order_by("number"):
        d = json.loads(fold.delta)
        d.pop("verdicts", None)
        out.append(d)
    return out
