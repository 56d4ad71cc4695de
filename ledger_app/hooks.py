"""Extension point of scheduled folds (pure registry, no Django).

Imports flow ``journal_app <- ledger_app <- recovery_app``, so the ledger cannot call
recovery. Recovery registers here, at start-up, the function that runs a scheduled fold
(trigger scan, frozen snapshot, verified reads, then the fold: DESIGN.md section 7, "Each
fold scans the most recent 24 entries"). With nothing registered the task folds directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

FoldRunner = Callable[..., Any]
_runner: FoldRunner | None = None


def fold_runner_register(runner: FoldRunner | None) -> None:
    """Set the runner: ``runner(journal=..., upto=...) -> FoldResult`` (``None`` clears it)."""
    global _runner
    _runner = runner


def fold_runner() -> FoldRunner | None:
    """The registered runner, or ``None``."""
    return _runner
