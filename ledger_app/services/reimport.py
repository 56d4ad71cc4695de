"""Re-import of a session export's ledger into any scope (docs/design.md 5.2).

``journal_app.formats.ledgerkeep_export`` brings the journal back: into the scope it came
from hash for hash, into any other scope re-hashed for that scope (the scope is part of the
entry header, docs/design.md 4; body hashes never change). :func:`ledger_reimport` then
re-creates what the export holds beside the journal, for one re-imported journal:

* **folds**, in number order, each through the storage helpers every fold uses
  (:func:`~ledger_app.services.store.delta_apply`, then
  :func:`~ledger_app.services.store.fold_store`): the exported delta with every entry hash
  (and the 16-hex prefixes fact ids carry, ``pin:<16 hex>``) mapped old -> new, its verdicts
  re-derived by the reducer and compared with the exported ones, the manifest mapped the
  same way with its range hash re-derived from the new journal;
* **retirement requests** with the fold that made them, and **decisions** with the review
  fold that applied them (reviewer, comment, time, and the ``review.approve`` /
  ``review.refuse`` audit event ``verify_ledger`` looks for);
* **comments** and **annotations** through :mod:`audit_app.services` (each logged), and
  **recovery receipts** (their snapshot re-scoped, fold references by number) through the
  ``receipts`` step its caller passes (recovery sits above the ledger:
  :func:`recovery_app.session_transfer.receipts_reimport`).

Before anything is stored the export is re-verified on its own terms: each delta hashes to
its exported ``delta_hash``; replaying the exported deltas through the pure reducer gives
every exported ``state_hash`` and verdict; each range fold's exported ``range_hash`` is the
hash of the exported entries it covers. After the copy's state at each fold must be the
exported state with the hashes mapped. At the end ``ledger_verify`` and ``ledger_integrity``
run on the copy; any problem raises, and the caller's transaction writes nothing.

The record-by-record copy is :mod:`ledger_app.services.reimport_copy`; the import that runs
the journal's and then this one, in one transaction, is
:mod:`ledger_app.services.transcript_import`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from journal_app.models import Entry, Journal
from ledger_app import reducer
from ledger_app.errors import ReimportConflict, ReimportInvalid
from ledger_app.models import Fold
from ledger_app.services.integrity import ledger_integrity
from ledger_app.services.records import folds_seal
from ledger_app.services.reimport_copy import HashRemap, LedgerCopy, ReimportResult, records_of
from ledger_app.services.verify import ledger_verify

#: the receipts step of an app above the ledger:
#: ``step(*, journal, records, folds, remap, hashes) -> receipts created``
ReceiptsReimport = Callable[..., int]


def reimport_mapping(*, journal: Journal, records: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Old entry hash -> new entry hash (hex) for ``journal``, re-imported from ``records``.

    Matches the export's ``entry`` records of ``journal``'s lane to the stored entries by
    seq (a journal that grew after the export keeps its later entries), and re-checks each stored body against the exported ``body_hash`` and
    ``byte_length`` (the body is the same bytes whatever the scope).

    Raises:
        ReimportInvalid: an entry missing, or a body that does not hash as exported.
    """
    stored = {
        seq: (h, b, n)
        for seq, h, b, n in Entry.objects.filter(journal=journal).values_list(
            "seq", "entry_hash", "body_hash", "byte_length"
        )
    }
    mapping: dict[str, str] = {}
    for rec in records_of(records, "entry", journal):
        row = stored.get(rec.get("seq"))
        if row is None or (row[1], row[2]) != (rec.get("body_hash"), rec.get("byte_length")):
            raise ReimportInvalid(
                f"entry seq {rec.get('seq')} of {journal.scope_label} does not hold the "
                "exported body (body hash or length differs)",
                field="body_hash",
            )
        mapping[str(rec["entry_hash"])] = row[0]
    return mapping


def ledger_reimport(
    *,
    journal: Journal,
    records: Sequence[Mapping[str, Any]],
    mapping: Mapping[str, str],
    receipts: ReceiptsReimport | None = None,
) -> ReimportResult:
    """Re-create an export's ledger, reviews, comments and receipts for a re-imported journal.

    Call it inside the import's transaction, after the journal import (see the module
    docstring for what is re-created and re-verified).

    Args:
        journal: the journal the export's entries of one lane were imported into.
        records: the export's records between header and end
            (:func:`journal_app.formats.ledgerkeep_export.export_records`); those of other
            lanes are ignored, annotations (session-level) are taken by the export's first
            lane.
        mapping: old entry hash -> new entry hash, hex (:func:`reimport_mapping`).
        receipts: re-creates the recovery receipts
            (:func:`recovery_app.session_transfer.receipts_reimport`, called with
            ``journal``, ``records``, the new folds by number, the hash mapper and
            ``mapping``); ``None``: receipts are left out and listed in ``skipped``.

    Returns:
        :class:`ReimportResult`. When ``journal`` already holds the exported folds (the
        re-import of an export into the scope it came from, possibly grown since) nothing is
        written and ``unchanged`` is true.

    Raises:
        ReimportInvalid: (422) a record that does not verify (delta hash, verdicts, state
            hash, range hash), or a copy that ``ledger_verify`` / ``ledger_integrity``
            reports; ``field`` names the record field.
        ReimportConflict: (409) the journal holds folds that are not the exported ones.
    """
    folds = sorted(
        (dict(r) for r in records_of(records, "fold", journal)), key=lambda r: r.get("number") or 0
    )
    existing = list(
        Fold.objects.filter(journal=journal)
        .order_by("number")
        .values_list("number", "kind", "state_hash")
    )
    if existing:
        exported = [(r.get("number"), r.get("kind")) for r in folds]
        same = [(n, k) for n, k, _ in existing[: len(exported)]] == exported
        if same and _holds_export(existing[len(exported) - 1][2] if folds else "", folds, mapping):
            return ReimportResult(unchanged=True)
        raise ReimportConflict(
            f"{journal.scope_label} already has a ledger of {len(existing)} fold(s); re-import "
            "the export into a fresh session"
        )
    work = LedgerCopy(journal, records, mapping)
    # retirement records are keyed by their order; the review fold's manifest names the
    # original request pk, which the export does not carry: map by decided_in instead
    for index, rec in enumerate(work.retirements):
        rec = dict(rec)
        work.retirements[index] = rec
        rec["pk"] = index
    for rec in folds:
        if rec.get("kind") == Fold.Kind.REVIEW:
            _review_request(work, rec)
        work.fold(rec)
    work.attempts()
    folds_seal(journal.pk)  # the attempts joined folds already sealed
    work.comments()
    lanes = [r.get("lane") for r in records if r.get("type") == "journal"]
    if lanes and lanes[0] == journal.lane:
        work.annotations()
    rows = records_of(records, "receipt", journal)
    if rows and receipts is None:
        work.result.skipped.append(f"{len(rows)} receipt(s): not re-imported without recovery")
    elif rows and receipts is not None:
        work.result.receipts += receipts(
            journal=journal,
            records=records,
            folds=work.folds,
            remap=work.remap,
            hashes=work.remap.full,
        )
    report = ledger_verify(journal=journal)
    if not report.ok:
        raise ReimportInvalid(f"the copy's ledger does not verify: {report.mismatch}")
    problems = ledger_integrity(journal=journal)
    if problems:
        p = problems[0]
        raise ReimportInvalid(
            f"the copy fails the integrity check {p.check!r}"
            + (f" at fold {p.fold}" if p.fold else "")
            + f": {p.detail}"
        )
    return work.result


def _holds_export(
    stored_hash: str, folds: Sequence[Mapping[str, Any]], mapping: Mapping[str, str]
) -> bool:
    """Whether a journal whose last exported-numbered fold has ``stored_hash`` already holds
    the export: the exported deltas replayed (pure reducer) and carried into this scope's
    entry hashes give that state hash. True for the export's own scope (identity mapping) and
    for a copy it was re-imported into before, so importing it again is a no-op there."""
    if not folds:
        return True
    state: dict[str, Any] = reducer.reduce(None, [])
    try:
        for rec in folds:
            delta = json.loads(str(rec.get("delta") or "{}"))
            delta.pop("verdicts", None)
            reducer.apply_in_place(state, delta)
    except (ValueError, reducer.DeltaInvalid, reducer.PinViolation):
        return False
    return reducer.state_hash(HashRemap(mapping)(state)) == stored_hash


def _review_request(work: LedgerCopy, rec: Mapping[str, Any]) -> None:
    """Point a review fold's manifest at the index of the retirement record it decided."""
    decided = [r for r in work.retirements if r.get("decided_in") == rec.get("number")]
    if len(decided) != 1:
        raise work.bad(rec, "a review fold must decide exactly one exported retirement", "kind")
    manifest = dict(rec.get("manifest") or {})
    manifest["review"] = {**(manifest.get("review") or {}), "request": decided[0]["pk"]}
    rec_any: Any = rec
    rec_any["manifest"] = manifest
