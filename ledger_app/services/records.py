"""Every stored fold in a chain: the record hash over what a fold stores (docs in README
"Verification"; docs/design.md 5.2).

A fold's record is its columns (the delta and a checkpoint's state by sha256), and every
:class:`~ledger_app.models.FoldAttempt` that produced it with its
:class:`~ledger_app.models.Proposal` rows (the writer's and the verifier's raw answers by
sha256; the ops as written, and for a row that refers to its delta's ops instead of
holding a copy, that reference too, ``ops_ref``) and their
:class:`~ledger_app.models.Verdict` rows, all columns (the claim and support as read, and
for a row that refers to an op, ``item_ref``). ``record_hash`` is
:func:`journal_app.record_chain.record_hash` of that record chained to the previous fold's, so a
changed label, note, loss figure, count, verdict or raw answer, or a changed earlier fold,
is named by :func:`fold_records_verify`. The functions take the model classes so that the
data migration filling existing folds runs the same code on its historical models.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.db import models

from journal_app.models import Journal
from journal_app.record_chain import record_hash, record_value, text_digest
from ledger_app.models import Fold, FoldAttempt, Proposal, Verdict
from ledger_app.ops_refs import op_item, ops_resolve

#: columns recorded by their sha256 instead of their text (large, or a model's raw answer)
DIGESTED = {
    "Fold": ("delta", "state"),
    "Proposal": ("raw", "verifier_raw"),
}
#: the column that holds the hash itself
OWN = "record_hash"

Models = tuple[type[models.Model], type[models.Model], type[models.Model], type[models.Model]]
MODELS: Models = (Fold, FoldAttempt, Proposal, Verdict)


def _columns(model: type[models.Model]) -> list[str]:
    return [f.attname for f in model._meta.concrete_fields if f.attname != OWN]


def _values(model: type[models.Model], row: dict[str, Any]) -> dict[str, Any]:
    digested = DIGESTED.get(model.__name__, ())
    return {k: text_digest(v) if k in digested else record_value(v) for k, v in sorted(row.items())}


def _delta_ops(delta: str) -> list[Any]:
    """The ops of a stored delta, or ``[]`` when it does not parse as a delta (a changed
    delta is named by its own digest in the record, not by a crash here)."""
    try:
        value = json.loads(delta) if delta else {}
    except ValueError:
        return []
    ops = value.get("ops", []) if isinstance(value, dict) else []
    return ops if isinstance(ops, list) else []


def fold_record(fold_id: int, models_: Models = MODELS) -> dict[str, Any]:
    """What fold ``fold_id`` stores, as its record hash covers it (columns from the database).

    Returns:
        ``{"fold": {...}, "attempts": [{..., "proposals": [{..., "verdicts": [...]}]}]}``,
        every list in primary-key order.
    """
    fold_m, attempt_m, proposal_m, verdict_m = models_
    fold = fold_m.objects.filter(pk=fold_id).values(*_columns(fold_m)).get()
    attempts = list(
        attempt_m.objects.filter(fold_id=fold_id).order_by("pk").values(*_columns(attempt_m))
    )
    ids = [a["id"] for a in attempts]
    proposals = list(
        proposal_m.objects.filter(attempt_id__in=ids).order_by("pk").values(*_columns(proposal_m))
    )
    verdicts = list(
        verdict_m.objects.filter(proposal_id__in=[p["id"] for p in proposals])
        .order_by("pk")
        .values(*_columns(verdict_m))
    )
    delta_ops: list[Any] | None = None
    ops_of: dict[int, list[Any]] = {}
    for p in proposals:
        if "stored_ops" in p:  # the ops as written, whether stored or referred to (0019)
            start, count, stored = p.pop("ops_from"), p.pop("ops_count"), p.pop("stored_ops")
            if start is None and count == 0:  # a copy: recorded as before references existed
                p["ops"] = stored
            else:  # a reference: the ops it reads and the reference itself
                if delta_ops is None:
                    delta_ops = _delta_ops(fold["delta"])
                p["ops"] = ops_resolve(stored, start, count, delta_ops)
                p["ops_ref"] = [start, count, stored]
        ops_of[p["id"]] = p["ops"]
    by_proposal: dict[int, list[dict[str, Any]]] = {}
    for v in verdicts:
        if "stored_claim" in v:  # the claim and support as written (0021)
            at = v.pop("op_at")
            claim, support = v.pop("stored_claim"), v.pop("stored_support")
            if at is not None:  # a reference: the op's item and the reference itself
                v["item_ref"] = [at, claim, support]
                ops = ops_of.get(v["proposal_id"], [])
                claim, support = op_item(ops[at] if at < len(ops) else None)
            v["claim"], v["support"] = claim, support
        by_proposal.setdefault(v["proposal_id"], []).append(_values(verdict_m, v))
    by_attempt: dict[int, list[dict[str, Any]]] = {}
    for p in proposals:
        by_attempt.setdefault(p["attempt_id"], []).append(
            {**_values(proposal_m, p), "verdicts": by_proposal.get(p["id"], [])}
        )
    return {
        "fold": _values(fold_m, fold),
        "attempts": [
            {**_values(attempt_m, a), "proposals": by_attempt.get(a["id"], [])} for a in attempts
        ],
    }


def _previous_hash(fold_m: type[models.Model], journal_id: int, number: int) -> str:
    return (
        fold_m.objects.filter(journal_id=journal_id, number__lt=number)
        .order_by("-number")
        .values_list(OWN, flat=True)
        .first()
        or ""
    )


def fold_seal(fold: Any, models_: Models = MODELS) -> str:
    """Compute and store ``fold.record_hash`` (chained to the previous fold of its journal).

    Called by every path that writes a fold, after its attempts, proposals and verdicts,
    in the same transaction (sealing twice recomputes the same value from the rows).

    Returns:
        The record hash (sha256 hex).
    """
    fold_m = models_[0]
    value = record_hash(
        previous=_previous_hash(fold_m, fold.journal_id, fold.number),
        record=fold_record(fold.pk, models_),
    )
    fold_m.objects.filter(pk=fold.pk).update(**{OWN: value})
    fold.record_hash = value
    return value


def _folds(journal_id: int, fold_m: type[models.Model]) -> Iterator[tuple[int, int, str]]:
    yield from (
        fold_m.objects.filter(journal_id=journal_id)
        .order_by("number")
        .values_list("pk", "number", OWN)
        .iterator(chunk_size=500)
    )


def fold_records_verify(*, journal: Journal) -> dict[str, Any] | None:
    """Recompute every fold's record hash of ``journal`` in order, each chained to the
    previous stored one.

    Returns:
        ``None`` when all match, else the first fold that differs:
        ``{"fold": N, "fact": None, "check": "record_hash", "detail": ...}`` (the shape of
        :func:`ledger_app.services.verify.ledger_verify`'s mismatch).
    """
    previous = ""
    for pk, number, stored in _folds(journal.pk, Fold):
        recomputed = record_hash(previous=previous, record=fold_record(pk))
        if recomputed != stored:
            return {
                "fold": number,
                "fact": None,
                "check": "record_hash",
                "detail": f"fold {number}'s stored record (its columns, attempts, proposals or "
                f"verdicts, or the previous fold's record hash) differs from its record hash: "
                f"stored {stored or '(none)'}, recomputed {recomputed}",
            }
        previous = stored
    return None


def folds_seal(journal_id: int, models_: Models = MODELS, start: int = 0) -> int:
    """Seal every fold of journal ``journal_id`` after fold ``start``, in number order (a
    re-import that adds attempts to folds already written; the data migration).

    Returns:
        How many folds were sealed.
    """
    fold_m = models_[0]
    previous = _previous_hash(fold_m, journal_id, start + 1)
    count = 0
    for pk in list(
        fold_m.objects.filter(journal_id=journal_id, number__gt=start)
        .order_by("number")
        .values_list("pk", flat=True)
    ):
        previous = record_hash(previous=previous, record=fold_record(pk, models_))
        fold_m.objects.filter(pk=pk).update(**{OWN: previous})
        count += 1
    return count
