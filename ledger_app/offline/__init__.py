"""The offline writer and the verifier's rules applied mechanically (docs/design.md 5.3). Pure.

The embedded default when no model is configured, in these parts:

* :mod:`.testruns`: test output parsers (counts), test/check commands and their scope;
* :mod:`.heuristics`: plans and todos, user decisions, assistant success claims;
* :mod:`.turns`: the words a turn is read with: cancellations, conclusions, numbered
  lists, instruction parts and their kinds;
* :mod:`.request_parts`: requests and their parts, closed on evidence; the pins' kinds;
* :mod:`.decisions`: approvals as decisions quoting what was accepted, awaited approvals,
  approvals consumed by their action;
* :mod:`.evidence`: :class:`EvidenceIndex`, a fold's entries as the writer and rules read them;
* :mod:`.rules`: :func:`check_item`, the verifier's rubric applied mechanically;
* :mod:`.turn_state`: one user turn as the writer reads it, and the facts its end writes;
* :mod:`.offline_writer`: :class:`OfflineWriter`, the ops of a fold from the above.
"""

from __future__ import annotations

from ledger_app.offline.evidence import EvidenceIndex
from ledger_app.offline.heuristics import (
    assistant_claims,
    is_success_claim,
    is_universal,
    plan_items,
    user_decisions,
)
from ledger_app.offline.offline_writer import OfflineWriter
from ledger_app.offline.rules import RuleVerdict, check_item
from ledger_app.offline.testruns import (
    RunCounts,
    is_check_command,
    is_test_command,
    parse_test_output,
    run_scope,
)

__all__ = [
    "EvidenceIndex",
    "OfflineWriter",
    "RuleVerdict",
    "RunCounts",
    "assistant_claims",
    "check_item",
    "is_check_command",
    "is_success_claim",
    "is_test_command",
    "is_universal",
    "parse_test_output",
    "plan_items",
    "run_scope",
    "user_decisions",
]
