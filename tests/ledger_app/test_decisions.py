"""Requests that close on evidence per part, decisions with their content (docs/design.md 5.5). Pure.

The offline writer over hand-written sessions in the style of the reported failures: a
two-part instruction, six numbered problems fixed one by one, an approved exact wording
reached through an edit, and an approval consumed by the migration it approved.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest

from ledger_app import reducer
from ledger_app.entry_view import EntryView
from ledger_app.model_writer import judges
from ledger_app.model_writer.judges import default_evidence
from ledger_app.offline import OfflineWriter, turn_state
from ledger_app.offline.decisions import (
    AWAIT_KEY,
    Acceptance,
    acceptance,
    accepted_text,
    awaits_approval,
    options,
    proposal_body,
)
from ledger_app.offline.request_parts import pin_kinds
from ledger_app.offline.turns import instruction_parts, numbered_items, part_kind
from ledger_app.pin_facts import is_pin_source, pin_fact, required_pins


def _v(seq: int, kind: str, role: str = "assistant", text: str = "", **kw: Any) -> EntryView:
    content = kw.pop("content", None) or {"text": text}
    return EntryView(
        seq=seq,
        entry_hash=hashlib.sha256(f"decisions-{seq}".encode()).hexdigest(),
        kind=kind,
        role=role,
        text=text,
        content=content,
        **kw,
    )


class _Session:
    """Entries numbered from 1: ``user``/``assistant`` messages and ``run`` (a shell call and
    its result), ``edit`` (a file editor call and its result)."""

    def __init__(self) -> None:
        self.entries: list[EntryView] = []

    @property
    def seq(self) -> int:
        return len(self.entries) + 1

    def say(self, role: str, text: str) -> EntryView:
        self.entries.append(_v(self.seq, "message", role, text))
        return self.entries[-1]

    def _pair(self, name: str, args: dict, output: str, error: bool, code: int | None):
        cid = f"c{self.seq}"
        call = _v(
            self.seq,
            "tool_call",
            text=json.dumps(args),
            tool_call_id=cid,
            tool_name=name,
            content={"name": name, "arguments": args},
        )
        self.entries.append(call)
        content: dict[str, Any] = {"output": output, "is_error": error}
        if code is not None:
            content["exit_code"] = code
        result = _v(
            self.seq,
            "tool_result",
            "tool",
            output,
            tool_call_id=cid,
            tool_name=name,
            is_error=error,
            content=content,
        )
        self.entries.append(result)
        return result

    def run(self, command: str, output: str, code: int = 0) -> EntryView:
        return self._pair("bash", {"command": command}, output, code != 0, code)

    def edit(self, path: str, old: str, new: str) -> EntryView:
        args = {"command": "str_replace", "path": path, "old_str": old, "new_str": new}
        return self._pair(
            "str_replace_based_edit_tool", args, f"The file {path} has been edited.", False, None
        )

    def create(self, path: str, text: str) -> EntryView:
        args = {"command": "create", "path": path, "file_text": text}
        return self._pair(
            "str_replace_based_edit_tool",
            args,
            f"File created successfully at: {path}",
            False,
            None,
        )


@pytest.fixture
def requests_are_requests(monkeypatch):
    """Every user pin is a request (the classification is the pins' code, docs/design.md 5.2;
    here it is fixed so the writer's part is tested alone)."""

    def every_pin_a_request(entries, state):
        return {f"pin:{e.entry_hash[:16]}": "request" for e in entries if is_pin_source(e)}

    monkeypatch.setattr(turn_state, "pin_kinds", every_pin_a_request)
    monkeypatch.setattr(judges, "pin_kinds", every_pin_a_request)


def _propose(entries: list[EntryView], state: dict | None = None) -> list[dict[str, Any]]:
    return OfflineWriter().propose(entries, state or {"facts": {}})


def _closes(ops: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {op["id"]: op for op in ops if op["op"] == "close"}


def _added(ops: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return [op["fact"] for op in ops if "fact" in op and op["fact"]["id"].startswith(prefix)]


def _pin(view: EntryView) -> dict[str, Any]:
    """The pin code writes for ``view``, its kind as the writer reads it."""
    fact = pin_fact(view)
    fact.setdefault("pin_kind", pin_kinds([view], {})[fact["id"]])
    return fact


def _fold(
    state: dict, views: list[EntryView], ops: list[dict], number: int, earlier=()
) -> reducer.Reduction:
    """One fold through the reducer: the pins of ``views`` (as the service adds them), then
    ``ops``; ``views`` are evidence of fold ``number``, ``earlier`` of the fold before."""
    evidence = default_evidence(list(earlier), number - 1)([])
    evidence.update(default_evidence(views, number)([]))
    pins = [{"op": "add", "fact": _pin(v)} for v in views if is_pin_source(v)]
    delta = {
        "fold": number,
        "revision": views[-1].seq,
        "evidence": evidence,
        "required_pins": required_pins(views),
        "lifecycle_rules": 1,
        "ops": pins + ops,
    }
    return reducer.apply_delta(copy.deepcopy(state or reducer.EMPTY_STATE), delta)


# ------------------------------------------------------------------ request parts


def test_a_two_action_instruction_splits_at_the_and_that_opens_the_second_action():
    text = "Fix the crash in billing/refunds.py and add a regression test."
    assert instruction_parts(text) == [
        "Fix the crash in billing/refunds.py",
        "add a regression test.",
    ]
    assert [part_kind(p) for p in instruction_parts(text)] == ["fix", "write_test"]
    # "and" inside one action is not a step
    assert instruction_parts("Update the header and footer of the report.") == [
        "Update the header and footer of the report."
    ]


def _two_part_session(*, with_test: bool) -> tuple[_Session, EntryView, list[EntryView]]:
    s = _Session()
    user = s.say("user", "Fix the crash in billing/refunds.py and add a regression test.")
    evidence = [s.edit("billing/refunds.py", "total / count", "total / max(count, 1)")]
    evidence.append(s.run("pytest -q tests/test_billing.py", "12 passed in 0.40s"))
    if with_test:
        evidence.append(
            s.create("tests/test_refunds_regression.py", "def test_empty_refund():\n    ...\n")
        )
        evidence.append(s.run("pytest -q tests/test_refunds_regression.py", "1 passed in 0.10s"))
    return s, user, evidence


def test_one_edit_of_the_named_file_does_not_close_a_request_that_names_two_actions(
    requests_are_requests,
):
    s, user, _ = _two_part_session(with_test=False)
    ops = _propose(s.entries)
    assert _added(ops, "done:") == []
    assert f"pin:{user.entry_hash[:16]}" not in _closes(ops)


def test_the_request_closes_when_the_test_is_written_and_passes(requests_are_requests):
    s, user, evidence = _two_part_session(with_test=True)
    ops = _propose(s.entries)
    [done] = _added(ops, "done:")
    assert done["completes"] == f"pin:{user.entry_hash[:16]}"
    close = _closes(ops)[f"pin:{user.entry_hash[:16]}"]
    # the fix's edit and run, the test file and its passing run: each part's evidence
    assert close["evidence"] == [r.entry_hash for r in evidence]
    assert close["seq"] == evidence[-1].seq == 9


@pytest.fixture
def pins_are_governing(monkeypatch):
    """Every pin governing (a rule, the objective that states one: docs/design.md 5.2)."""

    def every_pin_governing(entries, state):
        return {f"pin:{e.entry_hash[:16]}": "governing" for e in entries if is_pin_source(e)}

    monkeypatch.setattr(turn_state, "pin_kinds", every_pin_governing)
    monkeypatch.setattr(judges, "pin_kinds", every_pin_governing)


def test_a_governing_pin_gets_its_done_fact_but_no_close(pins_are_governing):
    _, _, _ = s_user_ev = _two_part_session(with_test=True)
    ops = _propose(s_user_ev[0].entries)
    assert len(_added(ops, "done:")) == 1
    assert not any(op["id"].startswith("pin:") for op in ops if op["op"] == "close")


def test_a_test_run_that_fails_after_the_fix_undoes_it(requests_are_requests):
    s, user, _ = _two_part_session(with_test=True)
    s.run("pytest -q", "1 failed, 40 passed in 2.0s", code=1)
    ops = _propose(s.entries)
    assert _added(ops, "done:") == []


# ------------------------------------------------------------------ numbered problems

PROBLEMS = """I found six problems, please fix them one by one:
1. The export crashes on an empty invoice list (reports/export.py).
2. Refund rounding is wrong for JPY amounts in billing/currency.py.
3. Login hangs when the session cookie is expired.
4. The CSV header is missing the tax column.
5. Dates in the PDF footer use the server timezone.
6. The admin search ignores archived customers.
"""


def _problems_session() -> tuple[_Session, EntryView, dict[int, list[EntryView]]]:
    s = _Session()
    user = s.say("user", PROBLEMS)
    fixed = {1: [s.edit("reports/export.py", "rows[0]", "rows[0] if rows else None")]}
    fixed[1].append(s.run("pytest -q tests/test_export.py", "5 passed in 0.2s"))
    fixed[2] = [s.edit("billing/currency.py", "round(x, 2)", "round(x, DIGITS[code])")]
    fixed[2].append(s.run("pytest -q tests/test_currency.py", "9 passed in 0.3s"))
    s.run("grep -n cookie auth/session.py", "41:    if cookie.expired: wait_forever()")
    s.say(
        "assistant",
        "Problems 1 and 2 are fixed. Problem 3: login waits forever on an "
        "expired cookie (auth/session.py line 41); next I will change that.",
    )
    return s, user, fixed


def test_a_numbered_list_is_one_obligation_per_problem():
    assert numbered_items(PROBLEMS) == [
        "The export crashes on an empty invoice list (reports/export.py).",
        "Refund rounding is wrong for JPY amounts in billing/currency.py.",
        "Login hangs when the session cookie is expired.",
        "The CSV header is missing the tax column.",
        "Dates in the PDF footer use the server timezone.",
        "The admin search ignores archived customers.",
    ]
    assert numbered_items("1. only one item") is None
    assert numbered_items("1. a\n3. b") is None  # not numbered in order


def test_six_problems_two_fixed_close_two_obligations_with_their_evidence(requests_are_requests):
    s, user, fixed = _problems_session()
    ops = _propose(s.entries)
    parts = _added(ops, "part:")
    assert [p["part"] for p in parts] == [1, 2, 3, 4, 5, 6]
    assert {p["priority"] for p in parts} == {"P1"} and parts[0][
        "request"
    ] == f"pin:{user.entry_hash[:16]}"
    assert parts[2]["text"] == (
        "Request part 3 of 6 (the user's list at seq 1): Login hangs when the session cookie "
        "is expired."
    )
    closes = _closes(ops)
    h = user.entry_hash[:16]
    assert set(closes) == {f"part:{h}.1", f"part:{h}.2"}  # the request itself stays open
    for n in (1, 2):
        assert closes[f"part:{h}.{n}"]["evidence"] == [r.entry_hash for r in fixed[n]]
        assert closes[f"part:{h}.{n}"]["seq"] == fixed[n][-1].seq

    state = _fold(reducer.EMPTY_STATE, s.entries, ops, 1)
    assert [r.reason for r in state.results if r.status != "accepted"] == []
    status = {
        f["part"]: f["lifecycle"]
        for f in state.state["facts"].values()
        if f["id"].startswith("part:")
    }
    assert status == {1: "closed", 2: "closed", 3: "active", 4: "active", 5: "active", 6: "active"}
    assert state.state["facts"][f"pin:{h}"]["lifecycle"] == "active"


def test_the_assistant_naming_a_problem_binds_the_change_and_the_passing_run(
    requests_are_requests,
):
    """A patch that shares no word with its problem ("The CSV export drops the last row." /
    ``rows[:-1]`` -> ``rows`` in app/export.py) closes it when a passing run follows and
    the assistant says which problem it was; "diagnosed ... not fixed yet" closes nothing."""
    s = _Session()
    user = s.say("user", PROBLEMS)
    first = [s.edit("app/csv_out.py", "rows[:-1]", "rows"), s.run("pytest -q", "4 passed")]
    s.say("assistant", "Problem 1 is fixed: the export keeps its last row.")
    s.run("grep -n cookie auth/session.py", "41: wait_forever()")
    s.say("assistant", "Problem 3 diagnosed: the session waits forever. Not fixed yet.")
    s.say("assistant", "Problem 2 is fixed.")  # nothing changed since problem 1: no evidence
    ops = _propose(s.entries)
    h = user.entry_hash[:16]
    closes = _closes(ops)
    assert set(closes) == {f"part:{h}.1"}
    assert closes[f"part:{h}.1"]["evidence"] == [r.entry_hash for r in first]
    assert closes[f"part:{h}.1"]["seq"] == first[-1].seq


def test_every_problem_closed_by_name_closes_the_request_and_the_rules_agree(
    requests_are_requests,
):
    from ledger_app.model_writer.compose import _compose_offline
    from ledger_app.model_writer.judges import FoldContext

    s = _Session()
    user = s.say("user", PROBLEMS)
    for n in range(1, 7):
        s.edit(f"app/mod{n}.py", "old", "new")
        s.run("pytest -q", f"{n} passed")
        s.say("assistant", f"Problem {n} is fixed.")
    ops = _propose(s.entries)
    pin = f"pin:{user.entry_hash[:16]}"
    assert pin in _closes(ops) and len(_closes(ops)[pin]["evidence"]) == 12
    composed = _compose_offline(OfflineWriter(), s.entries, {"facts": {}}, FoldContext(1, 19), {})
    rejected = [i.key for i in composed.rounds[0].items if not i.accepted]
    assert rejected == [] and any(op.get("id") == pin for op in composed.ops)


def test_an_edit_alone_does_not_close_a_problem(requests_are_requests):
    s = _Session()
    s.say("user", PROBLEMS)
    s.edit("reports/export.py", "rows[0]", "rows[0] if rows else None")
    ops = _propose(s.entries)
    assert len(_added(ops, "part:")) == 6 and _closes(ops) == {}


def test_a_governing_list_of_problems_is_still_obligations_and_its_guidelines_are_not():
    """The session's first message is governing (its objective); a list it calls problems
    is still work to do, one obligation per item. A task's numbered guidelines ("IMPORTANT
    TIPS: 1. Always start by ...") are shown whole, never obligations that could not close.
    """
    s = _Session()
    s.say("user", PROBLEMS)  # no pin kinds in this code base: every pin governing
    ops = _propose(s.entries)
    assert len(_added(ops, "part:")) == 6
    assert not any(op["id"].startswith("pin:") for op in ops if op["op"] == "close")
    tips = _Session()
    tips.say(
        "user",
        "IMPORTANT TIPS:\n1. Always start by trying to replicate the bug.\n"
        "2. If you run a command and it doesn't work, try a different command.\n",
    )
    assert _added(_propose(tips.entries), "part:") == []


def test_the_last_problems_close_in_a_later_fold_and_then_the_request(requests_are_requests):
    s, user, _ = _problems_session()
    first = _fold(reducer.EMPTY_STATE, s.entries, _propose(s.entries), 1).state
    first["facts"][f"pin:{user.entry_hash[:16]}"]["pin_kind"] = "request"
    later = _Session()
    later.entries = [_v(n, "message", "assistant", "…") for n in range(1, len(s.entries) + 1)]
    fixes = [
        ("auth/session.py", "Login hangs", "pytest -q tests/test_login.py"),
        ("reports/csv_header.py", "tax column", "pytest -q tests/test_csv.py"),
        ("reports/pdf_footer.py", "timezone", "pytest -q tests/test_pdf.py"),
        ("admin/search.py", "archived customers", "pytest -q tests/test_admin.py"),
    ]
    for path, words, cmd in fixes:
        later.edit(path, "old", f"# {words}: handled\nnew")
        later.run(cmd, "3 passed in 0.1s")
    entries = later.entries[len(s.entries) :]
    ops = _propose(entries, first)
    closes = _closes(ops)
    h = user.entry_hash[:16]
    assert set(closes) == {f"part:{h}.{n}" for n in (3, 4, 5, 6)} | {f"pin:{h}"}
    pin_close = closes[f"pin:{h}"]
    assert pin_close["seq"] == entries[-1].seq
    assert len(pin_close["evidence"]) == 12  # two results per part, six parts
    # the fold service loads the active parts and the pins only: the request still closes
    loaded = {
        k: f
        for k, f in first["facts"].items()
        if f.get("pin") or (k.startswith("part:") and f["lifecycle"] == "active")
    }
    closes = _closes(_propose(entries, {"facts": loaded}))
    assert closes[f"pin:{h}"]["seq"] == entries[-1].seq
    assert len(closes[f"pin:{h}"]["evidence"]) == 8  # this fold's: parts 3 to 6
    # the rules accept that close when the state holds parts 1 and 2 closed (what a fold
    # loads: request_part_ids), and refuse it without them
    from ledger_app.offline.request_parts import request_part_ids

    pin = first["facts"][f"pin:{h}"]
    assert request_part_ids({pin["id"]: pin}) == {f"part:{h}.{n}" for n in range(1, 7)}
    with_parts = {
        k: f for k, f in first["facts"].items() if k.startswith("part:") or k == pin["id"]
    }
    assert _judge(closes[f"pin:{h}"], entries, with_parts).accepted
    verdict = _judge(closes[f"pin:{h}"], entries, {pin["id"]: pin})
    assert verdict.temporal == "invalid" and "The export crashes" in verdict.temporal_reason


# ------------------------------------------------------------------ decisions, pure


@pytest.mark.parametrize(
    ("text", "how"),
    [
        ("Yes, approved.", Acceptance(strong=True)),
        ("approved", Acceptance(strong=True)),
        ("Yes.", Acceptance()),
        ("Sure, my user id is sofia_kim_7287", Acceptance()),
        ("Do it.", Acceptance(strong=True)),
        ("Go with option 2.", Acceptance(option=2, strong=True)),
        ("Let's go with the second one", Acceptance(option=2, strong=True)),
        (
            "Take option 2, but replace 'audit' with 'verify'.",
            Acceptance(option=2, edited=True, strong=True),
        ),
        ("Please proceed.", Acceptance(strong=True)),
        ("Thanks. Yes, let's go with the economy class.", Acceptance()),
        ("No, wait.", None),
        ("Thanks, that's all.", None),
        ("Why did the export crash?", None),
        ("Yes " + "and more words " * 40, None),  # too long: a new request
    ],
)
def test_what_counts_as_an_acceptance(text, how):
    assert acceptance(text) == how


def test_the_accepted_text_is_the_option_or_the_quoted_restatement_exactly():
    offered = (
        "Three headlines:\n1. Ledgerkeep: never lose the source\n2. **Compaction you can audit**\n"
        "3. The ledger that cites its journal\nWhich one do you prefer?"
    )
    assert options(offered)[2] == "Compaction you can audit"
    assert accepted_text(offered, Acceptance(option=3)) == (
        "The ledger that cites its journal",
        "option 3",
    )
    restated = 'Updated option 2: "Compaction you can verify, byte for byte". Shall I use it?'
    assert proposal_body(restated) == "Compaction you can verify, byte for byte"
    assert awaits_approval(restated) and not awaits_approval("Done: the tests pass.")


# ------------------------------------------------------------------ decisions in the writer

OFFER = (
    "Three headlines for the README:\n1. Ledgerkeep: never lose the source\n"
    "2. Compaction you can audit\n3. The ledger that cites its journal\nWhich option do you prefer?"
)
RESTATED = 'Here is option 2 with your change: "Compaction you can verify". Shall I use it?'


def _headline_session() -> _Session:
    s = _Session()
    s.say("user", "Propose three headlines for the README.")
    s.say("assistant", OFFER)
    s.say("user", "Take option 2, but replace 'audit' with 'verify'.")
    s.say("assistant", RESTATED)
    s.say("user", "Yes, approved.")
    return s


def test_an_edited_option_is_decided_when_its_restatement_is_approved():
    s = _headline_session()
    ops = _propose(s.entries)
    [decision] = _added(ops, "approval:")
    assert decision["category"] == "decision" and decision["priority"] == "P1"
    assert decision["decision_text"] == "Compaction you can verify"
    assert decision["text"] == (
        'User approved (seq 5) the proposal proposed at seq 4: "Compaction you can verify"'
    )
    proposal, accept = decision["support"]
    assert proposal["entry"] == s.entries[3].entry_hash
    assert proposal["quote"] == "Compaction you can verify" and "range" in proposal
    assert accept["entry"] == s.entries[4].entry_hash and accept["quote"] == "Yes, approved."
    # "Take option 2, but ..." decides nothing by itself
    assert decision["id"] == f"approval:{s.entries[4].entry_hash[:16]}"
    assert len(_added(ops, "approval:")) == 1
    result = _fold(reducer.EMPTY_STATE, s.entries, ops, 1)
    assert [r.reason for r in result.results if r.status != "accepted"] == []


def test_a_chosen_option_is_quoted_exactly():
    s = _Session()
    s.say("assistant", OFFER)
    s.say("user", "Go with option 3")
    [decision] = _added(_propose(s.entries), "approval:")
    assert decision["decision_text"] == "The ledger that cites its journal"
    assert decision["accepted"] == "option 3"


def test_an_approval_in_the_next_fold_answers_the_awaited_approval():
    s = _headline_session()
    first_entries, second_entries = s.entries[:4], s.entries[4:]
    first_ops = _propose(first_entries)
    [waiting] = _added(first_ops, "await:")
    assert waiting["category"] == "open_obligation" and waiting["command_key"] == AWAIT_KEY
    assert waiting["proposal_text"] == "Compaction you can verify"
    state = _fold(reducer.EMPTY_STATE, first_entries, first_ops, 1).state
    ops = _propose(second_entries, state)
    [op] = [o for o in ops if o.get("fact", {}).get("id", "").startswith("approval:")]
    assert op["op"] == "supersede" and op["id"] == waiting["id"]
    assert op["fact"]["decision_text"] == "Compaction you can verify"
    assert op["fact"]["support"][0] == {
        "entry": s.entries[3].entry_hash,
        "quote": "Compaction you can verify",
    }
    after = _fold(state, second_entries, ops, 2, first_entries)
    assert [r.reason for r in after.results if r.status != "accepted"] == []
    assert after.state["facts"][waiting["id"]]["lifecycle"] == "superseded"


def test_a_refusal_answers_the_awaited_approval_without_a_decision():
    s = _Session()
    s.say("assistant", "Shall I drop the table orders_old?")
    state = _fold(reducer.EMPTY_STATE, s.entries, _propose(s.entries), 1).state
    no = _v(2, "message", "user", "No, keep it for now.")
    ops = _propose([no], state)
    assert _added(ops, "approval:") == []
    [cancel] = [o for o in ops if o["op"] == "cancel"]
    assert cancel["evidence"] == [no.entry_hash]
    after = _fold(state, [no], ops, 2, s.entries)
    assert after.state["facts"][cancel["id"]]["lifecycle"] == "cancelled"


def test_a_yes_that_answers_a_question_is_no_decision():
    s = _Session()
    s.say("assistant", "Could you please provide your user ID?")
    s.say("user", "Sure, my user id is sofia_kim_7287")
    s.run("get_user_details sofia_kim_7287", '{"name": "Sofia"}')
    assert _added(_propose(s.entries), "approval:") == []


def test_an_approval_with_no_proposal_quotes_only_the_users_words():
    s = _Session()
    s.say("user", "Yes, do it.")
    [decision] = _added(_propose(s.entries), "approval:")
    assert decision["bound"] is False
    assert decision["decision_text"] == "Yes, do it."
    assert decision["text"] == 'User approved (seq 1), with no proposal before it: "Yes, do it."'
    assert [i["entry"] for i in decision["support"]] == [s.entries[0].entry_hash]


def _wave_session(migration_code: int = 0) -> _Session:
    s = _Session()
    s.say("user", "Run the plan in waves W1-W6; ask me before W4.")
    s.say(
        "assistant",
        "W1-W3 are done. W4 applies migration 0042 to staging. Shall I run W4 against staging?",
    )
    s.say("user", "Approved: run W4 against staging now.")
    s.run("cat deploy/waves.md", "W4: migrate 0042")  # a read consumes nothing
    s.run(
        "python manage.py migrate billing 0042 --settings=config.staging",
        "Applying billing.0042_split_ledger... OK" if migration_code == 0 else "FAILED",
        code=migration_code,
    )
    return s


def test_an_approval_is_consumed_by_the_migration_it_approved():
    s = _wave_session()
    ops = _propose(s.entries)
    [decision] = _added(ops, "approval:")
    assert decision["decision_text"] == (
        "W1-W3 are done. W4 applies migration 0042 to staging. Shall I run W4 against staging?"
    )
    migration = s.entries[-1]
    close = _closes(ops)[decision["id"]]
    assert close["evidence"] == [s.entries[-2].entry_hash, migration.entry_hash]
    assert close["seq"] == migration.seq == 7
    assert close["reason"].startswith("used at seq 7: the approved action ran")
    assert decision["text"].endswith('(the user\'s words: "Approved: run W4 against staging now.")')


def test_the_approved_action_also_ends_the_approving_request(requests_are_requests):
    s = _wave_session()
    closes = _closes(_propose(s.entries))
    approving = f"pin:{s.entries[2].entry_hash[:16]}"  # "Approved: run W4 against staging now."
    assert closes[approving]["seq"] == 7
    assert closes[approving]["reason"].startswith("the approved action ran at seq 7")
    assert f"pin:{s.entries[0].entry_hash[:16]}" not in closes  # the plan's request goes on


def test_a_failed_migration_does_not_consume_the_approval():
    ops = _propose(_wave_session(migration_code=1).entries)
    [decision] = _added(ops, "approval:")
    assert decision["id"] not in _closes(ops)


def test_an_approval_in_the_ledger_is_consumed_in_a_later_fold():
    s = _wave_session()
    first = s.entries[:3]
    state = _fold(reducer.EMPTY_STATE, first, _propose(first), 1).state
    [fid] = [k for k in state["facts"] if k.startswith("approval:")]
    closes = _closes(_propose(s.entries[3:], state))
    assert closes[fid]["seq"] == 7


# ------------------------------------------------------------------ through the reducer
# These two need the reducer's close on request pins and on decisions (docs/design.md 5.5).


def test_the_reducer_shows_the_request_done_at_the_seq_of_its_last_evidence(
    requests_are_requests,
):
    s, user, evidence = _two_part_session(with_test=True)
    result = _fold(reducer.EMPTY_STATE, s.entries, _propose(s.entries), 1)
    assert [r.reason for r in result.results if r.status != "accepted"] == []
    pin = result.state["facts"][f"pin:{user.entry_hash[:16]}"]
    assert pin["lifecycle"] == "closed" and pin["text"] == user.text
    assert pin["ended_by"]["evidence"] == [r.entry_hash for r in evidence]
    assert pin["ended_by"]["seq"] == 9


def test_the_reducer_records_the_approval_used_at_the_migrations_seq():
    s = _wave_session()
    result = _fold(reducer.EMPTY_STATE, s.entries, _propose(s.entries), 1)
    assert [r.reason for r in result.results if r.status != "accepted"] == []
    [decision] = [f for f in result.state["facts"].values() if f["id"].startswith("approval:")]
    assert decision["lifecycle"] == "closed" and decision["ended_by"]["seq"] == 7
    assert decision["decision_text"].startswith("W1-W3 are done. W4 applies migration 0042")


# ------------------------------------------------------------------ the model writer's rules


def _judge(op: dict, entries: list[EntryView], facts: dict | None = None):
    from ledger_app.model_writer import closure_judgement
    from ledger_app.offline import EvidenceIndex

    return closure_judgement(op, EvidenceIndex(entries), {"facts": facts or {}})


def _request_pin(view: EntryView, kind: str = "request") -> dict[str, Any]:
    return {**pin_fact(view), "pin_kind": kind}


def test_a_model_close_of_a_two_action_request_needs_evidence_for_each_part():
    s, user, evidence = _two_part_session(with_test=True)
    pin = _request_pin(user)
    facts = {pin["id"]: pin}
    one_edit = {"op": "close", "id": pin["id"], "evidence": [evidence[0].entry_hash]}
    verdict = _judge(one_edit, s.entries, facts)
    assert verdict.temporal == "invalid"
    assert "'add a regression test.'" in verdict.temporal_reason
    assert "'Fix the crash in billing/refunds.py'" in verdict.temporal_reason  # no run after
    every = {"op": "close", "id": pin["id"], "evidence": [r.entry_hash for r in evidence]}
    assert _judge(every, s.entries, facts).accepted


def test_a_governing_pin_never_closes_whatever_the_evidence():
    s, user, evidence = _two_part_session(with_test=True)
    pin = _request_pin(user, "governing")
    op = {"op": "close", "id": pin["id"], "evidence": [r.entry_hash for r in evidence]}
    verdict = _judge(op, s.entries, {pin["id"]: pin})
    assert verdict.temporal == "invalid" and "governing pin never closes" in verdict.temporal_reason


def test_a_model_close_of_a_decision_needs_the_action_after_it():
    s = _wave_session()
    decision = {
        "id": "w1.0.d1",
        "category": "decision",
        "lifecycle": "active",
        "text": "The user approved running W4 against staging",
        "support": [{"entry": s.entries[1].entry_hash}, {"entry": s.entries[2].entry_hash}],
    }
    read, migration = s.entries[4], s.entries[6]
    by_read = {"op": "close", "id": "w1.0.d1", "evidence": [read.entry_hash]}
    verdict = _judge(by_read, s.entries, {"w1.0.d1": decision})
    assert verdict.temporal == "invalid" and "approved action" in verdict.temporal_reason
    by_migration = {"op": "close", "id": "w1.0.d1", "evidence": [migration.entry_hash]}
    assert _judge(by_migration, s.entries, {"w1.0.d1": decision}).accepted


def test_a_model_decision_must_quote_what_was_approved_exactly():
    s = _headline_session()
    support = [{"entry": s.entries[3].entry_hash}, {"entry": s.entries[4].entry_hash}]
    exact = {"category": "decision", "priority": "P1", "support": support}
    quoted = {"op": "add", "fact": {**exact, "decision_text": "Compaction you can verify"}}
    assert _judge(quoted, s.entries).accepted
    paraphrase = {"op": "add", "fact": {**exact, "decision_text": "A headline about verifying"}}
    verdict = _judge(paraphrase, s.entries)
    assert verdict.entailment == "not_entailed" and "quoted exactly" in verdict.entailment_reason


def test_a_consequential_fact_is_p1():
    s = _wave_session()
    fact = {
        "category": "verified_state",
        "priority": "P2",
        "consequential": True,
        "support": [{"entry": s.entries[-1].entry_hash}],
    }
    verdict = _judge({"op": "add", "fact": fact}, s.entries)
    assert verdict.entailment == "not_entailed" and "P1" in verdict.entailment_reason
    assert _judge({"op": "add", "fact": {**fact, "priority": "P1"}}, s.entries).accepted


def test_the_verifier_is_shown_a_request_close_with_the_parts_to_check():
    from ledger_app.model_writer import FoldContext, ItemRecord, load_prompt
    from ledger_app.model_writer.messages import verifier_messages
    from ledger_app.offline import EvidenceIndex

    s, user, evidence = _two_part_session(with_test=True)
    pin = _request_pin(user)
    op = {"op": "close", "id": pin["id"], "evidence": [evidence[0].entry_hash], "seq": 3}
    item = ItemRecord(key="c1", op=op, claim="close", support=[evidence[0].entry_hash])
    sent = verifier_messages(
        load_prompt("verifier-v2"),
        [item],
        EvidenceIndex(s.entries),
        {"facts": {pin["id"]: pin}},
        FoldContext(2, 9),
    )
    payload = json.loads(sent[1]["content"].split("\n", 1)[1])
    target = payload["items"][0]["target"]
    assert target["pin_kind"] == "request"
    assert target["parts"] == ["Fix the crash in billing/refunds.py", "add a regression test."]
    assert "Judge every closure" in sent[0]["content"]


@pytest.mark.parametrize(("tests_pass", "closes"), [(True, True), (False, False)])
def test_a_run_that_submits_its_fix_with_tests_passing_closes_its_request(
    requests_are_requests, tests_pass, closes
):
    s = _Session()
    user = s.say("user", "Fix issue #4417: `parse_duration('1h30m')` returns 90 seconds.")
    s.edit("src/durations.py", "return hours * 60 + minutes", "return hours * 3600 + minutes * 60")
    if tests_pass:
        s.run("pytest tests/test_durations.py -q", "11 passed in 0.05s")
    else:
        s.run("pytest tests/test_durations.py -q", "1 failed, 10 passed in 0.05s", code=1)
    submitted = s._pair("submit", {}, "Submitted the patch (1 file changed).", False, None)
    ops = _propose(s.entries)
    pin = f"pin:{user.entry_hash[:16]}"
    assert (pin in _closes(ops)) is closes
    if closes:
        assert _closes(ops)[pin]["seq"] == submitted.seq


def test_an_approval_with_no_proposal_is_not_used_by_an_unrelated_action():
    s = _Session()
    s.say("user", "Approved.")
    s.edit("billing/flags.py", "DEFAULT = True", "DEFAULT = False")
    ops = _propose(s.entries)
    [decision] = [
        op["fact"] for op in ops if op.get("fact", {}).get("id", "").startswith("approval:")
    ]
    assert decision["id"] not in _closes(ops)  # nothing says the edit is what was approved


def test_the_edit_an_approval_confirmed_is_done_when_the_approved_text_is_used(
    requests_are_requests,
):
    s = _headline_session()
    s.create("README.md", "# Compaction you can verify\n")
    ops = _propose(s.entries)
    closes = _closes(ops)
    edit, accept = s.entries[2], s.entries[4]
    # "Take option 2, but replace ..." and "Yes, approved." both end with the use
    assert {f"pin:{edit.entry_hash[:16]}", f"pin:{accept.entry_hash[:16]}"} <= set(closes)
    result = _fold(reducer.EMPTY_STATE, s.entries, ops, 1)
    assert [r.reason for r in result.results if r.status != "accepted"] == []
