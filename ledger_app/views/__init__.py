"""Operator UI pages of the ledger (docs/design.md section 8), one module per area.

* :mod:`.facts`: the ledger state after any fold (filters, pages) and one fact;
* :mod:`.folds`: fold history, one fold, the diff, the verifier page, the invariants panel;
* :mod:`.context`: the three context views;
* :mod:`.review`: the P0 retirement review queue and decisions;
* :mod:`.sessions`: the sessions list and a session's overview (in the ``journal`` namespace).

Thin function views: the scope is resolved by :mod:`journal_app.selectors` (tenant filter,
``Http404``); every read goes through :mod:`ledger_app.selectors` and is shaped by its
presenters, the same ones :mod:`ledger_app.api` uses; a decision goes through
:func:`ledger_app.services.retirement_review`, as over the API.
"""

from __future__ import annotations

from ledger_app.selectors.presenters import fact_dom_id
from ledger_app.views.context import context_views
from ledger_app.views.dashboard import dashboard
from ledger_app.views.facts import fact_detail, facts
from ledger_app.views.folds import (
    fold_compare,
    fold_detail,
    fold_diff,
    fold_invariants_panel,
    fold_list,
    fold_now,
    fold_verdicts,
)
from ledger_app.views.review import review_detail, review_list
from ledger_app.views.sessions import session_list, session_overview

__all__ = [
    "context_views",
    "dashboard",
    "fact_detail",
    "fact_dom_id",
    "facts",
    "fold_compare",
    "fold_detail",
    "fold_diff",
    "fold_invariants_panel",
    "fold_list",
    "fold_now",
    "fold_verdicts",
    "review_detail",
    "review_list",
    "session_list",
    "session_overview",
]
