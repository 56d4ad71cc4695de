"""Pins under pin rules 3: kind, attachments, what a context shows (docs/design.md 5.2). Pure."""

from __future__ import annotations

import hashlib

from ledger_app.entry_view import EntryView
from ledger_app.pin_facts import pin_fact, pin_facts, required_pins
from ledger_app.pins import (
    attachment_problems,
    classify,
    expected_text,
    pin_kind,
    pin_layout,
    pin_notes,
    pin_shown_text,
)
from tests.journal_app.test_harness_segments import IDE, REMINDER, _log


def _view(seq: int, role: str, text: str, **kw) -> EntryView:
    h = hashlib.sha256(f"{seq}:{text}".encode()).hexdigest()
    return EntryView(
        seq=seq,
        entry_hash=h,
        kind="message",
        role=role,
        text=text,
        content={"text": text},
        **kw,
    )


def test_system_developer_instructions_rules_and_the_objective_are_governing():
    assert (
        classify(role="system", words="You are a coding agent.", objective=False)[0] == "governing"
    )
    assert classify(role="developer", words="Fix it", objective=False) == ("governing", "system")
    # the objective is governing when it states a rule or no one-off task; a one-off task
    # as the first message is a request (it closes when done, never stays current)
    assert classify(role="user", words="Fix the login bug", objective=True) == (
        "request",
        "objective",
    )
    assert classify(
        role="user", words="Fix the login bug; never change the public API.", objective=True
    ) == ("governing", "objective")
    assert classify(role="user", words="The billing service.", objective=True) == (
        "governing",
        "objective",
    )
    assert classify(
        role="user", words="From now on, never push to main without asking.", objective=False
    ) == ("governing", "rules")
    assert classify(
        role="user", words="<user_instructions>\nUse uv\n</user_instructions>", objective=True
    ) == (
        "governing",
        "instructions",
    )


def test_one_off_tasks_and_questions_are_requests_and_a_later_turn_with_no_rule_too():
    for words in (
        "Why do we need stats for the team?",
        "can you run lint, test and check-types",
        "Fix the crash in parser.py and add a regression test.",
        "Yes, approved.",
        "continue",
    ):
        assert classify(role="user", words=words, objective=False) == ("request", "request"), words
    assert classify(role="user", words="The staging database.", objective=False) == (
        "request",
        "turn",
    )
    assert classify(role="user", words="Never touch the staging database.", objective=False) == (
        "governing",
        "rules",
    )
    assert classify(role="user", words="", objective=False) == ("governing", "empty")


def test_the_first_user_request_of_a_session_is_its_objective_later_ones_are_requests():
    views = [
        _view(1, "system", "You are a coding agent."),
        _view(2, "user", "<user_instructions>\nAlways use uv.\n</user_instructions>"),
        _view(3, "user", IDE + "Make the TeamSheet load faster.\n"),
        _view(4, "user", IDE + "Why do we need stats for the team?\n"),
    ]
    facts = pin_facts(views)
    assert [(f["pin_kind"], f["pin_reason"]) for f in facts] == [
        ("governing", "system"),
        ("governing", "instructions"),
        ("request", "objective"),
        ("request", "request"),
    ]
    assert facts[2]["text"] == "Make the TeamSheet load faster.\n"
    # a later fold: the ledger holds the objective, so its first user message is classified
    later = pin_facts(
        [_view(5, "user", "Make the TeamSheet load faster.")], state={"facts": {"o": facts[2]}}
    )
    assert later[0]["pin_kind"] == "request"
    # a later fold never names an objective, even when the first one closed (was done)
    assert (
        pin_facts([_view(6, "user", "The billing service.")], state={"facts": {}, "folds": 3})[0][
            "pin_reason"
        ]
        == "turn"
    )
    assert (
        pin_facts([_view(6, "user", "The billing service.")], state={"facts": {}, "folds": 0})[0][
            "pin_reason"
        ]
        == "objective"
    )
    # a ledger folded before pin rules 3 (a user pin without pin_kind) holds its objective
    old = {k: v for k, v in facts[2].items() if k not in ("pin_kind", "pin_reason")}
    assert (
        pin_facts([_view(5, "user", "Run the tests.")], state={"facts": {"o": old}})[0]["pin_kind"]
        == "request"
    )
    assert pin_kind(old) == "governing"  # and it counts as governing


def test_a_message_with_no_words_is_never_the_objective():
    views = [
        _view(1, "user", IDE.rstrip()),
        _view(2, "user", _log(120)),
        _view(3, "user", "Fix the login bug."),
    ]
    assert [f["pin_reason"] for f in pin_facts(views)] == ["empty", "empty", "objective"]


def test_a_pin_holds_the_message_minus_its_harness_blocks_and_required_pins_agree():
    text = REMINDER + "\n\nRename the flag to --dry-run.\n\n" + REMINDER
    v = _view(7, "user", text)
    fact = pin_fact(v)
    assert fact["text"] == "Rename the flag to --dry-run."
    assert required_pins([v]) == [{"entry": v.entry_hash, "text": "Rename the flag to --dry-run."}]
    assert expected_text(fact, text) == fact["text"]
    old = {k: val for k, val in fact.items() if k != "pin_kind"}
    assert expected_text(old, text) == text  # a pin folded before: the whole message


def test_a_message_that_is_only_a_harness_block_is_pinned_whole_as_governing():
    text = IDE.rstrip()
    fact = pin_fact(_view(9, "user", text))
    assert fact["text"] == text
    assert (fact["pin_kind"], fact["pin_reason"]) == ("governing", "empty")
    assert "attachments" not in fact


def test_a_pasted_log_is_an_attachment_shown_as_a_receipt_with_the_words_verbatim():
    log = _log(260)
    text = IDE + "The deploy keeps failing, here is the log:\n" + log + "\n\nWhat is going wrong?"
    v = _view(11, "user", text)
    fact = pin_fact(v)
    assert fact["text"] == text[len(IDE) :]
    (a,) = fact["attachments"]
    assert fact["text"][a["start"] : a["end"]] == log
    assert text[a["entry_start"] : a["entry_start"] + len(log)] == log
    assert a["sha256"] == hashlib.sha256(log.encode()).hexdigest()
    assert a["lines"] == 260 and a["tokens"] > 10_000
    assert a["head"].splitlines()[0] == log.splitlines()[0]
    assert fact["pin_kind"] == "request"  # classified on the words, not the log
    shown = pin_shown_text(fact)
    start = a["entry_start"]
    assert shown == (
        "The deploy keeps failing, here is the log:\n"
        f"[attachment sha256:{a['sha256'][:12]}, {a['tokens']:,} tokens, 260 lines; first lines: "
        + " / ".join(a["head"].splitlines())
        + f"; read it with read(entry=sha256:{v.entry_hash}, range=[{start}, {start + len(log)}])]"
        "\n\nWhat is going wrong?"
    )
    assert len(shown) < 600 and attachment_problems(fact, text) == []


def test_an_attachment_with_no_words_around_it_is_pinned_governing_with_its_receipt():
    log = _log(120)
    fact = pin_fact(_view(12, "user", log))
    assert fact["text"] == log and (fact["pin_kind"], fact["pin_reason"]) == ("governing", "empty")
    (a,) = fact["attachments"]
    assert (a["start"], a["end"]) == (0, len(log))
    assert pin_shown_text(fact).startswith("[attachment sha256:") and "\n" not in pin_shown_text(
        fact
    )


def test_the_attachment_threshold_is_a_parameter():
    log = _log(120)
    assert "attachments" not in pin_fact(_view(12, "user", log), attachment_tokens=100_000)
    assert pin_layout(log, attachment_tokens=100_000) == (log, [], log)


def test_an_attachment_whose_bytes_or_range_changed_is_a_problem():
    log = _log(120)
    text = "See:\n" + log
    fact = pin_fact(_view(13, "user", text))
    a = fact["attachments"][0]
    forged = {**fact, "text": fact["text"][:-1] + "X"}
    assert attachment_problems(forged) == ["attachment 0: sha256 differs from the pin's text there"]
    moved = {**fact, "attachments": [{**a, "entry_start": a["entry_start"] + 1}]}
    assert attachment_problems(moved, text) == ["attachment 0: the entry's text at 6 differs"]
    outside = {**fact, "attachments": [{**a, "end": len(fact["text"]) + 5}]}
    assert "not inside the pin" in attachment_problems(outside)[0]


def test_a_pin_without_attachments_is_shown_as_its_text():
    assert pin_shown_text({"text": "Never deploy on Fridays."}) == "Never deploy on Fridays."


def test_pins_classified_by_the_conservative_rule_are_named_for_the_debug_record():
    views = [
        _view(1, "user", "Fix the login bug."),
        _view(2, "user", IDE.rstrip()),
        _view(3, "user", _log(120)),
        _view(4, "user", "Run the tests."),
    ]
    facts = pin_facts(views)
    notes = pin_notes(facts)
    assert notes == [
        f"{facts[1]['id']}: no words of its own (harness blocks or attached material only), "
        "pinned as governing",
        f"{facts[2]['id']}: no words of its own (harness blocks or attached material only), "
        "pinned as governing with 1 attachment(s)",
    ]


def test_the_fold_record_names_an_unbound_approval_and_a_malformed_plan():
    from ledger_app.pins import conservative_notes

    ops = [
        {"op": "add", "fact": {"id": "approval:a", "bound": False}},
        {"op": "add", "fact": {"id": "plan:p", "malformed": 2}},
        {"op": "add", "fact": {"id": "tool:t"}},
        {"op": "close", "id": "todo:x"},
    ]
    assert conservative_notes(ops) == [
        "approval:a: an approval with no proposal before it; it quotes the user's words only "
        "and is used only by an action that names them",
        "plan:p: 2 malformed plan item(s) ignored; the earlier plan's items stay open",
    ]


def test_an_acknowledgement_is_never_an_open_request():
    for words in ("ok", "Thanks!", "got it."):
        assert classify(role="user", words=words, objective=False) == ("governing", "ack")
    assert classify(role="user", words="ok continue", objective=False) == ("request", "request")
    assert classify(role="user", words="yes", objective=False)[0] == "request"  # may approve
