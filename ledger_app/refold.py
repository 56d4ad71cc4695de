"""What-if re-fold: run a stored fold again with another writer, touching nothing (issue 4).

A team compares compaction models (or prompt versions, or the offline writer) on its own
sessions by re-running one fold against **the same frozen range**: the entries the fold's
manifest lists, re-checked by hash, on top of the state the fold started from, at the
fold's revision. The other writer goes through the same path as a real fold (pins by
code, the writer, the verifier and the rules, one repair, the fallback, the reducer), and
the result is returned next to the real ledger with their difference. Nothing is written:
no fold, no attempt, no verdict rows.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from journal_app.models import Entry
from journal_app.services import entry_check
from ledger_app import reducer
from ledger_app.mechanical import is_pin_source, pin_fact, required_pins
from ledger_app.model_writer import Composition, ModelWriter, WriterFailed, compose
from ledger_app.models import Fold
from ledger_app.services import LedgerError, entry_view, fold_context, writer_resolve
from ledger_app.writers import Writer

#: Fields of a fact compared by the diff (bookkeeping such as ``origin_fold`` is not).
COMPARED = ("category", "priority", "lifecycle", "confidence", "text", "support")


class RefoldError(LedgerError):
    """The fold cannot be re-run: not a range fold, its frozen range no longer verifies,
    or the other writer's model could not be used."""


@dataclass
class LedgerDiff:
    """Two ledgers compared fact by fact.

    Facts are matched by id, then (for facts the two writers named differently) by
    category and text. ``changed`` lists ``{"id", "fields": {name: [original, what_if]}}``.
    """

    only_original: list[dict[str, Any]] = field(default_factory=list)
    only_what_if: list[dict[str, Any]] = field(default_factory=list)
    changed: list[dict[str, Any]] = field(default_factory=list)
    same: int = 0

    @property
    def identical(self) -> bool:
        return not (self.only_original or self.only_what_if or self.changed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "only_original": self.only_original,
            "only_what_if": self.only_what_if,
            "changed": self.changed,
            "same": self.same,
        }


def ledger_diff(original: dict[str, Any], what_if: dict[str, Any]) -> LedgerDiff:
    """Compare two ledger states (``{"facts": {id: fact}}``); see :class:`LedgerDiff`."""
    a: dict[str, dict[str, Any]] = original.get("facts", {})
    b: dict[str, dict[str, Any]] = what_if.get("facts", {})
    diff = LedgerDiff()
    for fact_id in sorted(a.keys() & b.keys()):
        fields = {
            name: [a[fact_id].get(name), b[fact_id].get(name)]
            for name in COMPARED
            if a[fact_id].get(name) != b[fact_id].get(name)
        }
        if fields:
            diff.changed.append({"id": fact_id, "fields": fields})
        else:
            diff.same += 1
    left = [a[i] for i in sorted(a.keys() - b.keys())]
    right = {(f["category"], f["text"]): f for f in (b[i] for i in sorted(b.keys() - a.keys()))}
    for fact in left:
        twin = right.pop((fact["category"], fact["text"]), None)
        if twin is None:
            diff.only_original.append(fact)
            continue
        fields = {
            name: [fact.get(name), twin.get(name)]
            for name in COMPARED
            if fact.get(name) != twin.get(name)
        }
        if fields:
            diff.changed.append({"id": f"{fact['id']} / {twin['id']}", "fields": fields})
        else:
            diff.same += 1
    diff.only_what_if = list(right.values())
    return diff


@dataclass
class Refold:
    """Result of :func:`ledger_refold`: both ledgers, their diff, and how the other writer did.

    ``composition`` holds the other writer's proposals, verdicts, repair and model calls;
    ``verdicts`` the reducer's verdict on each op of the what-if delta.
    """

    fold: Fold
    original: dict[str, Any]
    what_if: dict[str, Any]
    diff: LedgerDiff
    outcome: str
    composition: Composition
    verdicts: list[dict[str, Any]]


def ledger_refold(*, fold: Fold, writer: str | Writer | ModelWriter) -> Refold:
    """Re-run ``fold`` with ``writer`` against its frozen range; the real ledger is untouched.

    Args:
        fold: a stored fold of kind ``fold``.
        writer: ``"offline"``, ``"mechanical"``, ``"model"`` or a writer object (e.g. a
            :class:`~ledger_app.model_writer.ModelWriter` with another model or prompt).

    Returns:
        :class:`Refold`: the fold's own state, the what-if state, their diff.

    Raises:
        RefoldError: the fold is a review or consolidation; an entry of its range is
            missing, out of order or fails its hash check; the writer's model was unreachable.
        LedgerError: unknown writer name, or ``"model"`` with no model configured.
    """
    if fold.kind != Fold.Kind.FOLD or fold.seq_start is None:
        raise RefoldError(f"fold {fold.number} is a {fold.kind}, not a fold over a range")
    journal = fold.journal
    covered = list(
        Entry.objects.filter(
            journal=journal, seq__gte=fold.seq_start, seq__lte=fold.seq_end
        ).order_by("seq")
    )
    frozen = fold.manifest.get("covered", {}).get("entry_hashes", [])
    if [e.entry_hash for e in covered] != frozen:
        raise RefoldError(
            f"fold {fold.number}: the entries of seq {fold.seq_start}-{fold.seq_end} no longer "
            "match the hashes in its manifest"
        )
    for e in covered:
        problems = entry_check(e)
        if problems:
            raise RefoldError(
                f"fold {fold.number}: entry seq {e.seq} fails its check: {problems[0]}"
            )
    w = writer_resolve(writer)
    views = [entry_view(e) for e in covered]
    previous = fold.previous.state_dict if fold.previous else copy.deepcopy(reducer.EMPTY_STATE)
    ctx = fold_context(journal=journal, covered=covered, number=fold.number, revision=fold.revision)
    try:
        composition = compose(w, entries=views, state=previous, ctx=ctx)
    except WriterFailed as exc:
        raise RefoldError(f"what-if re-fold of fold {fold.number} failed: {exc}") from exc
    ops = [{"op": "add", "fact": pin_fact(v)} for v in views if is_pin_source(v)] + composition.ops
    assert ctx.evidence is not None
    delta = {
        "fold": fold.number,
        "revision": fold.revision,
        "evidence": ctx.evidence(ops),
        "required_pins": required_pins(views),
        "ops": ops,
    }
    try:
        reduction = reducer.apply_delta(previous, delta)
    except (reducer.PinViolation, reducer.DeltaInvalid) as exc:
        raise RefoldError(f"what-if re-fold of fold {fold.number} refused: {exc}") from exc
    original = fold.state_dict
    return Refold(
        fold=fold,
        original=original,
        what_if=reduction.state,
        diff=ledger_diff(original, reduction.state),
        outcome=composition.outcome,
        composition=composition,
        verdicts=[
            {"index": r.index, "op": r.op, "status": r.status, "reason": r.reason}
            for r in reduction.results
        ],
    )
