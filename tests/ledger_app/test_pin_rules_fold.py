"""Folds under pin rules 3 verify; ledgers folded under rules 2 still do; one changed byte of
a pin is caught; a receipt's ``read`` restores its attachment (docs/design.md 5.2, 7)."""

from __future__ import annotations

import hashlib
import json

import pytest
import rfc8785

from journal_app import content
from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Entry, Journal
from journal_app.services import journal_append
from ledger_app.models import Fold, LedgerFact
from ledger_app.pins import pin_shown_text
from ledger_app.services import ledger_fold, ledger_verify
from ledger_app.services.integrity import ledger_integrity
from recovery_app.services import RecoveryError, recovery_read
from tests.factories import TenantFactory, journal_build
from tests.journal_app.test_harness_segments import IDE, REMINDER, _log

pytestmark = pytest.mark.django_db

LOG = _log(260)
ITEMS = [
    message("system", "You are a careful coding agent."),
    message("user", IDE + "Make the TeamSheet load faster.\n"),
    message("user", REMINDER + "\n\nWhy do we need stats for the team?\n\n" + REMINDER),
    message("user", "The deploy keeps failing, here is the log:\n" + LOG + "\n\nWhat is wrong?"),
    message("user", IDE.rstrip()),  # harness block only: pinned whole, governing
    message("user", _log(120)),  # an attachment with no words around it
    tool_call("c1", "exec", {"command": "pytest -q"}),
    tool_result("c1", "3 passed", exit_code=0),
]


def _journal(slug: str) -> Journal:
    return journal_build(tenant=TenantFactory(slug=slug), items=ITEMS)


def _pins(journal: Journal) -> dict[int, dict]:
    seqs = dict(Entry.objects.filter(journal=journal).values_list("entry_hash", "seq"))
    facts = [
        json.loads(d)
        for d in LedgerFact.objects.filter(
            journal=journal, pin=True, until__isnull=True
        ).values_list("data", flat=True)
    ]
    return {seqs[f["support"][0]["entry"]]: f for f in facts}


def _edit_delta(journal: Journal, edit) -> None:
    fold = Fold.objects.get(journal=journal, number=1)
    delta = json.loads(fold.delta)
    edit(delta)
    Fold.objects.filter(pk=fold.pk).update(delta=rfc8785.dumps(delta).decode())


def _pin_op(delta: dict, seq_text_start: str) -> dict:
    return next(
        op["fact"]
        for op in delta["ops"]
        if op.get("fact", {}).get("pin") and op["fact"]["text"].startswith(seq_text_start)
    )


@pytest.fixture
def folded(settings) -> Journal:
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9
    journal = _journal("now")
    assert ledger_fold(journal=journal).fold is not None
    return Journal.objects.get(pk=journal.pk)


def test_a_ledger_with_rules_3_pins_verifies(folded):
    delta = json.loads(folded.folds.get().delta)
    assert delta["pin_rules"] == content.PIN_RULES == 3
    pins = _pins(folded)
    assert sorted(pins) == [1, 2, 3, 4, 5, 6]
    assert pins[2]["text"] == "Make the TeamSheet load faster.\n"
    assert pins[3]["text"] == "Why do we need stats for the team?"
    assert pins[5]["text"] == IDE.rstrip() and pins[5]["pin_kind"] == "governing"
    assert all("Context from my IDE" not in p["text"] for s, p in pins.items() if s != 5)
    (a,) = pins[4]["attachments"]
    assert pins[4]["text"][a["start"] : a["end"]] == LOG
    assert "attachments" in pins[6] and pins[6]["pin_kind"] == "governing"
    assert [r["text"] for r in delta["required_pins"]] == [
        p["text"] for _, p in sorted(pins.items())
    ]
    assert ledger_verify(journal=folded).ok
    assert ledger_integrity(journal=folded) == []


def test_a_ledger_folded_under_pin_rules_2_still_verifies(settings, monkeypatch):
    """Rules 2 pinned each message whole and wrote no pin_kind: checked against the rules
    its delta names, it still verifies after the upgrade."""
    from ledger_app import pin_facts
    from ledger_app.services import fold_stages

    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9
    monkeypatch.setattr(fold_stages, "PIN_RULES", 2)
    monkeypatch.setattr(
        fold_stages,
        "pin_facts",
        lambda vs, **kw: [
            pin_facts.pin_fact(v, rules=2) for v in vs if pin_facts.is_pin_source(v, 2)
        ],
    )
    monkeypatch.setattr(fold_stages, "required_pins", lambda vs: pin_facts.required_pins(vs, 2))
    old = _journal("old")
    ledger_fold(journal=old)
    monkeypatch.undo()
    delta = json.loads(old.folds.get().delta)
    assert delta["pin_rules"] == 2
    pins = _pins(old)
    # the reminders-around-words message was taken for a harness record under rules 2
    assert sorted(pins) == [1, 2, 4, 5, 6]
    assert pins[2]["text"] == IDE + "Make the TeamSheet load faster.\n"
    assert "pin_kind" not in pins[2] and "attachments" not in pins[4]
    assert pin_shown_text(pins[4]) == pins[4]["text"]
    assert ledger_verify(journal=old).ok
    assert ledger_integrity(journal=old) == []

    # the same ledger folds on under rules 3: old pins keep their text, new ones are stripped
    journal_append(journal=old, items=[message("user", IDE + "Now add a loading state.\n")])
    assert ledger_fold(journal=old).fold is not None
    assert json.loads(old.folds.get(number=2).delta)["pin_rules"] == 3
    pins = _pins(old)
    assert pins[9]["text"] == "Now add a loading state.\n" and pins[9]["pin_kind"] == "request"
    assert pins[2]["text"] == IDE + "Make the TeamSheet load faster.\n"
    assert ledger_verify(journal=old).ok
    assert ledger_integrity(journal=old) == []


def test_one_changed_byte_of_a_pin_is_caught(folded):
    def edit(delta):
        fact = _pin_op(delta, "Why do we need")
        fact["text"] = fact["text"].replace("stats", "stAts")

    _edit_delta(folded, edit)
    problems = ledger_integrity(journal=folded)
    assert any(p.check == "pins" and "pin text differs" in p.detail for p in problems), problems
    assert not ledger_verify(journal=folded).ok


def test_a_required_pin_whose_text_is_the_whole_message_is_caught(folded):
    """A delta claiming rules 3 whose required pin keeps the IDE context differs from the
    journal re-derived under rules 3."""

    def edit(delta):
        delta["required_pins"][1]["text"] = IDE + delta["required_pins"][1]["text"]

    _edit_delta(folded, edit)
    problems = ledger_integrity(journal=folded)
    assert any("required pins differ" in p.detail for p in problems), problems


def test_a_forged_attachment_receipt_is_caught(folded):
    def edit(delta):
        fact = _pin_op(delta, "The deploy keeps failing")
        fact["attachments"][0]["sha256"] = "0" * 64

    _edit_delta(folded, edit)
    problems = ledger_integrity(journal=folded)
    assert any("sha256 differs" in p.detail for p in problems), problems


def test_read_of_a_receipt_range_restores_the_attachment_exactly(folded):
    fact = _pins(folded)[4]
    (a,) = fact["attachments"]
    shown = pin_shown_text(fact)
    entry = fact["support"][0]["entry"]
    assert f"read(entry=sha256:{entry}, range=" in shown and LOG not in shown
    start = a["entry_start"]
    got = recovery_read(
        journal=folded, entry="sha256:" + entry, text_range=(start, start + a["end"] - a["start"])
    )
    assert got.verified and got.text == LOG and got.content is None
    assert got.range_sha256 == "sha256:" + a["sha256"]
    assert hashlib.sha256(got.text.encode()).hexdigest().startswith(shown.split("sha256:")[1][:12])
    with pytest.raises(RecoveryError):
        recovery_read(journal=folded, entry=entry, text_range=(start, 10**9))


def test_the_read_endpoint_takes_the_receipts_range(folded, client):
    from journal_app.auth import api_key_create

    fact = _pins(folded)[4]
    (a,) = fact["attachments"]
    start, end = a["entry_start"], a["entry_start"] + a["end"] - a["start"]
    token = api_key_create(tenant=folded.session.tenant, name="agent")[1]
    url = f"/api/v1/sessions/{folded.session.key}/main/main/recovery/read/entry/{fact['support'][0]['entry']}"
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    got = client.get(url, {"start": start, "end": end}, **auth)
    assert got.status_code == 200, got.content
    body = got.json()
    assert body["text"] == LOG and body["range"] == [start, end]
    assert body["range_sha256"] == "sha256:" + a["sha256"]
    assert client.get(url, {"start": start}, **auth).status_code == 422
    whole = client.get(url, **auth).json()
    assert whole["range"] is None and LOG in whole["text"]


def test_a_context_holds_a_pin_whose_harness_block_the_ledger_left_out():
    from ledger_app.services.context import context_build

    journal = journal_build(
        tenant=TenantFactory(slug="ctx"),
        items=[
            message("user", REMINDER + "\nAdd a created_at column to the orders table."),
            tool_call("c1", "read_file", {"path": "models/order.py"}),
            tool_result("c1", "class Order(Base): ..."),
            message("assistant", "Next is the migration."),
            message("user", "Go ahead."),
        ],
    )
    ledger_fold(journal=journal, recover=False)
    result = context_build(journal=journal, working_budget=2000, hard_limit=2000)
    assert result.status == "ok", result.failure
    shown = json.dumps(result.model_view)
    assert "Add a created_at column to the orders table." in shown


def test_a_fold_names_its_bad_input_in_its_manifest():
    journal = journal_build(
        tenant=TenantFactory(slug="bad"),
        items=[
            message("user", IDE.rstrip()),  # a harness block only: pinned governing
            message("user", "Approved."),  # an approval with no proposal before it
            message("user", "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
            tool_call("p1", "update_plan", {"plan": ["a step", 7]}),  # one malformed item
            tool_result("p1", "Plan updated."),
        ],
    )
    fold = ledger_fold(journal=journal, recover=False).fold
    notes = fold.manifest["conservative"]["notes"]
    assert any("no words of its own" in n and "pinned as governing" in n for n in notes), notes
    assert any(n.startswith("approval:") and "no proposal before it" in n for n in notes), notes
    assert any("1 malformed plan item(s) ignored" in n for n in notes), notes
    assert "harness records, journaled, never pinned: 1 environment (seq 3)" in notes
