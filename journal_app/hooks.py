"""Extension point of the transcript import: the ledger's re-import (pure registry, no Django).

Imports flow ``journal_app <- audit_app <- ledger_app <- recovery_app``, so the journal's API
cannot call the ledger. Recovery registers here, at start-up (``recovery_app.apps``), the one
import service every entry point calls (:func:`recovery_app.session_transfer.transcript_import`:
the journal import, then, for a ledgerkeep export, its folds, verdicts, retirements, comments
and receipts, in one transaction). The upload API (``journal_app.api``) and the
``import_journal`` command both go through it. ``recovery_app`` is always installed
(``config/settings.py``), so the service is always there once Django has started.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: ``service(*, path, fmt, tenant, session, lane, branch) -> result`` where ``result`` has
#: ``imported`` (the journal's ``ImportResult``) and ``ledgers`` (journal pk -> what was
#: re-created, with ``to_dict()``).
TranscriptImport = Callable[..., Any]
_service: TranscriptImport | None = None


def transcript_import_register(service: TranscriptImport | None) -> None:
    """Set the import service (``None`` clears it)."""
    global _service
    _service = service


def transcript_import_service() -> TranscriptImport:
    """The registered import service.

    Raises:
        LookupError: nothing registered (Django not set up, or ``recovery_app`` missing
            from ``INSTALLED_APPS``).
    """
    if _service is None:
        raise LookupError("no transcript import service: recovery_app registers it at start-up")
    return _service
