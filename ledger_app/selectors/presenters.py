"""Presenters of the ledger: plain shaping of what the selectors read, for the UI and the API.

No database access: every function takes rows and parsed data (``known`` maps hex entry
hashes to their :class:`~journal_app.models.Entry` rows, read once by
:func:`ledger_app.selectors.entries_known`) and returns dataclasses or dicts. The htmx views
render them; the API returns the ``*_out`` dicts, which match the schemas of
:mod:`ledger_app.schemas`. One function per shape, so a page and its endpoint cannot disagree.

This module is the presenters' public face: callers write ``presenters.<shape>``; the shapes
live in modules named for what they shape, and are re-exported here:

* :mod:`.fact_presenters`: facts (the filtered selection, rows, ``FactOut``, events, the
  filtered copy every surface shows);
* :mod:`.fold_presenters`: folds (summary, delta ops and verdicts, loss report, invariants)
  and the retirement requests they ask for;
* :mod:`.links`: the support links every evidence cell uses;
* :mod:`.verifier`: the verifier page's attempts, proposals and verdicts.
"""

from __future__ import annotations

from ledger_app.selectors.fact_presenters import (
    FACT_FIELDS,
    FACT_FILTERS,
    FactEvent,
    FactFilterInvalid,
    FactRow,
    FactSelection,
    delta_shown,
    fact_events,
    fact_order,
    fact_out,
    fact_rows,
    fact_shown,
    facts_select,
    op_shown,
)
from ledger_app.selectors.fold_presenters import (
    OpRow,
    OpVerdicts,
    delta_hashes,
    delta_ops,
    fold_out,
    invariants_out,
    loss_out,
    op_rows,
    op_verdicts,
    ops_rejected,
    proposals_rejected,
    reducer_rejected,
    report_rows,
    reports,
    retirement_out,
)
from ledger_app.selectors.links import (
    SupportLink,
    evidence_fact,
    fact_dom_id,
    support_hashes,
    support_links,
)
from ledger_app.selectors.verifier import (
    JUDGES,
    RAW_SHOWN,
    ROUNDS,
    AttemptRow,
    ItemRow,
    JudgeRow,
    ProposalRow,
    attempt_hashes,
    attempt_out,
    attempt_rows,
    items_window,
)

__all__ = [
    "FACT_FIELDS",
    "FACT_FILTERS",
    "JUDGES",
    "RAW_SHOWN",
    "ROUNDS",
    "AttemptRow",
    "FactEvent",
    "FactFilterInvalid",
    "FactRow",
    "FactSelection",
    "ItemRow",
    "JudgeRow",
    "OpRow",
    "OpVerdicts",
    "ProposalRow",
    "SupportLink",
    "attempt_hashes",
    "attempt_out",
    "attempt_rows",
    "delta_hashes",
    "delta_ops",
    "delta_shown",
    "evidence_fact",
    "fact_dom_id",
    "fact_events",
    "fact_order",
    "fact_out",
    "fact_rows",
    "fact_shown",
    "facts_select",
    "fold_out",
    "invariants_out",
    "items_window",
    "loss_out",
    "op_rows",
    "op_shown",
    "op_verdicts",
    "ops_rejected",
    "proposals_rejected",
    "reducer_rejected",
    "report_rows",
    "reports",
    "retirement_out",
    "support_hashes",
    "support_links",
]
