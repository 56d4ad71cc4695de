"""Rules that know environments and scopes (ledger_app/offline/rules.py), table-driven. Pure.

The seed's over-claims: "The production service was deployed and browser acceptance passed"
citing ``kubectl apply`` plus a *staging* health check, "live in production" citing staging,
and "8 tests in tests/test_refunds.py passed" stretched to another file.
"""

from __future__ import annotations

from typing import Any

import pytest

from ledger_app.entry_view import EntryView
from ledger_app.offline import EvidenceIndex, check_item
from ledger_app.offline.rules import environment_problem, scope_problem


def _view(seq: int, kind: str, text: str = "", **kw: Any) -> EntryView:
    content = kw.pop("content", {"text": text})
    return EntryView(
        seq=seq,
        entry_hash=f"{seq:064x}",
        kind=kind,
        role=kw.pop("role", "assistant"),
        text=text,
        content=content,
        **kw,
    )


def _run(seq: int, command: str, output: str, exit_code: int = 0) -> list[EntryView]:
    call_id = f"c{seq}"
    call = _view(
        seq,
        "tool_call",
        command,
        content={"name": "bash", "arguments": {"command": command}},
        tool_call_id=call_id,
        tool_name="bash",
    )
    result = _view(
        seq + 1,
        "tool_result",
        output,
        content={"output": output, "is_error": exit_code != 0, "exit_code": exit_code},
        tool_call_id=call_id,
        tool_name="bash",
        role="tool",
        is_error=exit_code != 0,
    )
    return [call, result]


def _claim(text: str, *support: EntryView) -> dict[str, Any]:
    return {
        "op": "add",
        "fact": {
            "id": "f1",
            "category": "verified_state",
            "priority": "P1",
            "confidence": "verified",
            "text": text,
            "support": [{"entry": v.entry_hash} for v in support],
        },
    }


KUBECTL = _run(1, "kubectl apply -f k8s/billing.yaml", "deployment.apps/billing configured")
STAGING_HEALTH = _run(3, "curl -fsS https://staging.billing.example/health", "staging: ok")
PROD_DEPLOY = _run(5, "./deploy.sh production", "billing deployed to production: 3/3 healthy")
RELEASE = _run(7, "gh release create v1.4.0", "https://github.com/acme/billing/releases/v1.4.0")
REFUNDS = _run(9, "pytest tests/test_refunds.py", "8 passed in 0.12s")
SUITE = _run(11, "pytest", "120 passed in 9.1s")
ENTRIES = KUBECTL + STAGING_HEALTH + PROD_DEPLOY + RELEASE + REFUNDS + SUITE


@pytest.mark.parametrize(
    ("claim", "cited", "accepted", "reason"),
    [
        (
            "The production service was deployed and browser acceptance passed",
            [KUBECTL[1], STAGING_HEALTH[1]],
            False,
            "they name staging",
        ),
        ("The billing service is live in production", [STAGING_HEALTH[1]], False, "staging"),
        ("Billing was deployed to production", [KUBECTL[1]], False, "name no environment"),
        ("Billing was deployed to production", [PROD_DEPLOY[1]], True, ""),
        ("Billing v1.4.0 was released", [RELEASE[1]], True, ""),
        ("Billing was deployed to staging and is healthy", [STAGING_HEALTH[1]], True, ""),
        (
            "8 tests in tests/test_refunds.py passed",
            [REFUNDS[1]],
            True,
            "",
        ),
        (
            "The tests in tests/test_orders.py passed",
            [REFUNDS[1]],
            False,
            "not tests/test_orders.py",
        ),
        ("The tests in tests/test_orders.py passed", [SUITE[1]], True, ""),
    ],
)
def test_environment_and_scope_rules(claim, cited, accepted, reason):
    verdict = check_item(_claim(claim, *cited), EvidenceIndex(ENTRIES), {})
    assert verdict.accepted is accepted, verdict.entailment_reason
    assert reason in verdict.entailment_reason


@pytest.mark.parametrize(
    ("claim", "results", "problem"),
    [
        ("deployed to production", ["./deploy.sh staging\nok"], "they name staging"),
        ("went live", ["kubectl rollout status\nsuccessfully rolled out"], "no environment"),
        ("went live", ["./promote --env prod\ndone"], ""),
        ("staging is healthy", ["curl staging/health\nok"], ""),
        ("the cache works", [], ""),
    ],
)
def test_environment_problem_table(claim, results, problem):
    found = environment_problem(claim, results)
    assert (problem in found) if problem else found == ""


@pytest.mark.parametrize(
    ("claim", "scopes", "problem"),
    [
        ("tests/test_refunds.py passed", ["tests/test_refunds.py"], ""),
        ("test_orders.py passed", ["tests/test_refunds.py"], "not test_orders.py"),
        ("NavUser.test.tsx passes", ["NavUser.test.tsx"], ""),
        ("all good", ["tests/test_refunds.py"], ""),
    ],
)
def test_scope_problem_table(claim, scopes, problem):
    found = scope_problem(claim, scopes)
    assert (problem in found) if problem else found == ""
