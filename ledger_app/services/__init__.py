"""Every state change of the ledger (DESIGN.md section 5), one module per change.

* :mod:`.writers`: the writer registry (which writer folds);
* :mod:`.fold`: ``ledger_fold``, the one fold service every entry point calls;
* :mod:`.compact`: ``ledger_compact``, folds in slices then consolidates;
* :mod:`.consolidate`: ``ledger_consolidate``, checkpoint folds;
* :mod:`.review`: ``retirement_review``, the P0 retirement review (UI and API);
* :mod:`.verify`: ``ledger_verify``, replay against what is stored.

Each locks the journal row, so there is one ledger change at a time per branch (DESIGN.md
section 9).
"""

from __future__ import annotations

from ledger_app.model_writer import FALLBACK_NOTE
from ledger_app.services.common import (
    FoldFailed,
    FoldRefused,
    FoldResult,
    LedgerError,
    ReviewError,
    ReviewForbidden,
    entry_view,
    instructions_check,
    latest_fold,
    ledger_state,
    range_hash,
)
from ledger_app.services.compact import CompactReport, CompactRow, ledger_compact
from ledger_app.services.consolidate import ledger_consolidate
from ledger_app.services.fold import fold_context, ledger_fold
from ledger_app.services.refold import RefoldRefused, ledger_refold_apply, ledger_refold_fallbacks
from ledger_app.services.review import (
    ReviewCommentInvalid,
    ReviewDecisionInvalid,
    can_review,
    retirement_review,
)
from ledger_app.services.verify import (
    LedgerVerifyReport,
    first_difference,
    fold_deltas,
    ledger_verify,
)
from ledger_app.services.writer_registry import (
    WRITER_NAMES,
    WRITERS,
    ModelNotConfigured,
    WriterUnknown,
    default_writer,
    model_config,
    writer_resolve,
)

__all__ = [
    "FALLBACK_NOTE",
    "WRITERS",
    "WRITER_NAMES",
    "ModelNotConfigured",
    "WriterUnknown",
    "CompactReport",
    "CompactRow",
    "FoldFailed",
    "FoldRefused",
    "FoldResult",
    "LedgerError",
    "LedgerVerifyReport",
    "ReviewCommentInvalid",
    "ReviewDecisionInvalid",
    "ReviewError",
    "ReviewForbidden",
    "can_review",
    "default_writer",
    "entry_view",
    "first_difference",
    "fold_context",
    "fold_deltas",
    "instructions_check",
    "latest_fold",
    "ledger_compact",
    "ledger_consolidate",
    "ledger_fold",
    "ledger_state",
    "ledger_verify",
    "model_config",
    "range_hash",
    "RefoldRefused",
    "ledger_refold_apply",
    "ledger_refold_fallbacks",
    "retirement_review",
    "writer_resolve",
]
