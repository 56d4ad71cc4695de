"""Ledger fidelity (docs/design.md 5.2, 5.5, 6): the scorer, the hard rules on every item, the command.

The hard rules run over every case of tests/fixtures/cases (a copy of shared/cases) and every
scenario of tests/scenarios, each folded by the offline writer into a fresh journal and its
context built at the item's small budget, through the one service
(:func:`ledger_app.eval_service.eval_ledger`). The pure scorer is tested on hand-made states.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from journal_app.models import Journal
from journal_app.tokens import count_tokens
from ledger_app.eval_service import CASES_DIR, SCENARIOS_DIR, eval_ledger
from ledger_app.evaluation import (
    HARD_RULES,
    RULES,
    ContextView,
    ItemScore,
    load_items,
    load_scenario,
    score,
    table,
)

ITEMS = load_items(CASES_DIR, SCENARIOS_DIR)
SYSTEM = "You are careful."
DONE = "Rename a to b in x.py."


def _pin(fid: str, text: str, lifecycle: str = "active", **kw: Any) -> dict[str, Any]:
    return {
        "id": fid,
        "category": "objective",
        "priority": "P0",
        "lifecycle": lifecycle,
        "confidence": "verified",
        "text": text,
        "support": [{"entry": "a" * 64}],
        "pin": True,
        "author": "code",
        **kw,
    }


def _view(*messages: tuple[str, str]) -> dict[str, Any]:
    return {"messages": [{"role": r, "content": c} for r, c in messages]}


def _rules(results) -> dict[str, Any]:
    return {r.rule: r for r in results}


# ---------------------------------------------------------------------------- the scorer


def test_a_done_request_with_an_active_pin_fails_and_a_closed_one_holds():
    expected = {"requests_done": [DONE], "governing": [SYSTEM]}
    view = _view(
        ("system", SYSTEM),
        ("user", "[ledger checkpoint: ...]\n- done at seq 2: " + DONE + " evidence sha256:ab"),
        ("user", "next"),
    )
    active = {"facts": {"p": _pin("p", DONE, pin_kind="request")}}
    r = _rules(score(expected, state=active, model_view=view, status="ok"))
    assert (
        not r["done_not_current"].held
        and "its pin is active (request)" in (r["done_not_current"].failed[0])
    )
    assert r["governing_verbatim"].held and r["governing_verbatim"].checked == 1
    closed = {"facts": {"p": _pin("p", DONE, "closed", pin_kind="request")}}
    r = _rules(score(expected, state=closed, model_view=view, status="ok"))
    assert r["done_not_current"].held and r["done_not_current"].cell() == "ok 1"


def test_a_done_request_is_current_as_a_pin_before_the_checkpoint_or_a_pending_line():
    closed = {"facts": {"p": _pin("p", DONE, "closed", pin_kind="request")}}
    before = _view(("user", DONE), ("user", "[ledger checkpoint: x]"), ("user", "next"))
    r = _rules(score({"requests_done": [DONE]}, state=closed, model_view=before, status="ok"))
    assert r["done_not_current"].failed == [
        f"{DONE!r}: shown as current in message 0 (a verbatim pin before the checkpoint)"
    ]
    pending = _view(("user", "[ledger checkpoint: x]\npending:\n- " + DONE))
    r = _rules(score({"requests_done": [DONE]}, state=closed, model_view=pending, status="ok"))
    assert "shown as current in message 0" in r["done_not_current"].failed[0]
    for done in ("- done at seq 4: ", "- done (seq 4): ", "  - [done] "):
        line = _view(
            ("user", "[continuation record]\n" + done + DONE), ("user", "[ledger checkpoint]")
        )
        r = _rules(score({"requests_done": [DONE]}, state=closed, model_view=line, status="ok"))
        assert r["done_not_current"].held, done
    # verbatim history after the checkpoint is the conversation as it happened
    after = _view(("user", "[ledger checkpoint: x]"), ("user", DONE), ("tool", "ok"))
    r = _rules(score({"requests_done": [DONE]}, state=closed, model_view=after, status="ok"))
    assert r["done_not_current"].held


def test_governing_text_must_be_verbatim_and_a_failed_build_loses_it():
    expected = {"governing": [SYSTEM, "RULE 1: never push."]}
    view = _view(("system", SYSTEM), ("user", "RULE 1: never  push."))
    r = _rules(score(expected, state={"facts": {}}, model_view=view, status="ok"))
    assert r["governing_verbatim"].cell() == "FAIL 1/2"
    r = _rules(
        score(expected, state={"facts": {}}, model_view=None, status="failed", reason="too big")
    )
    assert r["governing_verbatim"].cell() == "FAIL 2/2"
    assert r["context_built"].failed == ["status failed: too big"]


def test_a_decision_must_quote_the_text_exactly_and_be_consumed_when_it_ran():
    text = "Scan every invoice in seconds, not hours"
    expected = {"decisions": [{"text": text, "consumed": True}]}
    view = _view(("user", f"[ledger checkpoint]\n- decision: {text}"))
    near = {
        "facts": {
            "d": {**_pin("d", "Approved: scan every invoice in seconds"), "category": "decision"}
        }
    }
    r = _rules(score(expected, state=near, model_view=view, status="ok"))
    assert r["decision_exact"].failed == [f"{text!r}: no decision fact quotes it exactly"]
    quoted = {
        "facts": {
            "d": {
                "id": "d",
                "category": "decision",
                "priority": "P1",
                "lifecycle": "closed",
                "text": "The user approved the restated headline.",
                "support": [{"entry": "b" * 64, "quote": f'Final text: "{text}".'}],
            }
        }
    }
    r = _rules(score(expected, state=quoted, model_view=view, status="ok"))
    assert r["decision_exact"].held and r["decision_consumed"].held
    r = _rules(score(expected, state=quoted, model_view=_view(("user", "x")), status="ok"))
    assert r["decision_exact"].failed == [f"{text!r}: a decision quotes it, the context does not"]


def test_soft_rules_blockers_items_and_overclaims():
    blocker = {
        "id": "t",
        "category": "blocker",
        "priority": "P1",
        "lifecycle": "active",
        "confidence": "verified",
        "text": "FAILED: test run `pytest -q`: 1 failed",
    }
    obligation = {**blocker, "id": "o", "category": "open_obligation", "text": "[todo] Add test"}
    claim = {**blocker, "id": "c", "category": "verified_state", "text": "All tests pass"}
    state = {"facts": {"t": blocker, "o": obligation, "c": claim}}
    expected = {
        "blockers_open": ["pytest -q"],
        "blockers_closed": ["pytest -q"],
        "items_pending": ["Add test"],
        "items_done": ["Add test"],
        "not_verified": ["all tests pass"],
    }
    r = _rules(score(expected, state=state, model_view=_view(("user", "x")), status="ok"))
    assert r["blockers"].cell() == "FAIL 1/2"
    assert r["items"].cell() == "FAIL 1/2"
    assert r["no_overclaim"].failed == ["'all tests pass': fact c holds it as verified"]
    assert not any(RULES[n][0] for n in ("blockers", "items", "no_overclaim"))


def test_mandatory_state_bound_counts_pins_and_p1():
    state = {"facts": {"p": _pin("p", "word " * 300)}}
    r = _rules(score({"max_mandatory_tokens": 100}, state=state, model_view=None, status="ok"))
    assert r["mandatory_bounded"].failed[0].startswith("3")
    assert "governing 3" in r["mandatory_bounded"].failed[0]


def test_scenarios_unroll_repeats_and_expand_placeholders(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps(
            {
                "expand": {"<LOG>": 500},
                "messages": [
                    {"role": "user", "content": "see\n<LOG>\nthere"},
                    {"$repeat": 3, "messages": [{"role": "user", "content": "do {i}"}]},
                ],
                "expected": {"requests_done": [{"$repeat": 2, "text": "do {i}"}]},
            }
        )
    )
    item = load_scenario(path)
    assert [m["content"] for m in item.messages[1:]] == ["do 1", "do 2", "do 3"]
    assert item.expected["requests_done"] == ["do 1", "do 2"]
    body = item.messages[0]["content"]
    assert body.startswith("see\nLOG line 000000: value ok\n") and body.endswith("\nthere")
    assert 450 <= count_tokens(body) <= 520 and item.name == "s"


def test_every_item_loads_with_its_expectations():
    names = [i.name for i in ITEMS]
    for required in (
        "waves-approval",
        "numbered-problems",
        "approved-wording",
        "premature-all-pass",
        "pasted-log",
        "short-requests-200",
        "ends-submitted",
    ):
        assert required in names
    assert sum(1 for i in ITEMS if i.origin == "case") == len(list(CASES_DIR.glob("*.json")))
    seven = next(i for i in ITEMS if i.name.startswith("07"))
    assert any(t.startswith("RULE 2: Never commit") for t in seven.expected["governing"])
    short = next(i for i in ITEMS if i.name == "short-requests-200")
    assert len(short.expected["requests_done"]) == 199 and len(short.messages) == 1 + 199 * 4 + 1
    paste = next(i for i in ITEMS if i.name == "pasted-log")
    assert 9_500 <= count_tokens(paste.messages[1]["content"]) <= 10_100


def test_context_view_marks_the_checkpoint_and_task_state():
    v = ContextView.of(
        _view(("system", "s"), ("user", "[ledger checkpoint: 2]"), ("user", "[task state: x]"))
    )
    assert v.checkpoint == 1 and v.derived == {1, 2}
    label = ContextView.of(_view(("user", "[continuation record]\nx"), ("user", "[x] y")))
    assert label.derived == {0} and label.checkpoint is None
    assert ContextView.of(None).texts == []


def test_the_table_marks_hard_rules_and_totals():
    held = ItemScore("a", "case", score({}, state={}, model_view=_view(), status="ok"))
    bad = ItemScore(
        "b", "scenario", score({"governing": ["x"]}, state={}, model_view=_view(), status="ok")
    )
    lines = table([held, bad])
    assert "governing_verbatim*" in lines[0] and "context_built " in lines[0] + " "
    assert "FAIL 1/1" in lines[3]
    assert lines[-1].split()[:3] == ["held", "(items)", "-"]
    assert bad.hard_failed == ["governing_verbatim"] and held.hard_failed == []


# ---------------------------------------------------------------------------- hard rules on every item

_scores: dict[str, ItemScore] = {}


def _scored(name: str) -> ItemScore:
    if name not in _scores:
        report = eval_ledger(writer="offline", names=[name])
        _scores[name] = next(s for s in report.scores if s.name == name)
    return _scores[name]


@pytest.mark.django_db
@pytest.mark.parametrize("rule", HARD_RULES)
@pytest.mark.parametrize("name", [i.name for i in ITEMS])
def test_hard_rule_holds_with_the_offline_writer(name, rule):
    s = _scored(name)
    assert not s.error, s.error
    result = next(r for r in s.rules if r.rule == rule)
    assert result.held, f"{name}: {rule}: " + "; ".join(result.failed[:5])


# ---------------------------------------------------------------------------- the command


@pytest.mark.django_db
def test_the_command_prints_the_table_and_exits_zero_when_the_hard_rules_hold(capsys):
    call_command("eval_ledger", "--case", "08")
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("08-agent-constraints-lost"))
    assert row.split()[1:4] == ["-", "ok", "1"]  # no done request; governing held on 1
    assert "hard rules (done_not_current, governing_verbatim, decision_exact): held" in out
    assert not Journal.objects.exists()  # nothing kept


@pytest.mark.django_db
def test_the_command_exits_non_zero_on_a_hard_failure_and_speaks_json(tmp_path, capsys):
    (tmp_path / "lost.json").write_text(
        json.dumps(
            {
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Say hi."},
                ],
                "expected": {"governing": ["Be brief.", "A rule nobody wrote."]},
            }
        )
    )
    with pytest.raises(CommandError, match="hard rules failed: governing_verbatim"):
        call_command("eval_ledger", "--json", "--scenarios", str(tmp_path), "--case", "lost")
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["hard_failures"] == [["lost", "governing_verbatim"]]
    rule = next(r for r in report["items"][0]["rules"] if r["rule"] == "governing_verbatim")
    assert rule["checked"] == 2 and rule["failed"] == [
        "'A rule nobody wrote.': not verbatim in the context"
    ]
    with pytest.raises(CommandError, match="no case or scenario named nope"):
        call_command("eval_ledger", "--case", "nope")


# ---------------------------------------------------------------------------- the bench rows


def test_mandatory_bench_rows_say_the_target_the_exemption_and_the_exponent(settings):
    from bench.mandatory_state import exponent, summary_rows

    settings.LEDGER_CHECKPOINT_TARGET_TOKENS = 20_000
    ok = {"status": "ok", "tokens": 900, "seconds": 0.1, "reason": ""}
    rows = [
        {
            "entries": 2_000,
            "governing_tokens": 1_000,
            "request_tokens": 0,
            "p1_tokens": 1_000,
            "mandatory_tokens": 2_000,
            "under_target": True,
            "contexts": {270_000: ok, 128_000: {**ok, "status": "failed"}},
        },
        {
            "entries": 20_000,
            "governing_tokens": 30_000,
            "request_tokens": 0,
            "p1_tokens": 10_000,
            "mandatory_tokens": 40_000,
            "under_target": True,
            "contexts": {270_000: ok, 128_000: ok},
            "page": {
                "page_seconds": 3.0,
                "service_seconds": 2.5,
                "trim_seconds": 1.0,
                "working_budget": 32_000,
            },
        },
    ]
    exp = exponent(rows)
    assert exp == 1.301  # 20 times the tokens over 10 times the entries: log(20) / log(10)
    out = summary_rows(rows, exp)
    # the 20k page: 3.0 s against a 2 s goal and 3x trim_messages against 2x (a 2k row
    # without a page timing has no page row)
    assert [r["met"] for r in out] == [True, True, False, True, True, True, False, False]
    assert (
        out[-2]["metric"].startswith("context page at 20,000 entries") and out[-2]["ratio"] == 3.0
    )
    assert out[3]["metric"].endswith(": governing alone is over the target")
    assert out[-1]["metric"] == "mandatory state exponent over entries (2,000 -> 20,000)"
    assert exponent(rows[:1]) is None
    # one length: no exponent, and no verdict on it (not a miss)
    assert "met" not in summary_rows(rows[:1], None)[-1]


@pytest.mark.django_db
def test_mandatory_bench_measures_a_folded_generated_session():
    from bench.mandatory_state import measure

    row = measure(300)
    assert row["entries"] >= 300 and row["folds"] >= 1
    assert row["mandatory_tokens"] == (
        row["governing_tokens"] + row["request_tokens"] + row["p1_tokens"]
    )
    assert row["governing_tokens"] > 0 and set(row["contexts"]) == {270_000, 128_000}
    assert row["contexts"][270_000]["status"] == "ok"


def test_no_items_and_a_file_that_is_not_a_scenario_are_errors_naming_the_folder_and_file(
    tmp_path,
):
    from ledger_app.evaluation import ScenarioInvalid, load_items

    with pytest.raises(LookupError, match="no case or scenario in /nowhere"):
        load_items("/nowhere", None)
    bad = tmp_path / "chat.json"
    bad.write_text('[{"role": "user", "content": "hi"}]')
    with pytest.raises(ScenarioInvalid, match=r"chat\.json: not a scenario"):
        load_items(None, tmp_path)


# ---------------------------------------------------------------------------- what a run says


@pytest.mark.django_db
def test_an_empty_case_name_or_a_missing_folder_is_an_error_not_every_item(tmp_path):
    with pytest.raises(CommandError, match=r"--case needs a name or its prefix"):
        call_command("eval_ledger", "--case", "")
    with pytest.raises(CommandError, match=r"--cases /nonexistent: no such folder"):
        call_command("eval_ledger", "--cases", "/nonexistent")
    with pytest.raises(CommandError, match=r"--scenarios .*nowhere: no such folder"):
        call_command("eval_ledger", "--scenarios", str(tmp_path / "nowhere"))


@pytest.mark.django_db
def test_each_item_reports_its_fold_outcomes_and_progress_goes_to_stderr():
    from io import StringIO

    out, err = StringIO(), StringIO()
    call_command("eval_ledger", "--case", "08", "--writer", "mechanical", stdout=out, stderr=err)
    lines = err.getvalue().splitlines()
    assert lines[0].startswith("[1/1] 08-agent-constraints-lost: folding with ")
    assert lines[-1].startswith("[1/1] 08-agent-constraints-lost: hard rules held; folds ")
    assert "fallback" in lines[-1]  # the mechanical writer's folds are fallbacks
    text = out.getvalue()
    assert "folds: 1 fallback (a fallback fold holds mechanical facts only" in text
    report = eval_ledger(writer="offline", names=["08"])
    assert report.outcomes == {"accepted": 1} and report.to_dict()["outcomes"] == {"accepted": 1}
    assert report.scores[0].figures["model_calls"] == 0
    quiet = StringIO()
    call_command("eval_ledger", "--case", "08", "-v", "0", stdout=StringIO(), stderr=quiet)
    assert quiet.getvalue() == ""


@pytest.mark.django_db
def test_a_fold_that_fails_names_its_cause_and_counts_only_the_rules_the_item_checks(settings):
    from tests.support import ScriptedServer

    with ScriptedServer() as server:
        settings.OPENAI_BASE_URL = server.base_url
        settings.WRITER_MODEL = "scripted-writer"
        settings.MODEL_MAX_ATTEMPTS = 1
        settings.MODEL_BACKOFF_SECONDS = 0.01
        server.push_error(500)
        report = eval_ledger(writer="model", names=["08"])
    [s] = report.scores
    assert s.error.startswith("fold failed: ") and "HTTP 500" in s.error
    assert s.hard_failed == ["governing_verbatim"]  # the one hard rule case 08 checks
    assert report.to_dict()["totals"]["decision_exact"] == {"items": 0, "held": 0}
    assert report.to_dict()["totals"]["governing_verbatim"] == {"items": 1, "held": 0}
    row = next(x for x in table(report.scores) if x.startswith("08-"))
    assert row.split()[1:3] == ["-", "ERROR"]  # done_not_current not checked; governing failed
    assert any("HTTP 500" in line for line in report.lines())


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["approved-wording", "waves-approval", "ends-submitted"])
def test_a_model_fold_that_falls_back_still_concludes(settings, name):
    """The lifecycle rules run in every model fold and its fallback (docs/design.md 5.5):
    a model whose every answer is unusable leaves the fold to the mechanical writer, and the
    request still closes on its evidence and "yes, approved" is still a decision. The
    mechanical writer alone holds neither (the rules' own contribution, measured)."""
    from tests.support import ScriptedServer

    with ScriptedServer() as server:
        settings.OPENAI_BASE_URL = server.base_url
        settings.WRITER_MODEL = "scripted-writer"
        server.answer_all("I am not able to answer in JSON.")
        report = eval_ledger(writer="model", names=[name])
    [s] = report.scores
    assert not s.error, s.error
    assert s.figures["outcomes"] == {"fallback": s.figures["outcomes"].get("fallback", 0)}
    assert s.figures["outcomes"]["fallback"] >= 1
    assert s.hard_failed == [], s.hard_failed
    [mechanical] = eval_ledger(writer="mechanical", names=[name]).scores
    assert "done_not_current" in mechanical.hard_failed


@pytest.mark.django_db
def test_an_accepted_model_fold_that_wrote_no_close_still_concludes(settings):
    """A model that answers with valid JSON but records no end (an empty proposal, accepted)
    still gets the request closed and the approval decided by the lifecycle rules."""
    from tests.support import ScriptedServer

    with ScriptedServer() as server:
        settings.OPENAI_BASE_URL = server.base_url
        settings.WRITER_MODEL = "scripted-writer"
        server.answer_all(json.dumps({"facts": [], "verdicts": []}))
        report = eval_ledger(writer="model", names=["approved-wording"])
    [s] = report.scores
    assert s.figures["outcomes"].get("accepted", 0) >= 1, s.figures["outcomes"]
    assert s.hard_failed == [], s.hard_failed
