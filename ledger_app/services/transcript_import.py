"""The one transcript import: the journal, and a ledgerkeep export's ledger with it.

:func:`transcript_import` runs the journal import and, for a ledgerkeep export,
:func:`ledger_app.services.reimport.ledger_reimport` per imported journal, in one
transaction with the ``journal.import`` audit event.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audit_app.services import audit_record
from journal_app.formats import ledgerkeep_export
from journal_app.services import journal_import
from journal_app.services.errors import _write_transaction
from journal_app.services.imports import ImportResult
from ledger_app.services.reimport import ReceiptsReimport, ledger_reimport, reimport_mapping
from ledger_app.services.reimport_copy import ReimportResult


@dataclass
class TranscriptImport:
    """What :func:`transcript_import` did: the journal import and each journal's ledger.

    Attributes:
        imported: the journal's :class:`journal_app.services.imports.ImportResult`.
        ledgers: journal pk -> :class:`ReimportResult`, for a ledgerkeep export only.
    """

    imported: ImportResult
    ledgers: dict[int, ReimportResult] = field(default_factory=dict)


def transcript_import(
    *, path: str | Path, receipts: ReceiptsReimport | None = None, **options: Any
) -> TranscriptImport:
    """Import a transcript, and a ledgerkeep export's ledger with it, in one transaction.

    The one import every entry point calls, through
    :func:`recovery_app.session_transfer.transcript_import` (which adds the receipts step):
    the ``import_journal`` command directly, the upload API through :mod:`journal_app.hooks`
    (registered by ``recovery_app.apps``). The
    journal comes from :func:`journal_app.services.journal_import`; for a ledgerkeep export
    :func:`ledger_reimport` then re-creates, per imported journal, its folds, verdicts,
    retirements and decisions, comments, annotations and receipts, re-verified: a
    re-imported session carries its whole ledger or nothing.

    Args:
        path: the transcript file (or OpenCode export folder).
        options: ``fmt``, ``tenant``, ``session``, ``lane``, ``branch``, ``progress``,
            ``on_parsed``, passed to :func:`journal_app.services.journal_import` as given;
            ``actor`` (the user, ``None`` for a command) is kept in the ``journal.import``
            audit event written in the same transaction.
        receipts: the recovery receipts step, passed to :func:`ledger_reimport`
            (:func:`recovery_app.session_transfer.transcript_import` passes it).

    Returns:
        :class:`TranscriptImport`.

    Raises:
        Whatever :func:`journal_app.services.journal_import` raises, and
        :class:`ReimportInvalid` (422) / :class:`ReimportConflict` (409). In every case
        nothing is written: the journal's rows roll back with the ledger's.
    """
    actor = options.pop("actor", None)
    # a lost connection: "nothing was written" inside, "unknown" at the commit itself
    with _write_transaction(f"the import of {Path(str(path)).name}"):
        imported = journal_import(path=path, **options)
        ledgers: dict[int, ReimportResult] = {}
        if imported.parsed.format == ledgerkeep_export.NAME:
            _, records = ledgerkeep_export.export_records(path)
            for j in imported.journals:
                ledgers[j.pk] = ledger_reimport(
                    journal=j,
                    records=records,
                    mapping=reimport_mapping(journal=j, records=records),
                    receipts=receipts,
                )
        session = imported.journal.session
        audit_record(  # in the import's transaction: no event for an import rolled back
            actor=actor,
            tenant=session.tenant,
            action="journal.import",
            object_type="session",
            object_id=f"{session.tenant.slug}/{session.key}",
            object_label=Path(str(path)).name,
            details={
                "session": session.key,
                "format": imported.parsed.format,
                "appended": imported.append.appended,
                "unchanged": imported.append.unchanged,
                "journals": [j.scope_label for j in imported.journals],
            },
        )
    return TranscriptImport(imported=imported, ledgers=ledgers)
