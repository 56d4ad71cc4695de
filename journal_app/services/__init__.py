"""Every state change of the journal (docs/design.md section 4).

Services are keyword-only and never return HTTP responses. Each write runs in one
transaction: an import, an append batch either lands whole or leaves nothing.
"""

from journal_app.entry_validation import EntryInvalid
from journal_app.formats import FormatError
from journal_app.services.append import (
    AppendResult,
    entry_identifiers_row,
    figures_check,
    journal_append,
)
from journal_app.services.errors import (
    ArtifactStoreFull,
    ArtifactWriteError,
    CommittedConnectionLost,
    CommitUnconfirmed,
    ConflictError,
    DatabaseUnavailable,
    GapError,
    JournalError,
)
from journal_app.services.imports import ImportResult, default_session_key, journal_import
from journal_app.services.scope import (
    artifact_check,
    artifact_read,
    artifact_store,
    journal_ensure,
    journals_for_scope,
    session_ensure,
    tenant_ensure,
)
from journal_app.services.verify import VerifyReport, entry_check, journal_verify

__all__ = [
    "ArtifactStoreFull",
    "ArtifactWriteError",
    "CommitUnconfirmed",
    "CommittedConnectionLost",
    "DatabaseUnavailable",
    "artifact_check",
    "artifact_read",
    "default_session_key",
    "entry_identifiers_row",
    "journals_for_scope",
    "AppendResult",
    "ConflictError",
    "EntryInvalid",
    "FormatError",
    "GapError",
    "ImportResult",
    "JournalError",
    "VerifyReport",
    "artifact_store",
    "entry_check",
    "figures_check",
    "journal_append",
    "journal_ensure",
    "journal_import",
    "journal_verify",
    "session_ensure",
    "tenant_ensure",
]
