"""Every state change of the ledger (docs/design.md section 5), one module per change.

* :mod:`.writer_registry`: which writer folds (``writer_resolve``);
* :mod:`.fold`: ``ledger_fold``, the one fold service every entry point calls;
* :mod:`.compact`: ``ledger_compact``, folds in slices then consolidates;
* :mod:`.consolidate`: ``ledger_consolidate``, checkpoint folds;
* :mod:`.review`: ``retirement_review``, the P0 retirement review (UI and API);
* :mod:`.verify`: ``ledger_verify``, replay against what is stored.

Each locks the journal row, so there is one ledger change at a time per branch (docs/design.md
section 9). The pieces they share, each module saying whether it writes:

* :mod:`.fold_stages`: the stages ``ledger_fold`` runs (plan, compose, judge, reduce,
  store); :mod:`.fold_attempts`: a fold's attempt rows (writes);
* :mod:`.state`: reads of the stored ledger (latest fold, current facts, writer state);
* :mod:`.store`: a delta applied to the facts it reads, the running figures, and the writes
  of every fold (``fold_store``, ``facts_store``); ``FoldResult``;
* :mod:`.entries`: the journal's entries as a fold reads them (views, range hash, evidence);
* :mod:`.pins_check`: the pins re-hashed against their entries (reads);
* :mod:`ledger_app.errors`: the ledger's domain errors.

The context build and the ledger's checks, imported from their modules (not re-exported here):

* :mod:`.context`: ``context_build`` (may fold), ``context_preview``, ``request_validate``,
  ``fold_invariants`` (stores the panel); :mod:`.context_reads` (read-only) and
  :mod:`.context_records` (errors, default budgets, ``ContextResult``);
* :mod:`.integrity`: ``ledger_integrity`` (read-only, with :mod:`.integrity_rows` and
  :mod:`.integrity_folds`); :mod:`.full_check`: ``ledger_check`` (stores the full check)
  and ``ledger_warnings`` (reads it for the pages, queues a new one).
"""

from __future__ import annotations

from ledger_app.errors import FoldFailed, FoldRefused, LedgerError, ReviewError, ReviewForbidden
from ledger_app.model_writer import FALLBACK_NOTE
from ledger_app.services.compact import CompactReport, CompactRow, ledger_compact
from ledger_app.services.consolidate import ledger_consolidate
from ledger_app.services.entries import entry_view, fold_context, range_hash
from ledger_app.services.fold import ledger_fold
from ledger_app.services.pins_check import instructions_check
from ledger_app.services.refold import RefoldRefused, ledger_refold_apply, ledger_refold_fallbacks
from ledger_app.services.review import (
    ReviewCommentInvalid,
    ReviewDecisionInvalid,
    can_review,
    retirement_review,
)
from ledger_app.services.state import latest_fold, ledger_state
from ledger_app.services.store import FoldResult
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
