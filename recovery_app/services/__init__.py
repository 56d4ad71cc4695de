"""Recovery: attempts at a fold, and the agent's search, read and analyst tools (docs/design.md 7).

Every entry point calls one function here:

* :func:`recovery_run` (:mod:`.attempt`): one bounded attempt (trigger scan, frozen
  snapshot, searches, hash-verified reads, claims) that always leaves a
  :class:`~recovery_app.models.Receipt` and never raises for a failed attempt (outcome
  ``failed``; compaction carries on);
* before every fold, :mod:`recovery_app.fold` (the hook the one fold service calls) runs
  :func:`recovery_run` and hands the fold the recovered ops, so recovered facts are judged
  like any other before they enter the ledger, each with a pointer to its entry;
* :func:`recovery_search`, :func:`recovery_read`, :func:`recovery_analyst` (:mod:`.tools`):
  the agent's tools. Their scope is always the caller's journal (from its credentials and
  session), never a parameter.
"""

from __future__ import annotations

from recovery_app.budget import BudgetExhausted
from recovery_app.cursors import CursorRefused
from recovery_app.errors import EntryNotFound, RecoveryError
from recovery_app.lexical import QueryInvalid
from recovery_app.services.attempt import recovery_run
from recovery_app.services.from_settings import analyst_model_from_settings, recovery_budget
from recovery_app.services.reads import Read, read_verify, snapshot_freeze
from recovery_app.services.tools import (
    ReadResult,
    SearchPage,
    recovery_analyst,
    recovery_read,
    recovery_search,
)
from recovery_app.snapshot import Denied

__all__ = [
    "BudgetExhausted",
    "CursorRefused",
    "Denied",
    "EntryNotFound",
    "QueryInvalid",
    "Read",
    "ReadResult",
    "RecoveryError",
    "SearchPage",
    "analyst_model_from_settings",
    "read_verify",
    "recovery_analyst",
    "recovery_budget",
    "recovery_read",
    "recovery_run",
    "recovery_search",
    "snapshot_freeze",
]
