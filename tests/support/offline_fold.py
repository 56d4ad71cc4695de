"""A ledger without a database, for pure tests and benchmarks (moved from ``ledger_app.context``).

Test-only code: the product folds through
:func:`ledger_app.services.ledger_fold`; this gives the same pins and mechanical tool outcomes
judged by the reducer, in one delta, with no database.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from journal_app.rounds import complete_prefix_end, group_rounds
from ledger_app import reducer
from ledger_app.entry_view import EntryView
from ledger_app.mechanical_writer import MechanicalWriter
from ledger_app.pin_facts import is_pin_source, pin_fact, required_pins


def offline_fold(
    entries: Sequence[EntryView], *, upto: int | None = None
) -> tuple[dict[str, Any], int]:
    """The ledger one mechanical fold over the complete rounds up to ``upto`` would give.

    For pure callers with no database (benchmarks, tests, previews): the same pins and
    mechanical tool outcomes that :func:`ledger_app.services.ledger_fold` writes, judged by
    the reducer, in one delta. Returns ``(state, covered_upto)``; ``(empty, 0)`` when no
    complete round ends at or before ``upto``.
    """
    limit = upto if upto is not None else (entries[-1].seq if entries else 0)
    head = entries[-1].seq if entries else 0
    rounds = [r for r in group_rounds(entries) if r.last_seq <= limit]
    if rounds:
        rounds[-1].at_tail = rounds[-1].last_seq == head
    end = complete_prefix_end(rounds)
    if end is None:
        return copy.deepcopy(reducer.EMPTY_STATE), 0
    covered = [e for e in entries if e.seq <= end]
    ops = [{"op": "add", "fact": pin_fact(v)} for v in covered if is_pin_source(v)]
    ops += MechanicalWriter().propose(covered, reducer.EMPTY_STATE)
    evidence = {
        e.entry_hash: {
            "seq": e.seq,
            "kind": e.kind,
            "role": e.role,
            "is_error": e.is_error,
            "derived": e.derived,
            "fold": 1,
        }
        for e in covered
    }
    delta = {
        "fold": 1,
        "revision": head,
        "evidence": evidence,
        "required_pins": required_pins(covered),
        "lifecycle_rules": reducer.LIFECYCLE_RULES,
        "ops": ops,
    }
    return reducer.apply_delta(copy.deepcopy(reducer.EMPTY_STATE), delta).state, end
