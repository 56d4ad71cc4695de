"""What-if re-fold: another writer over the same frozen range, the real ledger untouched."""

from __future__ import annotations

import json

import pytest

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app.model_writer import ModelWriter
from ledger_app.models import Fold, FoldAttempt, Proposal, Verdict
from ledger_app.refold import RefoldError, ledger_diff, ledger_refold
from ledger_app.services import ledger_consolidate, ledger_fold
from tests.support import ScriptedServer

pytestmark = pytest.mark.django_db


@pytest.fixture
def scripted():
    with ScriptedServer() as server:
        yield server


def _items():
    return [
        message("system", "Never touch the payments tables without asking."),
        message("user", "Fix the refund rounding and run its tests."),
        tool_call(
            "p1",
            "TodoWrite",
            {"todos": [{"content": "Fix refund rounding", "status": "in_progress"}]},
        ),
        tool_result("p1", "Todos have been modified successfully."),
        tool_call("t1", "exec", {"command": "pytest tests/test_refunds.py"}),
        tool_result("t1", "8 passed in 0.12s"),
    ]


def _journal():
    tenant = tenant_ensure(slug="acme")
    journal = journal_ensure(session=session_ensure(tenant=tenant, key="s1"))
    journal_append(journal=journal, items=_items())
    journal.refresh_from_db()
    return journal


def _counts():
    return (
        Fold.objects.count(),
        FoldAttempt.objects.count(),
        Proposal.objects.count(),
        Verdict.objects.count(),
    )


def test_an_offline_refold_of_a_mechanical_fold_shows_what_it_adds_and_writes_nothing():
    journal = _journal()
    fold = ledger_fold(journal=journal, writer="mechanical", recover=False).fold
    stored = (fold.state, fold.state_hash)
    before = _counts()

    refold = ledger_refold(fold=fold, writer="offline")

    assert _counts() == before
    fold.refresh_from_db()
    assert (fold.state, fold.state_hash) == stored
    assert refold.original == fold.state_dict and refold.outcome == "accepted"
    added = {f["text"] for f in refold.diff.only_what_if}
    assert "Planned (TodoWrite): Fix refund rounding" in added
    assert any("pytest: 8 passed (8 tests)" in t for t in added)
    removed = {f["text"] for f in refold.diff.only_original}
    assert any(t.startswith("`exec` command `pytest tests/test_refunds.py`") for t in removed)
    assert refold.diff.same == 2  # the two pins, written by code in both
    assert all(v["status"] == "accepted" for v in refold.verdicts)


def test_the_same_writer_gives_the_same_ledger():
    journal = _journal()
    fold = ledger_fold(journal=journal, writer="offline").fold
    refold = ledger_refold(fold=fold, writer="offline")
    assert refold.diff.identical and refold.what_if == refold.original


def test_a_model_refold_runs_the_writer_and_verifier_against_the_frozen_range(scripted):
    journal = _journal()
    fold = ledger_fold(journal=journal, writer="offline").fold
    journal_append(journal=journal, items=[message("user", "Now deploy it.")])
    scripted.push_json(
        {
            "facts": [
                {
                    "key": "f1",
                    "category": "verified_state",
                    "priority": "P1",
                    "confidence": "verified",
                    "text": "8 tests in tests/test_refunds.py passed",
                    "support": [6],
                }
            ]
        }
    )
    scripted.push_json(
        {
            "verdicts": [
                {
                    "key": "f1",
                    "entailment": "entailed",
                    "entailment_reason": "seq 6 shows 8 passed",
                    "temporal": "valid",
                    "temporal_reason": "nothing closed",
                }
            ]
        }
    )
    before = _counts()

    refold = ledger_refold(fold=fold, writer=ModelWriter(scripted.config()))

    assert _counts() == before and scripted.request_count == 2
    assert refold.outcome == "accepted"
    payload = json.loads(scripted.requests[0]["messages"][1]["content"].split("\n", 1)[1])
    entries = [e["seq"] for e in payload["entries"]]
    assert entries == [1, 2, 3, 4, 5, 6]  # the frozen range, not the entry appended since
    assert "8 tests in tests/test_refunds.py passed" in {
        f["text"] for f in refold.diff.only_what_if
    }
    assert "Planned (TodoWrite): Fix refund rounding" in {
        f["text"] for f in refold.diff.only_original
    }
    [call_w, call_v] = refold.composition.calls
    assert (call_w.role, call_v.role) == ("writer", "verifier")


def test_a_later_fold_is_refolded_on_top_of_the_state_it_started_from():
    journal = _journal()
    first = ledger_fold(journal=journal).fold
    journal_append(
        journal=journal,
        items=[
            tool_call(
                "p2",
                "TodoWrite",
                {"todos": [{"content": "Fix refund rounding", "status": "completed"}]},
            ),
            tool_result("p2", "Todos have been modified successfully."),
        ],
    )
    second = ledger_fold(journal=journal).fold
    refold = ledger_refold(fold=second, writer="offline")
    # every fact of fold 1 is in both; the offline writer records the plan update, which
    # has nothing to close because fold 1 (mechanical) opened no obligation
    assert set(first.state_dict["facts"]) <= set(refold.what_if["facts"])
    [plan] = [f for f in refold.what_if["facts"].values() if f["id"].startswith("todo:")]
    assert plan["lifecycle"] == "closed"


def test_a_range_that_no_longer_matches_its_manifest_is_refused():
    journal = _journal()
    fold = ledger_fold(journal=journal).fold
    manifest = fold.manifest
    manifest["covered"]["entry_hashes"][0] = "0" * 64
    Fold.objects.filter(pk=fold.pk).update(manifest=manifest)
    fold.refresh_from_db()
    with pytest.raises(RefoldError, match="no longer match"):
        ledger_refold(fold=fold, writer="offline")


def test_a_consolidation_cannot_be_refolded():
    journal = _journal()
    ledger_fold(journal=journal, writer="mechanical")
    checkpoint = ledger_consolidate(journal=journal, start_tokens=0, target_tokens=0).fold
    assert checkpoint is not None and checkpoint.kind == "consolidation"
    with pytest.raises(RefoldError, match="not a fold over a range"):
        ledger_refold(fold=checkpoint, writer="offline")


def test_a_model_that_cannot_be_reached_fails_the_refold_and_writes_nothing(scripted):
    journal = _journal()
    fold = ledger_fold(journal=journal, writer="offline").fold
    scripted.push_error(500)
    scripted.push_error(500)
    before = _counts()
    with pytest.raises(RefoldError, match="unreachable"):
        ledger_refold(fold=fold, writer=ModelWriter(scripted.config(max_attempts=2)))
    assert _counts() == before


def test_the_diff_matches_renamed_facts_by_text():
    a = {
        "facts": {
            "x1": {
                "id": "x1",
                "category": "decision",
                "priority": "P1",
                "text": "Use Decimal",
                "support": [],
            }
        }
    }
    b = {
        "facts": {
            "y9": {
                "id": "y9",
                "category": "decision",
                "priority": "P2",
                "text": "Use Decimal",
                "support": [],
            }
        }
    }
    diff = ledger_diff(a, b)
    assert diff.changed == [{"id": "x1 / y9", "fields": {"priority": ["P1", "P2"]}}]
    assert not diff.only_original and not diff.only_what_if
