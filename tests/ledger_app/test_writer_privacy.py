"""No secret leaves the machine in a writer/verifier prompt, none is copied into a non-pin fact.

Issue 12 ("Privacy"): a tool result holding ``db password: Sup3rS3cretValue99`` was sent
verbatim in the writer's request, and folds copied secrets into ledger facts. Every text goes
through :mod:`journal_app.privacy`; pins stay verbatim in the ledger (docs/design.md 5.2) and are
filtered only in the copy a prompt carries.
"""

from __future__ import annotations

import json

import pytest

from journal_app.formats.base import ParsedEntry, message, tool_call, tool_result
from journal_app.models import Entry
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app.entry_view import EntryView
from ledger_app.fact_text import redact_op
from ledger_app.mechanical import outcome_fact
from ledger_app.model_writer import (
    FoldContext,
    ItemRecord,
    Judgement,
    ModelWriter,
    RoundRecord,
    load_prompt,
)
from ledger_app.model_writer.messages import (
    entry_json,
    repair_request,
    state_json,
    writer_messages,
)
from ledger_app.models import Fold
from ledger_app.offline import OfflineWriter
from ledger_app.services import ledger_fold, ledger_verify
from tests.support import ScriptedServer

PASSWORD = "Sup3rS3cretValue99"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
THOUGHT = "maybe I should just print the password"
SECRETS = (PASSWORD, AWS_SECRET)
PIN_TEXT = f"Let's use the staging database with db password: {PASSWORD} from now on."


def _items():
    return [
        message("system", "Never print credentials."),
        message("user", PIN_TEXT),
        message("assistant", f"<thinking>{THOUGHT}</thinking>Configuring the AWS CLI."),
        tool_call(
            "a1",
            "exec",
            {"command": f"aws configure set aws_secret_access_key {AWS_SECRET} && ./sync.sh"},
        ),
        tool_result(
            "a1",
            f"ERROR: sync failed, aws_secret_access_key {AWS_SECRET} rejected",
            is_error=True,
            exit_code=1,
        ),
        tool_call("c1", "exec", {"command": "./show-config.sh"}),
        tool_result("c1", f"db password: {PASSWORD}\nport: 5432\n", exit_code=0),
        tool_call("d1", "exec", {"command": "./connect.sh"}),
        tool_result("d1", f"FATAL: login refused for db password: {PASSWORD}", is_error=True),
        tool_call(
            "t1", "exec", {"command": f"AWS_SECRET_ACCESS_KEY={AWS_SECRET} pytest tests/test_s3.py"}
        ),
        tool_result("t1", "........                                   [100%]\n8 passed in 0.12s"),
        ParsedEntry(kind="reasoning", role="assistant", content={"text": THOUGHT}),
        message("assistant", "8 tests in tests/test_s3.py pass."),
    ]


def _journal(key="s1"):
    tenant = tenant_ensure(slug="acme")
    journal = journal_ensure(session=session_ensure(tenant=tenant, key=key))
    journal_append(journal=journal, items=_items())
    journal.refresh_from_db()
    return journal


def _non_pin_facts(fold):
    return [f for f in fold.state_dict["facts"].values() if not f.get("pin")]


def _pins(fold):
    return {f["text"] for f in fold.state_dict["facts"].values() if f.get("pin")}


# ------------------------------------------------------------------ facts, with the database


@pytest.fixture(autouse=True)
def _no_auto_fold(settings):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**12
    settings.OPENAI_BASE_URL = ""


@pytest.mark.django_db
@pytest.mark.parametrize("writer", ["offline", "mechanical"])
def test_it_copies_no_secret_into_a_non_pin_fact_and_keeps_pins_verbatim(writer):
    journal = _journal()

    fold = ledger_fold(journal=journal, writer=writer).fold  # recovery included, as in use

    facts = _non_pin_facts(fold)
    stored = json.dumps(facts)  # text, quotes, command fields: everything stored
    for secret in SECRETS:
        assert secret not in stored
    # the facts quoting the secrets exist, with the marks where the values were
    texts = " | ".join(f["text"] for f in facts)
    assert "aws_secret_access_key [filtered: aws-secret-key]" in texts
    assert "db password: [filtered: secret-keyword]" in texts
    assert PIN_TEXT in _pins(fold)  # the pin holds the user's text byte for byte
    assert ledger_verify(journal=journal).ok


@pytest.mark.django_db
def test_the_offline_writer_redacts_output_lines_decisions_and_test_commands():
    journal = _journal()

    fold = ledger_fold(journal=journal, writer="offline", recover=False).fold

    facts = {f["id"].split(":")[0]: f for f in _non_pin_facts(fold)}
    [decision] = [f for f in _non_pin_facts(fold) if f["category"] == "decision"]
    assert PASSWORD not in decision["text"] and "[filtered: secret-keyword]" in decision["text"]
    assert all(PASSWORD not in s.get("quote", "") for s in decision["support"])
    run = facts["test"]
    assert "pytest: 8 passed (8 tests)" in run["text"]
    assert "AWS_SECRET_ACCESS_KEY=[filtered: aws-secret-key]" in run["command"]
    shown = next(f for f in _non_pin_facts(fold) if "show-config" in f["text"])
    assert "printed: db password: [filtered: secret-keyword]" in shown["text"]


@pytest.mark.django_db
def test_a_rerun_with_the_same_secret_still_supersedes_the_earlier_run():
    journal = _journal()
    first = ledger_fold(journal=journal, writer="offline", recover=False).fold
    [earlier] = [f for f in _non_pin_facts(first) if f["id"].startswith("test:")]
    journal_append(
        journal=journal,
        items=[
            tool_call(
                "t2",
                "exec",
                {"command": f"AWS_SECRET_ACCESS_KEY={AWS_SECRET} pytest tests/test_s3.py"},
            ),
            tool_result(
                "t2",
                "F.......                                   [100%]\n1 failed, 7 passed in 0.12s",
            ),
        ],
    )
    journal.refresh_from_db()

    second = ledger_fold(journal=journal, writer="offline", recover=False).fold

    facts = second.state_dict["facts"]
    assert facts[earlier["id"]]["lifecycle"] == "superseded"  # redacted keys still match
    assert AWS_SECRET not in json.dumps(_non_pin_facts(second))


# ------------------------------------------------------------------ prompts, scripted server


@pytest.fixture
def scripted():
    with ScriptedServer() as server:
        yield server


def _verdict(key, seq, entailed=True):
    return {
        "key": key,
        "seq": seq,
        "quote": "port: 5432",
        "entailment": "entailed" if entailed else "not_entailed",
        "entailment_reason": "seq 11 shows it"
        if entailed
        else f"seq 7 says db password: {PASSWORD}",
        "temporal": "valid",
        "temporal_reason": "nothing is closed",
    }


def _fact(key, text, support):
    return {
        "key": key,
        "category": "verified_state",
        "priority": "P2",
        "confidence": "verified",
        "text": text,
        "support": support,
    }


@pytest.mark.django_db
def test_no_secret_or_hidden_reasoning_reaches_the_writer_or_the_verifier(scripted):
    journal = _journal()
    show = Entry.objects.get(journal=journal, tool_call_id="c1", kind="tool_result").seq
    # the writer echoes the secret it was never shown; the verifier rejects and quotes it
    scripted.push_json(
        {"facts": [_fact("f1", f"show-config.sh printed db password: {PASSWORD}", [show])]}
    )
    scripted.push_json({"verdicts": [_verdict("f1", show, entailed=False)]})
    scripted.push_json({"facts": [_fact("f1", "show-config.sh printed the db settings", [show])]})
    scripted.push_json({"verdicts": [_verdict("f1", show)]})
    writer = ModelWriter(scripted.config())

    first = ledger_fold(journal=journal, writer=writer, recover=False).fold

    assert first.outcome == Fold.Outcome.REPAIRED and scripted.request_count == 4
    # a second fold: the ledger state (pins and code's blockers) goes into the prompt
    journal_append(journal=journal, items=[message("user", "Now rotate the key.")])
    journal.refresh_from_db()
    scripted.push_json({"facts": []})
    ledger_fold(journal=journal, writer=writer, recover=False)
    assert scripted.request_count == 5

    bodies = [json.dumps(r, ensure_ascii=False) for r in scripted.requests]
    for body in bodies:
        for secret in (*SECRETS, THOUGHT):
            assert secret not in body
    writer_request = scripted.requests[0]["messages"][-1]["content"]
    assert "db password: [filtered: secret-keyword]" in writer_request  # the result, filtered
    assert "aws_secret_access_key [filtered: aws-secret-key]" in writer_request  # an argument
    assert "[filtered: reasoning]" in writer_request
    verifier_request = scripted.requests[1]["messages"][-1]["content"]
    assert "[filtered: secret-keyword]" in verifier_request  # the claim and the cited entry
    repair = scripted.requests[2]["messages"][-1]["content"]
    assert "seq 7 says db password: [filtered: secret-keyword]" in repair  # the verifier's reason
    state = scripted.requests[4]["messages"][-1]["content"]
    assert "use the staging database with db password: [filtered: secret-keyword]" in state
    # ... while the ledger keeps the pin verbatim
    assert PIN_TEXT in _pins(first)
    assert all(PASSWORD not in f["text"] for f in _non_pin_facts(first))


# ------------------------------------------------------------------ pure


def _view(seq, kind, text, **kw):
    content = {"text": text} if kind in ("message", "reasoning") else {"output": text}
    return EntryView(
        seq=seq,
        entry_hash=f"{seq:064x}",
        kind=kind,
        role=kw.pop("role", "tool"),
        text=text,
        content=content,
        **kw,
    )


def test_entry_json_filters_before_it_clips():
    secret = f"aws_secret_access_key {AWS_SECRET}"
    long = "x" * 40 + secret + "\n" + "y" * 5000
    sent = entry_json(_view(1, "tool_result", long), 200)["text"]
    # clipping first would have cut the key in half and let its first part through
    assert AWS_SECRET[:20] not in sent and sent.startswith(
        "x" * 40 + "aws_secret_access_key [filtered: aws-secret-key]\ny"
    )
    assert entry_json(_view(2, "reasoning", THOUGHT, role="assistant"), 100)["text"] == (
        "[filtered: reasoning]"
    )


def test_state_json_filters_pins_and_facts_in_the_prompt_copy_only():
    state = {
        "facts": {
            "pin:1": {
                "id": "pin:1",
                "category": "objective",
                "priority": "P0",
                "confidence": "verified",
                "lifecycle": "active",
                "text": PIN_TEXT,
                "pin": True,
            },
            "f:1": {
                "id": "f:1",
                "category": "verified_state",
                "priority": "P2",
                "confidence": "reported",
                "lifecycle": "active",
                "text": f"config sets db password: {PASSWORD}",
            },
        }
    }
    sent = json.dumps(state_json(state))
    assert PASSWORD not in sent and sent.count("[filtered: secret-keyword]") == 2
    assert state["facts"]["pin:1"]["text"] == PIN_TEXT  # the state itself is untouched
    messages = writer_messages(load_prompt("writer-v1"), [], state, FoldContext(2, 9))
    assert PASSWORD not in messages[1]["content"]


def test_repair_request_filters_claims_and_reasons():
    item = ItemRecord(key="f1", op={"op": "add"}, claim=f"password: {PASSWORD}")
    item.judgements.append(Judgement("rules", "not_entailed", f"cites `export TOKEN={PASSWORD}`"))
    body = repair_request(RoundRecord(round=0, kind="proposal", items=[item]))
    assert PASSWORD not in body and "[filtered: " in body


def test_redact_op_leaves_a_pin_verbatim_and_redacts_everything_else():
    pin = {"op": "add", "fact": {"id": "pin:1", "text": PIN_TEXT, "pin": True}}
    assert redact_op(pin) == pin
    fact = {
        "id": "f",
        "text": f"db password: {PASSWORD}",
        "support": [{"entry": "ab", "quote": f"db password: {PASSWORD}"}, {"entry": "cd"}],
    }
    op = {"op": "supersede", "id": "g", "fact": fact, "reason": f"password: {PASSWORD}"}
    out = redact_op(op)
    assert PASSWORD not in json.dumps(out) and out["fact"]["support"][1] == {"entry": "cd"}
    assert fact["text"].endswith(PASSWORD)  # a copy: the writer's op is not changed


def test_a_failed_commands_fact_quotes_its_error_line_redacted():
    call = EntryView(
        1,
        "a" * 64,
        "tool_call",
        "assistant",
        "",
        {"arguments": {"command": "x"}},
        tool_call_id="c",
        tool_name="exec",
    )
    result = _view(
        2, "tool_result", f"FATAL: db password: {PASSWORD} refused", is_error=True, tool_call_id="c"
    )
    text = outcome_fact(call, result)["text"]
    assert PASSWORD not in text and "db password: [filtered: secret-keyword] refused" in text
    ops = OfflineWriter().propose([call, result], {"facts": {}})
    assert PASSWORD not in json.dumps(ops)
