import json

import pytest

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Entry
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app import reducer
from ledger_app.models import Fold
from ledger_app.services import fold_deltas, ledger_fold

pytestmark = pytest.mark.django_db

RULE = "Never modify the payments tables or their migrations without asking the user first."


def _journal():
    t = tenant_ensure(slug="acme")
    return journal_ensure(session=session_ensure(tenant=t, key="s1"))


def _items():
    return [
        message("system", RULE),
        message("user", "Fix the refund rounding."),
        message("assistant", "Reading the files."),
        tool_call("r1", "read_file", {"path": "billing/refunds.py"}),
        tool_call("r2", "read_file", {"path": "tests/test_refunds.py"}),
        tool_result("r1", "from decimal import Decimal"),
        tool_result("r2", "def test_refund(): ..."),
        tool_call("t1", "exec", {"command": "pytest tests/test_refunds.py"}),
        tool_result(
            "t1",
            "FAILED tests/test_refunds.py::test_refund - AssertionError\n1 failed",
            is_error=True,
            exit_code=1,
        ),
        message("user", "Correction: only change billing/refunds.py."),
        tool_call("t2", "exec", {"command": "pytest"}),
    ]


def _facts(fold):
    return fold.state_dict["facts"]


def test_first_fold_pins_instructions_verbatim_and_records_tool_outcomes():
    j = _journal()
    journal_append(journal=j, items=_items())
    result = ledger_fold(journal=j, writer="mechanical", recover=False)
    fold = result.fold
    assert result.created and fold.outcome == "fallback" and fold.number == 1
    # the interrupted tail (t2 without a result) is not folded
    assert (fold.seq_start, fold.seq_end) == (1, 10)
    facts = _facts(fold)
    by_entry = {s["entry"]: f for f in facts.values() for s in f["support"]}
    system = Entry.objects.get(journal=j, seq=1)
    pin = by_entry[system.entry_hash]
    assert pin["text"] == RULE and pin["priority"] == "P0" and pin["pin"] is True
    correction = Entry.objects.get(journal=j, seq=10)
    assert by_entry[correction.entry_hash]["text"] == "Correction: only change billing/refunds.py."
    reads = [f for f in facts.values() if f["category"] == "history"]
    assert len(reads) == 2 and {f["priority"] for f in reads} == {"P3"}
    failure = by_entry[Entry.objects.get(journal=j, seq=9).entry_hash]
    assert (
        failure["category"] == "blocker"
        and failure["text"].startswith("FAILED")
        and "exit 1" in failure["text"]
    )
    assert fold.manifest["covered"]["entry_hashes"] == [
        e.entry_hash for e in Entry.objects.filter(journal=j, seq__lte=10).order_by("seq")
    ]
    assert fold.manifest["instructions"]["intact"] and fold.manifest["instructions"]["pins"] == 3
    assert "retrieve raw journal evidence" in fold.manifest["note"]
    assert fold.state_hash == reducer.state_hash(fold.state_dict)


def test_folding_twice_writes_one_fold():
    j = _journal()
    journal_append(journal=j, items=_items())
    first = ledger_fold(journal=j)
    second = ledger_fold(journal=j)
    assert first.created and not second.created and second.fold is None
    assert Fold.objects.count() == 1


def test_a_later_result_lets_the_next_fold_cover_the_round():
    j = _journal()
    journal_append(journal=j, items=_items())
    ledger_fold(journal=j)
    journal_append(journal=j, items=[tool_result("t2", "14 passed")])
    second = ledger_fold(journal=j).fold
    assert second.number == 2 and second.previous.number == 1
    assert (second.seq_start, second.seq_end) == (11, 12)
    assert len(_facts(second)) == len(_facts(second.previous)) + 1


def test_replaying_every_delta_reproduces_the_stored_state_byte_for_byte():
    j = _journal()
    journal_append(journal=j, items=_items())
    ledger_fold(journal=j)
    journal_append(journal=j, items=[tool_result("t2", "14 passed")])
    last = ledger_fold(journal=j).fold
    replayed = reducer.reduce(None, fold_deltas(j))
    # fold 2 is not a checkpoint: its state is rebuilt from fold 1's plus its delta
    assert last.state is None and Fold.objects.get(journal=j, number=1).state is not None
    rebuilt = Fold.objects.state_after(last)
    assert reducer.state_bytes(replayed) == reducer.state_bytes(rebuilt)
    assert reducer.state_hash(replayed) == last.state_hash
    assert json.loads(last.delta)["verdicts"][0]["status"] == "accepted"
