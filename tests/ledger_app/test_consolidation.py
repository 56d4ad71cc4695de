import random
import string

import pytest

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Entry
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app.models import Fold
from ledger_app.services import ledger_consolidate, ledger_fold, ledger_verify

pytestmark = pytest.mark.django_db


def _journal(key):
    return journal_ensure(session=session_ensure(tenant=tenant_ensure(slug="acme"), key=key))


def test_one_user_message_of_280000_characters_makes_the_target_unreachable_and_is_kept():
    rng = random.Random(7)
    # random lowercase words: about 130,000 tokens, past the 67,500 start and the 20,000 target
    text = " ".join(
        "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9)))
        for _ in range(60000)
    )[:280_000]
    assert len(text) == 280_000
    j = _journal("huge")
    journal_append(
        journal=j,
        items=[
            message("user", text),
            tool_call("r", "read_file", {"path": "a.py"}),
            tool_result("r", "x = 1"),
        ],
    )
    # the fold consolidates by itself: nobody has to run compact (and 15)
    fold = ledger_fold(journal=j).consolidation
    assert fold is not None
    assert fold.kind == "consolidation" and fold.outcome == "target_unreachable"
    figures = fold.manifest["consolidation"]
    assert figures["kept_p0_p1_tokens"] > figures["target_tokens"] == 20_000
    facts = fold.state_dict["facts"]
    pin = [f for f in facts.values() if f.get("pin")]
    assert len(pin) == 1 and pin[0]["text"] == text
    assert not [f for f in facts.values() if f["priority"] in ("P2", "P3")]
    assert fold.manifest["instructions"]["intact"]
    assert ledger_verify(journal=j).ok
    again = ledger_consolidate(journal=j)
    assert again.fold is None or not again.created


def test_the_target_is_reached_by_evicting_p3_then_p2_only():
    j = _journal("many")
    items = [message("user", "Tidy the repository.")]
    for i in range(60):
        items += [
            tool_call(f"r{i}", "read_file", {"path": f"src/mod_{i}.py"}),
            tool_result(f"r{i}", f"contents {i}"),
        ]
    for i in range(20):
        items += [
            tool_call(f"x{i}", "exec", {"command": f"make step{i}"}),
            tool_result(f"x{i}", f"ok {i}", exit_code=0),
        ]
    items += [
        tool_call("f", "exec", {"command": "make deploy"}),
        tool_result("f", "error: denied", is_error=True, exit_code=2),
    ]
    journal_append(journal=j, items=items)
    before = ledger_fold(journal=j).fold.state_dict["facts"]
    p3 = [f for f in before.values() if f["priority"] == "P3"]
    assert len(p3) == 60
    result = ledger_consolidate(journal=j, target_tokens=900, start_tokens=100)
    fold = result.fold
    assert fold.outcome == "accepted"
    facts = fold.state_dict["facts"]
    assert not [f for f in facts.values() if f["priority"] == "P3"]
    assert [f for f in facts.values() if f["priority"] == "P2"], "stopped before evicting every P2"
    assert {f["priority"] for f in facts.values()} >= {"P0", "P1"}
    assert fold.manifest["consolidation"]["after_tokens"] <= 900
    assert fold.ops_rejected == 0


def test_not_needed_below_the_start_figure():
    j = _journal("small")
    journal_append(journal=j, items=[message("user", "hi")])
    ledger_fold(journal=j)
    result = ledger_consolidate(journal=j)
    assert result.fold is None and "below" in result.reason
    assert Fold.objects.filter(journal=j).count() == 1


def test_the_loss_report_lists_what_no_fact_keeps_with_its_entry():
    """A tool fact mentions the identifiers of its entries, except the
    numbers of a failed run (partial output, never results: docs/design.md case 05); the loss
    report lists exactly those, each with the entry holding it."""
    j = _journal("loss")
    journal_append(
        journal=j,
        items=[
            message("user", "Run the payments migration."),
            tool_call(
                "m",
                "exec",
                {"command": "python manage.py migrate payments 0097 --skip-locked-tables"},
            ),
            tool_result(
                "m", "Applying payments.0097_auto... (1200 ms)\nERROR: lock timeout", exit_code=1
            ),
        ],
    )
    fold = ledger_fold(journal=j, writer="mechanical").fold
    loss = fold.manifest["loss"]
    lost = {(x["kind"], x["value"]): x for x in loss["lost"]}
    result_entry = Entry.objects.get(journal=j, seq=3)
    assert ("migration", "payments.0097_auto") not in lost  # the failure fact mentions it
    assert ("number", "1200 ms") in lost
    assert lost[("number", "1200 ms")]["entry"] == result_entry.entry_hash
    texts = [f["text"] for f in fold.state_dict["facts"].values() if not f.get("pin")]
    assert any("payments.0097_auto" in t and "1200 ms" not in t for t in texts)
    assert loss["total"] >= loss["kept"] + len(loss["lost"]) - loss.get("lost_truncated", 0) - 1
