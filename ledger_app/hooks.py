"""Extension point of every fold: recovery before it (pure registry, no Django).

Imports flow ``journal_app <- audit_app <- ledger_app <- recovery_app``, so the ledger cannot
call recovery. Recovery registers here, at start-up, the function that prepares a fold (trigger
scan over the latest 24 entries, frozen snapshot, verified reads: docs/design.md section 7, "Each
fold scans the most recent 24 entries"). :func:`ledger_app.services.ledger_fold`, the one fold
service, calls it before every fold it runs, whoever asked for the fold: import, append,
task, API, ``compact``, the context builder, the UI. ``recovery_app`` is always installed
(``config/settings.py``) and registers in its ``AppConfig.ready``, so every fold runs it; only
a test that clears the hook sees a fold without recovery.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FoldRecovery:
    """What recovery hands to one fold.

    Attributes:
        ops: recovered ``add`` ops waiting to enter the ledger (this attempt's and earlier
            receipts' that no fold took yet); the reducer judges them like any other op.
        receipt: the attempt's receipt (a ``recovery_app.models.Receipt``), or ``None`` when
            not even a receipt could be written.
        note: names the receipts the ops come from (shown in the manifest).
        finish: called once the fold is stored, with the fold and the ids of the recovered
            facts proposed in it; marks the receipts as entered.
    """

    ops: list[dict[str, Any]] = field(default_factory=list)
    receipt: Any = None
    note: str = ""
    finish: Callable[[Any, Sequence[str]], None] | None = None


FoldRecoveryHook = Callable[..., FoldRecovery]
_hook: FoldRecoveryHook | None = None


def fold_recovery_register(hook: FoldRecoveryHook | None) -> None:
    """Set the hook: ``hook(journal=...) -> FoldRecovery`` (``None`` clears it)."""
    global _hook
    _hook = hook


def fold_recovery() -> FoldRecoveryHook | None:
    """The registered hook, or ``None``."""
    return _hook
