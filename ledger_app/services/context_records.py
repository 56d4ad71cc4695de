"""The records of a context request: its errors, its default budgets and its result.

:class:`ContextResult` holds the three views of one build (seed 001: model, frontend, debug)
and makes their JSON (:meth:`ContextResult.to_dict`, bounded by default);
:func:`context_budgets` reads the default budgets from settings. Writes nothing. The build
itself is :func:`ledger_app.services.context.context_build`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from ledger_app.context import (
    TRACE_CAP,
    bounded_trace,
    capped,
)
from ledger_app.errors import LedgerError

#: Largest budget a context request accepts, tokens (no model has a window near it): the API's
#: bound and the context page's.
MAX_TOKENS = 100_000_000
#: The views a context request can ask for (``POST /sessions/{s}/context`` ``views``).
VIEWS = ("model", "frontend", "debug")


class ContextError(LedgerError):
    """A context request that cannot be served (bad revision, budgets, format); HTTP 422.

    ``field`` names the request field at fault (``"revision"``), when one is.
    """

    status = 422
    code = "invalid_context_request"

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message, field=field or None)


class ValidateRequestInvalid(ContextError):
    """A ``POST /validate`` body of the wrong shape: a missing, unknown or mistyped field
    (HTTP 422, ``validation_error``, ``field`` the path of the first one). A body that is not
    UTF-8 JSON is :class:`journal_app.errors.MalformedBody` (HTTP 400)."""

    code = "validation_error"


@dataclass(frozen=True)
class ContextBudgets:
    """The default budgets of a context build, tokens (docs/design.md 5.4 and 6).

    Attributes:
        working_budget: what the request should fit in: ``LEDGER_FOLD_THRESHOLD_TOKENS``,
            at most the hard limit.
        hard_limit: the model's context window the request must fit in:
            ``LEDGER_WINDOW_TOKENS``.
        window: ``LEDGER_WINDOW_TOKENS``, the window the ledger's budgets are set against.
        output_reserve: tokens kept for the reply (0 by default).
    """

    working_budget: int
    hard_limit: int
    window: int
    output_reserve: int = 0

    def as_kwargs(self) -> dict[str, int]:
        """``{"working_budget", "hard_limit", "output_reserve"}`` for :func:`context_build`."""
        return {
            "working_budget": self.working_budget,
            "hard_limit": self.hard_limit,
            "output_reserve": self.output_reserve,
        }


def context_budgets() -> ContextBudgets:
    """The default budgets every reader of the context uses (the UI's context page, the fold
    invariants panel, :func:`context_preview`), from settings, never literals in a view.

    Returns:
        :class:`ContextBudgets`: ``LEDGER_WINDOW_TOKENS`` (default 270,000) as window and hard
        limit, ``LEDGER_FOLD_THRESHOLD_TOKENS`` (default 32,000) as working budget.
    """
    window = settings.LEDGER_WINDOW_TOKENS
    return ContextBudgets(
        working_budget=min(settings.LEDGER_FOLD_THRESHOLD_TOKENS, window),
        hard_limit=window,
        window=window,
    )


@dataclass
class ContextResult:
    """The three views of one state, separate objects (seed 001), and what happened.

    Attributes:
        status: ``"ok"`` or ``"failed"`` (explicit failure: ``model_view`` is ``None``).
        revision: the journal revision the views are as of.
        model_view: the request to send (OpenAI or Anthropic shape), or ``None``.
        frontend_view: the user-safe history (``None`` when it was not asked for).
        debug_trace: the final request and each compaction decision (reason, token effect).
        failure: the failure state (reason, problems, figures, checkpoint) or ``None``.
        validation: ``{"model": report, "frontend": report}`` as dicts (``"frontend"`` only
            when the frontend view was built).
    """

    status: str
    revision: int
    model_view: dict[str, Any] | None
    frontend_view: dict[str, Any] | None
    debug_trace: dict[str, Any]
    failure: dict[str, Any] | None
    validation: dict[str, Any]

    def to_dict(
        self,
        views: tuple[str, ...] = VIEWS,
        cap: int | None = TRACE_CAP,
        frontend_window: tuple[int | None, int] | None = None,
    ) -> dict[str, Any]:
        """JSON-ready; each view is a deep copy, included only when named in ``views``.

        ``frontend_window`` ``(offset, limit)``: the frontend view's ``items`` cut to
        ``limit`` items from ``offset`` (``None``: the last ``limit``, what a chat shows
        first), with ``items_total`` and ``items_offset`` added, so the view's size does not
        grow with the session; ``None``: every item (the UI pages them itself).

        With ``cap`` (the API's default, :data:`ledger_app.context.TRACE_CAP`) the debug trace
        is bounded (:func:`ledger_app.context.bounded_trace`: summaries, counts, lists cut
        with a count of what was left out) and so are the problem lists of the failure and
        the validation reports (``problems_left_out`` says how many were cut): the response's
        size does not grow with the session beyond the views asked for.
        ``cap=None``: everything.
        """
        trace = self.debug_trace
        failure = self.failure
        validation = self.validation
        if cap is not None:
            trace = bounded_trace(trace, cap)
            failure = _cap_problems(failure, cap)
            validation = {k: _cap_problems(v, cap) for k, v in validation.items()}
        return {
            "status": self.status,
            "revision": self.revision,
            "model_view": copy.deepcopy(self.model_view) if "model" in views else None,
            "frontend_view": _windowed(self.frontend_view, frontend_window)
            if "frontend" in views
            else None,
            "debug_trace": copy.deepcopy(trace) if "debug" in views else None,
            "failure": copy.deepcopy(failure),
            "validation": copy.deepcopy(validation),
        }


def _windowed(
    view: dict[str, Any] | None, window: tuple[int | None, int] | None
) -> dict[str, Any] | None:
    """A deep copy of the frontend ``view`` with its items cut to ``window`` (see
    :meth:`ContextResult.to_dict`)."""
    if view is None or window is None:
        return copy.deepcopy(view)
    offset, limit = window
    items = view.get("items") or []
    total = len(items)
    start = max(0, total - limit) if offset is None else min(offset, total)
    out = {k: v for k, v in view.items() if k != "items"}
    out = copy.deepcopy(out)
    out["items"] = copy.deepcopy(items[start : start + limit])
    out["items_total"] = total
    out["items_offset"] = start
    return out


def _cap_problems(report: dict[str, Any] | None, cap: int) -> dict[str, Any] | None:
    """``report`` (a validation report or a failure) with at most ``cap`` problems and
    ``problems_left_out`` (shallow copy; ``None`` stays ``None``)."""
    if not isinstance(report, dict) or not isinstance(report.get("problems"), list):
        return report
    shown, left = capped(report["problems"], cap)
    return {**report, "problems": shown, "problems_left_out": left}
