"""The read layer of the ledger: every database read the UI pages and the API share.

docs/design.md sections 5, 8 and 9. The htmx views (:mod:`ledger_app.views`) and the API
(:mod:`ledger_app.api`) call these selectors for their reads and the presenters
(:mod:`ledger_app.selectors.presenters`, no database) to shape what they read, so a page and
its endpoint show the same state, the same filters and order, the same support links.

Tenant filtering happens before a selector is called: the UI resolves the journal with
:func:`journal_app.selectors.get_journal_for_user`, the API with ``request.auth.journal``;
objects reached by id are filtered here by the user's tenants or the key's tenant, and
answer ``Http404`` outside them.

This module is the public face: callers write ``selectors.<read>``; the reads live in
modules named for what they read, and are re-exported here:

* :mod:`.ledger_facts`: the state after a fold, a filtered page of its facts, one fact and its
  versions and comments, what the context builder reads, the entries support cites;
* :mod:`.folds`: the fold history, one fold, the deltas naming a fact, the attempts at a fold;
* :mod:`.diff`: the diff of two folds, from the stored fact versions;
* :mod:`.retirements`: the P0 retirement requests, who may decide them, their audit trail;
* :mod:`.task_runs`: the task runs.

The pages' own reads are imported by module path and not re-exported:
:mod:`.sessions` (the session pages), :mod:`.dashboard`, :mod:`.ui` (the folds page's filter
and the diff's text).
"""

from __future__ import annotations

from ledger_app.selectors.diff import FoldDiff, fold_diff
from ledger_app.selectors.folds import (
    MANIFEST_HASHES_SHOWN,
    fact_deltas,
    failed_attempts,
    fold_at,
    fold_attempts,
    fold_choices,
    fold_get,
    fold_neighbours,
    fold_numbers,
    fold_reviews,
    fold_rows,
    manifest_for_display,
)
from ledger_app.selectors.ledger_facts import (
    FactsQuery,
    context_ledger,
    entries_known,
    fact_at,
    fact_comments,
    fact_history,
    facts_at,
    state_at,
)
from ledger_app.selectors.retirements import (
    retirement_deciders,
    retirement_events,
    retirement_for_tenant,
    retirement_for_user,
    retirements_for_tenant,
    retirements_for_user,
)
from ledger_app.selectors.task_runs import task_executions, task_run_for_tenant, task_runs

__all__ = [
    "MANIFEST_HASHES_SHOWN",
    "FactsQuery",
    "FoldDiff",
    "context_ledger",
    "entries_known",
    "fact_at",
    "fact_comments",
    "fact_deltas",
    "fact_history",
    "facts_at",
    "failed_attempts",
    "fold_at",
    "fold_attempts",
    "fold_choices",
    "fold_diff",
    "fold_get",
    "fold_neighbours",
    "fold_numbers",
    "fold_reviews",
    "fold_rows",
    "manifest_for_display",
    "retirement_deciders",
    "retirement_events",
    "retirement_for_tenant",
    "retirement_for_user",
    "retirements_for_tenant",
    "retirements_for_user",
    "state_at",
    "task_executions",
    "task_run_for_tenant",
    "task_runs",
]
