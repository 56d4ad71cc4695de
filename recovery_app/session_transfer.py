"""A whole session out and back in: the ledger's export and re-import with the recovery
receipts (docs/architecture.md, "Layers").

Recovery sits above the ledger (its attempts read the ledger's latest facts, and each receipt
names the folds it ran after and entered), so the ledger cannot read a :class:`Receipt`.
The ledger exports and re-imports what it owns (:func:`ledger_app.export.session_export`,
:func:`ledger_app.services.transcript_import.transcript_import`) and takes the receipts step as an
argument; this module passes it. Every entry point that moves a whole session calls the two
functions here: the export page (:func:`recovery_app.export_views.export`), the ``export`` and
``import_journal`` commands, and the upload API (registered in ``recovery_app.apps``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from journal_app.models import Journal, Session
from ledger_app.errors import ReimportInvalid
from ledger_app.export import ExportSummary
from ledger_app.export import session_export as ledger_session_export
from ledger_app.models import Fold
from ledger_app.services.reimport_copy import records_of
from ledger_app.services.transcript_import import TranscriptImport
from ledger_app.services.transcript_import import transcript_import as ledger_transcript_import
from recovery_app.models import Receipt

#: the receipt's references to ledger folds, exported by fold number
FOLD_FIELDS = ("fold", "entered_fold")


def receipt_records(session: Session, journals: list[Journal]) -> Iterator[dict[str, Any]]:
    """The ``receipt`` records of a session export: every column of each receipt of
    ``journals`` (``session``'s), in pk order, with ``lane`` and ``branch`` for the journal and
    the fold references (:data:`FOLD_FIELDS`) as fold numbers, like the fold records."""
    numbers = dict(Fold.objects.filter(journal__in=journals).values_list("pk", "number"))
    by_pk = {j.pk: j for j in journals}
    for row in Receipt.objects.filter(journal__in=journals).order_by("pk").values():
        journal = by_pk[row.pop("journal_id")]
        for name in FOLD_FIELDS:  # fold references by number, as in the fold records
            pk = row.pop(f"{name}_id")
            row[name] = numbers.get(pk) if pk else None
        yield {"type": "receipt", "lane": journal.lane, "branch": journal.branch, **row}


def receipts_reimport(
    *,
    journal: Journal,
    records: Sequence[Mapping[str, Any]],
    folds: Mapping[int, Fold],
    remap: Callable[[Any, str], Any],
    hashes: Mapping[str, str],
) -> int:
    """Re-create the export's receipts of ``journal``'s lane for the re-imported journal.

    Args:
        records: the export's records (:func:`receipt_records` wrote the receipts).
        folds: the re-created folds by number (fold references are numbers in the export).
        remap: maps the old entry hashes inside a JSON value to the new ones
            (``remap(value, column)``; texts are kept verbatim).
        hashes: old entry hash -> new entry hash (hex).

    Returns:
        The number of receipts created. The snapshot is re-scoped to ``journal``.

    Raises:
        ReimportInvalid: a receipt names a fold the export does not hold, or a snapshot head
            that is not an entry of the export.
    """
    columns = {f.name for f in Receipt._meta.concrete_fields}
    scope = journal.scope_fields()
    count = 0
    for rec in records_of(records, "receipt", journal):
        values: dict[str, Any] = {}
        for name, value in rec.items():
            if name in FOLD_FIELDS:
                if value is not None and value not in folds:
                    raise ReimportInvalid(
                        f"a receipt names fold {value!r}, not in the export", field=name
                    )
                values[name] = folds.get(value) if value is not None else None
            elif name in columns and name not in ("id", "journal", "created_at"):
                values[name] = remap(value, name)
        snapshot = values.get("snapshot")
        if isinstance(snapshot, dict) and snapshot:
            head = snapshot.get("head_hash")
            if head and head not in hashes.values():
                raise ReimportInvalid(
                    "a receipt's snapshot names a head that is not an entry of the export",
                    field="snapshot",
                )
            snapshot.update({k: v for k, v in scope.items() if k in snapshot})
            if "scope" in snapshot:
                snapshot["scope"] = journal.scope_label
        Receipt.objects.create(journal=journal, **values)
        count += 1
    return count


def session_export(**options: Any) -> ExportSummary:
    """:func:`ledger_app.export.session_export` with the receipts (:func:`receipt_records`)
    after the ledger's and the audit app's records; same arguments, result and errors."""
    return ledger_session_export(**options, receipts=receipt_records)


def transcript_import(**options: Any) -> TranscriptImport:
    """:func:`ledger_app.services.transcript_import.transcript_import` re-creating an export's receipts
    too (:func:`receipts_reimport`); same arguments, result and errors."""
    return ledger_transcript_import(**options, receipts=receipts_reimport)
