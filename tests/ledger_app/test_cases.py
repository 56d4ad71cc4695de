"""Each failure case of tests/fixtures/cases/ (a copy of shared/cases/) asserts its ``expected``.

The harness maps a case onto our options (cases/README.md): its ``messages`` go through the
importer of its format into journal entries, ``settings`` become budgets, a tail size and a
:class:`Meter`. With ``token_counter: explicit`` each message costs its figure; a body that
is only a placeholder (``<LOG_A_LARGE>``) is expanded into real text of about that many
tokens, so excerpts and receipts of it are counted honestly. Cases that are about the part
the builder does not own (the writer's prompt) assert the invariant on what the builder
hands the model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from journal_app.formats import parse_path
from journal_app.tokens import count_tokens
from ledger_app.context import build_context, frontend_view
from ledger_app.evaluation import case_messages, load_case
from ledger_app.validation import TASK_STATE_MARK, ArtifactInfo, Meter, validate_request
from tests.ledger_app.test_context import receipts_for, views
from tests.support.offline_fold import offline_fold

CASES = Path(__file__).resolve().parent.parent / "fixtures" / "cases"


def load(name: str) -> dict[str, Any]:
    return load_case(CASES / name)


class Harness:
    """A case as journal entries plus the meter and figures its settings describe."""

    def __init__(self, case: dict[str, Any], tmp_path: Path) -> None:
        self.case = case
        s = case["settings"]
        self.fmt = s.get("format", "openai")
        messages, exact = case_messages(case)  # the one loader (ledger_app.evaluation)
        self.exact = exact
        path = tmp_path / "case.json"
        path.write_text(json.dumps(messages))
        parsed = parse_path(
            path, "anthropic-messages" if self.fmt == "anthropic" else "openai-chat"
        )
        if "previous_summary_index" in s:
            parsed.entries[s["previous_summary_index"]].derived = True
        self.entries = views(parsed.entries)
        self.messages = messages
        counter = s.get("token_counter")
        if counter == "one_per_message":
            self.meter = Meter(count=lambda t: 0, per_message=1, per_request=0)
        elif counter == "chars_div_4":
            self.meter = Meter(
                count=lambda t: len(t) // 4, per_image=s.get("image_token_cost", 1000)
            )
        elif counter == "explicit":
            self.meter = Meter(
                count=lambda t: exact.get(t, count_tokens(t)), per_message=0, per_request=0
            )
        else:
            self.meter = Meter()

    def input_tokens(self) -> int:
        request: Any = self.messages
        return validate_request(request, fmt=self.fmt, meter=self.meter).tokens

    def build(self, budget: int, **kw: Any):
        kw.setdefault("fold", lambda upto: offline_fold(self.entries, upto=upto))
        kw.setdefault("meter", self.meter)
        kw.setdefault("target_format", self.fmt)
        return build_context(
            entries=self.entries,
            working_budget=budget,
            hard_limit=kw.pop("hard_limit", budget),
            **kw,
        )


def request_of(result) -> dict[str, Any]:
    return {k: v for k, v in result.model_view.items() if k != "format"}


def blob(result) -> str:
    return json.dumps(result.model_view, ensure_ascii=False)


def folded(result) -> bool:
    return bool(result.debug_trace["rounds"]["folded_out"])


def test_01_no_tool_result_survives_without_its_call(tmp_path):
    h = Harness(load("01-trim-last-orphan-tool-result.json"), tmp_path)
    result = h.build(h.case["settings"]["budget_tokens"], tail_tokens=2)
    assert result.status == "ok"
    messages = result.model_view["messages"]
    for i, m in enumerate(messages):
        if m["role"] == "tool":
            earlier = {c["id"] for x in messages[:i] for c in x.get("tool_calls") or []}
            assert m["tool_call_id"] in earlier
    assert validate_request(request_of(result), meter=h.meter, working_budget=5).ok
    assert messages[-1] == {"role": "assistant", "content": "Yes, until it is out for delivery."}


def test_03_parallel_results_are_never_split(tmp_path):
    h = Harness(load("03-parallel-tool-calls-split.json"), tmp_path)
    result = h.build(h.case["settings"]["budget_tokens"], tail_tokens=20)
    assert result.status == "ok" and result.report.tokens <= 1000
    messages = result.model_view["messages"]
    ids = [c["id"] for m in messages for c in m.get("tool_calls") or []]
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert ids == results and ids in ([], ["call_1", "call_2"])
    checkpoint = [m for m in messages if str(m.get("content", "")).startswith("[ledger checkpoint")]
    assert all(
        h.meter.text(m["content"]) <= h.case["settings"]["max_summary_tokens"] for m in checkpoint
    )
    # with no room for the shrunk result, the whole round leaves together
    tight = h.build(120, tail_tokens=20)
    if tight.status == "ok":
        tight_ids = [
            c["id"] for m in tight.model_view["messages"] for c in m.get("tool_calls") or []
        ]
        assert tight_ids in ([], ["call_1", "call_2"])


def test_04_a_dangling_tool_use_never_reaches_a_request(tmp_path):
    h = Harness(load("04-dangling-tool-use-in-compaction-request.json"), tmp_path)
    for budget in (10_000, 60):
        result = h.build(budget, tail_tokens=5)
        if result.status == "failed":
            assert result.model_view is None
            continue
        assert validate_request(request_of(result), fmt="anthropic").ok
        uses = [
            b
            for m in result.model_view["messages"]
            for b in m["content"]
            if b["type"] == "tool_use"
        ]
        assert uses == []
        assert "interrupted call toolu_A" in blob(result)


def test_05_an_interrupted_command_stays_interrupted(tmp_path):
    h = Harness(load("05-interrupted-command-promoted-to-done.json"), tmp_path)
    total = h.build(100_000).report.tokens
    result = h.build(total - 1, tail_tokens=5)
    assert result.status == "ok" and folded(result)
    text = blob(result)
    state = result.model_view["messages"][-1]["content"]
    assert state.startswith(TASK_STATE_MARK)
    assert "SIGTERM" in state and "exit code null" in state
    assert "process killed before writing output file" in state
    assert "Run the benchmark and write the results to <OUT_JSON>." in text  # the open task
    for claim in ("finished", "completed", "succeeded", "results are"):
        assert claim not in text.lower().replace("did not complete", "")


def test_07_project_rules_stay_verbatim(tmp_path):
    h = Harness(load("07-project-rules-lost-after-compact.json"), tmp_path)
    total = h.build(100_000).report.tokens
    result = h.build(total - 1, tail_tokens=5)
    assert result.status == "ok" and folded(result)
    text = "\n".join(str(m["content"]) for m in result.model_view["messages"])
    assert (
        "RULE 1: Run database migrations only via ./scripts/db.sh migrate, never call alembic directly."
        in text
    )
    assert "RULE 2: Never commit to the main branch; always use a feature branch." in text


def test_08_the_agent_definition_stays_the_first_message_byte_for_byte(tmp_path):
    case = load("08-agent-constraints-lost.json")
    h = Harness(case, tmp_path)
    total = h.build(100_000).report.tokens
    result = h.build(total - 1, tail_tokens=5)
    assert result.status == "ok" and folded(result)
    assert result.model_view["messages"][0] == case["messages"][0]
    assert "write" not in json.dumps(result.model_view["messages"][1:]).replace("rewrite", "")


def test_09_open_todos_are_named_one_by_one(tmp_path):
    h = Harness(load("09-open-todos-dropped.json"), tmp_path)
    total = h.build(100_000).report.tokens
    result = h.build(total - 1, tail_tokens=5)
    assert result.status == "ok" and folded(result)
    state = result.model_view["messages"][-1]["content"]
    assert "[in_progress] Fix null check in <FILE_B>" in state
    assert "[todo] Add regression test" in state
    assert "[done] Reproduce crash" in state
    assert "`task_tracker`" in state


def test_11_compaction_makes_progress_and_reaches_a_fixed_point(tmp_path):
    case = load("11-noop-condensation-loop.json")
    h = Harness(case, tmp_path)
    before = h.input_tokens()
    receipts = receipts_for(h.entries, count=h.meter.count)
    result = h.build(3000, receipts=receipts)
    assert result.status == "ok"
    after = result.report.tokens
    assert after < before and after <= 3000
    messages = result.model_view["messages"]
    assert any(c["id"] == "c2" for m in messages for c in m.get("tool_calls") or [])
    c2 = next(m for m in messages if m.get("tool_call_id") == "c2")
    assert not c2["content"].startswith("[")  # kept verbatim, with its call
    # run on its own output: nothing more to do, the same list comes back
    # (counted by tiktoken now: the explicit figures described the original bodies)
    settings = {k: v for k, v in case["settings"].items() if not k.startswith("token_")}
    again = dict(case, messages=messages, settings=settings)
    (tmp_path / "again").mkdir()
    h2 = Harness(again, tmp_path / "again")
    store = {r["reference"]: ArtifactInfo(r["content_hash"][7:], True) for r in receipts.values()}
    second = h2.build(3000, resolve_artifact=store.get)  # the artifact is still in the store
    assert second.status == "ok" and second.model_view["messages"] == messages
    assert [d["action"] for d in second.debug_trace["decisions"]] == ["protect", "none", "validate"]


def test_13_a_result_larger_than_the_window_is_projected_or_shrunk_in_place(tmp_path):
    h = Harness(load("13-single-message-exceeds-window.json"), tmp_path)
    window = h.case["settings"]["context_window"]
    for receipts in (receipts_for(h.entries, count=h.meter.count), None):
        result = h.build(window, receipts=receipts)
        assert result.status == "ok" and result.report.tokens < window
        messages = result.model_view["messages"]
        assert messages[0]["content"] == "You are a developer agent."
        assert messages[1]["content"] == "Search the codebase for uses of parse_config."
        tool = next(m for m in messages if m["role"] == "tool")
        assert tool["tool_call_id"] == "call_s"
        if receipts:
            assert (
                tool["content"].startswith("[artifact receipt")
                and "original_size: 201" in tool["content"]
            )
        else:
            assert tool["content"].startswith("[shrunk by the context builder: about")
            assert "characters cut" in tool["content"]


def test_14_the_output_reserve_comes_off_the_window(tmp_path):
    h = Harness(load("14-output-reserve-not-subtracted.json"), tmp_path)
    s = h.case["settings"]
    before = h.input_tokens()
    assert before == 199759
    result = h.build(s["context_window"], output_reserve=s["max_output_tokens"], tail_tokens=10)
    assert result.status == "ok"
    assert result.report.tokens <= s["context_window"] - s["max_output_tokens"] == 191808
    assert before - result.report.tokens >= 7951
    messages = result.model_view["messages"]
    assert messages[0] == h.messages[0] and messages[-1]["content"] == "Now refactor the parser."
    assert h.messages[2]["content"] not in blob(result)  # the oldest answer went first


def test_16_an_image_is_counted_as_an_image_and_comes_back_unchanged(tmp_path):
    h = Harness(load("16-image-base64-counted-as-text.json"), tmp_path)
    result = h.build(h.case["settings"]["compaction_threshold_tokens"])
    assert result.status == "ok"
    assert 1000 <= result.report.tokens <= 1100
    assert [d["action"] for d in result.debug_trace["decisions"]] == ["protect", "none", "validate"]
    assert result.model_view["messages"][0]["content"][1] == h.messages[0]["content"][1]
    anthropic = h.build(
        h.case["settings"]["compaction_threshold_tokens"], target_format="anthropic"
    )
    image = anthropic.model_view["messages"][0]["content"][1]
    assert image["type"] == "image" and len(image["source"]["data"]) == 4197680


def test_18_a_failed_summary_never_replaces_history(tmp_path):
    h = Harness(load("18-failed-summary-replaces-history.json"), tmp_path)

    def summarizer(upto):
        raise RuntimeError("429 Too Many Requests")

    roomy = h.build(10_000, fold=summarizer)
    assert roomy.status == "ok" and roomy.model_view["messages"] == h.messages
    total = roomy.report.tokens
    forced = h.build(total - 1, fold=summarizer, tail_tokens=10)
    assert forced.status == "failed" and forced.model_view is None  # explicit, history kept
    assert "fold failed: RuntimeError" in forced.debug_trace["ledger"]["folds_asked"][0]["outcome"]
    assert "429" not in json.dumps(forced.debug_trace["request"])


def test_20_secrets_never_reach_the_model_the_frontend_or_the_ledger(tmp_path):
    h = Harness(load("20-secrets-in-summary.json"), tmp_path)
    total = h.build(100_000).report.tokens
    secrets = (
        "sk-PLACEHOLDER-not-a-real-key-000000000000",
        "PLACEHOLDERnotArealSecret0000000000000000",
    )
    for budget in (100_000, total - 1):
        result = h.build(budget, tail_tokens=5)
        assert result.status == "ok"
        for view in (
            result.model_view,
            result.debug_trace,
            frontend_view(h.entries),
            offline_fold(h.entries)[0],
        ):
            text = json.dumps(view, ensure_ascii=False)
            assert not any(s in text for s in secrets)
        assert "OPENAI_API_KEY" in blob(result) or folded(result)
    assert "[filtered: " in json.dumps(h.build(100_000).model_view)


def test_21_the_summary_does_not_grow_across_compactions(tmp_path):
    h = Harness(load("21-summary-of-summary-growth.json"), tmp_path)
    s = h.case["settings"]
    before = h.input_tokens()
    result = h.build(1500, tail_tokens=5)
    assert result.status == "ok"
    assert result.report.tokens < before
    summaries = [
        m for m in result.model_view["messages"] if str(m.get("content", "")).startswith("[ledger")
    ]
    # derived: never a source nor a pin of its own; its text, if any fits, only inside the
    # checkpoint, labelled as the source's own summary
    for m in result.model_view["messages"]:
        if "PREVIOUS_COMPACTION_SUMMARY" in str(m.get("content", "")):
            assert m in summaries and "- imported summary at seq 1 (" in m["content"]
    pins = [f["text"] for f in offline_fold(h.entries)[0]["facts"].values() if f.get("pin")]
    assert pins and not any("PREVIOUS_COMPACTION_SUMMARY" in t for t in pins)
    assert all(h.meter.text(m["content"]) <= s["summary_budget_tokens"] for m in summaries)
    again = h.build(1500, tail_tokens=5)
    assert again.model_view == result.model_view


@pytest.mark.parametrize("name", sorted(p.name for p in CASES.glob("*.json")))
def test_every_case_file_has_a_test(name):
    number = name.split("-")[0]
    assert any(n.startswith(f"test_{number}_") for n in globals()), name
