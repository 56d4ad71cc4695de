"""Ledger fidelity: inputs and the score of one ledger state and context (docs/design.md 5.2, 5.5, 6). Pure.

An *eval item* is a conversation plus the state a faithful ledger must reach on it. Two
sources, one loader each, both here so the tests, ``manage.py eval_ledger`` and the bench
read them the same way (:mod:`.items`):

* the compaction failure **cases** (``shared/cases/``, copied to ``tests/fixtures/cases``):
  :func:`load_case` and :func:`case_messages` (placeholder bodies expanded to real text of
  their declared size); their expected state is what the case's own text implies (system and
  developer messages verbatim) plus the entries of a case-expectations file;
* **scenarios** (``tests/scenarios/*.json``): :func:`load_scenario`, ``{name, description,
  format, budget_tokens, tail_tokens, expand, messages, expected}``; a message item
  ``{"$repeat": N, "messages": [...]}`` stands for its messages N times with ``{i}``
  replaced by 1..N, and an expected text item ``{"$repeat": N, "text": "... {i} ..."}`` the
  same way; ``expand`` maps a placeholder to a token count (:func:`expand`).

Expected state (every key optional): ``governing`` (texts shown verbatim in every context),
``requests_done`` (user messages whose work is done: never shown as current),
``requests_pending`` (shown, still open), ``decisions`` (``{"text", "consumed"}``: a
``decision`` fact quoting the text exactly), ``items_done`` / ``items_pending`` (phrases of
obligations closed / open), ``blockers_open`` / ``blockers_closed`` (phrases of failures
still active / ended), ``end_state`` (phrases the context must carry), ``not_verified``
(claims no fact may hold as verified), ``max_mandatory_tokens``.

:func:`score` (:mod:`.scoring`) checks one ledger state and one model view against it, rule by rule
(:data:`RULES`); the three hard rules (:data:`HARD_RULES`) are the ones ``eval_ledger``
exits non-zero on.
"""

from __future__ import annotations

from ledger_app.evaluation.items import (
    DEFAULT_BUDGET,
    PLACEHOLDER,
    EvalItem,
    ScenarioInvalid,
    case_item,
    case_messages,
    expand,
    load_case,
    load_items,
    load_scenario,
)
from ledger_app.evaluation.scoring import (
    BUILDER_LABEL,
    DONE_LINE,
    HARD_RULES,
    RULES,
    ContextView,
    ItemScore,
    RuleResult,
    message_text,
    outcomes_text,
    score,
    table,
    totals,
)

__all__ = [
    "BUILDER_LABEL",
    "DEFAULT_BUDGET",
    "DONE_LINE",
    "HARD_RULES",
    "PLACEHOLDER",
    "RULES",
    "ContextView",
    "EvalItem",
    "ItemScore",
    "RuleResult",
    "ScenarioInvalid",
    "case_item",
    "case_messages",
    "expand",
    "load_case",
    "load_items",
    "load_scenario",
    "message_text",
    "outcomes_text",
    "score",
    "table",
    "totals",
]
