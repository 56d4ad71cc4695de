"""The pure context builder: controlled order, invariants, three views (docs/design.md 6)."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from journal_app.artifacts import make_preview, media_type_of
from journal_app.chain import prepare_entries
from journal_app.formats import parse_path
from journal_app.formats.base import ParsedEntry, message, tool_call, tool_result
from journal_app.hashing import chunk_hash
from journal_app.tokens import count_tokens
from ledger_app.context import build_context, frontend_view
from ledger_app.entry_view import EntryView
from ledger_app.pin_facts import is_pin_source, pin_fact
from ledger_app.pins import pin_shown_text
from ledger_app.validation import TASK_STATE_MARK, message_texts, validate_request
from tests.conftest import CORPUS
from tests.factories import sample_items
from tests.support.offline_fold import offline_fold

SCOPE = {"tenant": "acme", "session": "s1", "lane": "main", "branch": "main"}
BUDGETS = (8_000, 32_000, 128_000)
RECEIPT_OVER = 2000  # tokens: ARTIFACT_THRESHOLD_TOKENS' default


def views(items: Sequence[ParsedEntry]) -> list[EntryView]:
    """Entry views of ``items`` hashed as the journal would hash them (no database)."""
    prepared = prepare_entries(
        scope=SCOPE, start_seq=1, parent_hash="", items=items, chunk_bytes=4096
    )
    return [
        EntryView(
            seq=p.seq,
            entry_hash=p.entry_hash,
            kind=p.kind,
            role=p.role,
            text=p.text,
            content=json.loads(p.body),
            tool_call_id=p.tool_call_id,
            tool_name=p.tool_name,
            derived=p.derived,
            is_error=p.is_error,
            meta=json.loads(p.meta),
        )
        for p in prepared
    ]


def receipts_for(entries: Sequence[EntryView], over: int = RECEIPT_OVER, count=count_tokens):
    """What ``artifact_store`` gives oversized results: one receipt per content hash."""
    out = {}
    for e in entries:
        if e.kind == "tool_result" and count(e.text) > over:
            digest = chunk_hash(e.text.encode("utf-8"))
            mtype = media_type_of(e.text)
            out[e.entry_hash] = {
                "reference": f"artifact://acme/{digest}",
                "media_type": mtype,
                "original_size": {"tokens": count(e.text), "bytes": len(e.text.encode())},
                "token_source": "tiktoken:o200k_base",
                "preview": make_preview(e.text, mtype),
                "content_hash": f"sha256:{digest}",
                "source_tool": e.tool_name,
            }
    return out


def build(entries, budget, fmt="openai", **kw):
    kw.setdefault("fold", lambda upto: offline_fold(entries, upto=upto))
    return build_context(
        entries=entries,
        working_budget=budget,
        hard_limit=kw.pop("hard_limit", budget),
        target_format=fmt,
        **kw,
    )


def all_texts(view):
    texts = [t for m in view["messages"] for t in message_texts(m)]
    texts += [b["text"] for b in view.get("system", [])]
    return texts


def assert_valid(entries, result, budget, fmt):
    """Check the built request independently of the builder's own report."""
    if result.status == "failed":
        assert result.model_view is None and result.failure["reason"]
        return
    view = result.model_view
    request = {k: v for k, v in view.items() if k != "format"}
    report = validate_request(request, fmt=fmt, working_budget=budget, hard_limit=budget)
    assert report.ok, [p.message for p in report.problems]
    texts = all_texts(view)
    for e in entries:
        if is_pin_source(e):
            # the pin as the context shows it (harness blocks out, attachments as receipts,
            # docs/design.md 5.2), or the whole message where the tail keeps it
            shown = pin_shown_text(pin_fact(e))
            # an older open request is one line of the record (its first words), docs/design.md 5.5
            head = next((ln.strip() for ln in shown.splitlines() if ln.strip()), "")[:60]
            assert any(e.text in t or shown in t or head in t for t in texts), (
                f"pin of seq {e.seq} not verbatim"
            )


CORPUS_FILES = sorted(
    [
        p
        for p in CORPUS.glob("*/*")
        if p.is_file()
        and p.suffix in (".json", ".jsonl", ".traj")
        and p.parent.name != "opencode-export"
    ]
    + [CORPUS / "opencode-export" / "khala-sessions"]
)


@pytest.fixture(scope="module")
def corpus_views():
    return {p.name: views(parse_path(p).entries) for p in CORPUS_FILES}


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("path", CORPUS_FILES, ids=[p.name for p in CORPUS_FILES])
def test_every_corpus_transcript_builds_a_valid_request_or_fails_explicitly(
    corpus_views, path, budget, fmt
):
    entries = corpus_views[path.name]
    result = build(entries, budget, fmt, receipts=receipts_for(entries))
    assert result.status in ("ok", "failed")
    assert_valid(entries, result, budget, fmt)
    if result.status == "ok":
        assert result.report.ok and result.report.tokens <= budget


def test_an_interrupted_tail_restores_the_last_complete_round_and_states_the_call():
    entries = views(sample_items())  # ends with a user correction, then exec t2 with no result
    result = build(entries, 10_000)
    assert result.status == "ok"
    messages = result.model_view["messages"]
    ids = [c["id"] for m in messages for c in m.get("tool_calls") or []]
    assert "t2" not in ids and {"r1", "r2", "t1"} <= set(ids)
    assert messages[-2] == {
        "role": "user",
        "content": "Correction: only change billing/refunds.py.",
    }
    state = messages[-1]["content"]
    assert state.startswith(TASK_STATE_MARK) and "interrupted call t2" in state
    assert "has no result yet" in state
    assert result.debug_trace["rounds"]["unfinished_tail"] == [11, 11]


def test_an_interrupted_call_in_the_middle_is_removed_and_stated_its_siblings_kept():
    items = [
        message("user", "Read both."),
        tool_call("a", "read_file", {"path": "x"}),
        tool_call("b", "read_file", {"path": "y"}),
        tool_result("a", "x content"),
        message("user", "Stop reading, summarize."),
        message("assistant", "Summary."),
    ]
    result = build(views(items), 10_000, "anthropic")
    assert result.status == "ok"
    uses = [
        b["id"]
        for m in result.model_view["messages"]
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    assert uses == ["a"]
    assert "interrupted call b" in json.dumps(result.model_view)


def parallel_session(big: str) -> list[ParsedEntry]:
    return [
        message("system", "You are careful."),
        message("user", "Generate two long random strings."),
        message("assistant", "Using rand_string."),
        tool_call("call_1", "rand_string", {"len": 5000}),
        tool_call("call_2", "rand_string", {"len": 200}),
        tool_result("call_1", big),
        tool_result("call_2", "short string"),
        message("assistant", "Generated the two random strings."),
        message("user", "Explain the algorithm."),
    ]


@pytest.mark.parametrize("budget", [150, 300, 600, 2_000, 20_000])
def test_parallel_calls_stay_together_or_leave_together(budget):
    entries = views(parallel_session("x9" * 3000))
    result = build(entries, budget, tail_tokens=30)
    if result.status == "failed":
        return
    messages = result.model_view["messages"]
    ids = [c["id"] for m in messages for c in m.get("tool_calls") or []]
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert sorted(ids) == sorted(results)
    assert ids in ([], ["call_1", "call_2"])


def test_oversized_results_become_receipts_before_anything_is_folded():
    big = "\n".join(f"line {i}: value {i * 7}" for i in range(4000))
    entries = views(parallel_session(big))
    receipts = receipts_for(entries)
    assert receipts
    result = build(entries, 4_000, receipts=receipts)
    assert result.status == "ok"
    actions = [d["action"] for d in result.debug_trace["decisions"]]
    assert "project" in actions and "fold" not in actions and "shrink" not in actions
    tool = next(m for m in result.model_view["messages"] if m.get("tool_call_id") == "call_1")
    assert tool["content"].startswith("[artifact receipt")
    [ref] = result.debug_trace["artifacts"]
    assert ref in tool["content"] and "original_size:" in tool["content"]


def test_the_same_artifact_reloaded_shows_one_receipt_and_one_reference():
    big = "\n".join(f"row {i}: {i * 13}" for i in range(3000))
    items = [message("user", "Load the report.")]
    for n in range(6):
        items += [tool_call(f"r{n}", "read_artifact", {"ref": "report"}), tool_result(f"r{n}", big)]
    items.append(message("assistant", "Loaded."))
    entries = views(items)
    receipts = receipts_for(entries)
    assert len({r["reference"] for r in receipts.values()}) == 1
    result = build(entries, 3_000, receipts=receipts)
    assert result.status == "ok"
    text = json.dumps(result.model_view)
    ref = next(iter(receipts.values()))["reference"]
    assert result.debug_trace["artifacts"] == [ref]
    assert text.count("preview:") == 1  # the full receipt once, later reloads point at it


def test_old_consumed_results_are_shrunk_with_a_marker_that_names_the_entry():
    long = "\n".join(f"collected item {i} ok" for i in range(600))
    items = [
        message("user", "Run the tests."),
        tool_call("t1", "exec", {"command": "pytest"}),
        tool_result("t1", long),
        message("assistant", "All collected."),
        message("user", "Now fix the failing one."),
        tool_call("t2", "exec", {"command": "pytest -x"}),
        tool_result("t2", "1 failed"),
    ]
    entries = views(items)
    result = build(entries, 1_000, tail_tokens=50)
    assert result.status == "ok"
    t1 = next(m for m in result.model_view["messages"] if m.get("tool_call_id") == "t1")
    assert t1["content"].startswith("[shrunk by the context builder")
    assert f"sha256:{entries[2].entry_hash[:12]}" in t1["content"]
    assert [d["action"] for d in result.debug_trace["decisions"] if d["step"] == 3] == ["shrink"]


def padded_items():
    """:func:`sample_items` with a longer first read: the checkpoint opens with the
    continuation record (docs/design.md 6), so folding the sample's five short entries costs more
    than keeping them; a 20-function file makes the fold worth it."""
    items = sample_items()
    body = "".join(f"def helper_{i}(x):\n    return x * {i}\n\n" for i in range(20))
    items[5] = tool_result("r1", "from decimal import Decimal\n\n" + body)
    return items


def test_rounds_leave_the_verbatim_part_only_when_a_fold_covers_them():
    entries = views(padded_items())
    calls = []

    def fold(upto):
        calls.append(upto)
        return offline_fold(entries, upto=upto)

    result = build(entries, 350, fold=fold, tail_tokens=10)
    assert result.status == "ok", result.failure
    assert calls == [9]  # one fold, up to the protected tail (the correction at seq 10)
    assert result.debug_trace["rounds"]["covered_upto"] == 9
    folded = [d for d in result.debug_trace["decisions"] if d["action"] == "fold" and "seqs" in d]
    assert folded and all(d["seqs"][1] <= 9 for d in folded)


def test_without_a_fold_nothing_is_dropped_and_the_failure_is_explicit():
    entries = views(sample_items())
    result = build(entries, 120, fold=None)
    assert result.status == "failed" and result.model_view is None
    assert result.debug_trace["request"] is None
    assert not any(d["action"] == "fold" and "seqs" in d for d in result.debug_trace["decisions"])
    assert result.failure["figures"]["working_budget"] == 120


def test_a_fold_that_fails_keeps_history_and_never_puts_its_error_in_the_request():
    entries = views(sample_items())

    def failing(upto):
        raise RuntimeError("429 Too Many Requests")

    result = build(entries, 200, fold=failing)
    assert result.debug_trace["ledger"]["folds_asked"][0]["outcome"].startswith("fold failed")
    if result.model_view is not None:
        assert "429" not in json.dumps(result.model_view)
    roomy = build(entries, 10_000, fold=failing)
    assert roomy.status == "ok" and "429" not in json.dumps(roomy.model_view)


def test_an_instruction_larger_than_the_budget_is_an_explicit_failure_never_evicted():
    entries = views([message("user", "word " * 56_000), message("assistant", "ok")])
    result = build(entries, 20_000)
    assert result.status == "failed" and result.model_view is None
    assert "within_working_budget" in {p["check"] for p in result.failure["problems"]}
    assert result.failure["figures"]["pins_and_task_state_tokens"] > 20_000
    assert [d["action"] for d in result.debug_trace["decisions"]][-1] == "fail"


def test_a_tampered_ledger_pin_fails_validation_naming_the_pin():
    entries = views(sample_items())
    ledger, covered = offline_fold(entries)
    pin = next(f for f in ledger["facts"].values() if f.get("pin") and "payments" in f["text"])
    pin["text"] = pin["text"].replace("payments", "paymentz")
    result = build_context(
        entries=entries,
        ledger=ledger,
        covered_upto=covered,
        working_budget=10_000,
        hard_limit=10_000,
    )
    assert result.status == "failed"
    [problem] = [p for p in result.failure["problems"] if p["check"] == "pin_verbatim"]
    assert (
        problem["ref"] == pin["id"] and problem["entry"] == "sha256:" + pin["support"][0]["entry"]
    )


def test_a_retired_pin_is_not_sent_again_once_its_round_is_folded():
    items = sample_items()
    entries = views(items)
    ledger, covered = offline_fold(entries)
    system = entries[0]
    ledger["facts"][f"pin:{system.entry_hash[:16]}"]["lifecycle"] = "retired"
    result = build_context(
        entries=entries,
        ledger=ledger,
        covered_upto=covered,
        working_budget=180,
        hard_limit=180,
        tail_tokens=10,
    )
    if result.status == "ok" and result.debug_trace["rounds"]["folded_out"]:
        assert system.text not in json.dumps(result.model_view)


def test_the_output_reserve_is_subtracted_from_the_hard_limit():
    entries = views(
        [
            message("system", "S"),
            message("user", "a " * 3000),
            message("assistant", "b " * 3000),
            message("user", "Go on."),
        ]
    )
    total = build(entries, 100_000).report.tokens
    result = build(entries, 100_000, hard_limit=total + 10, output_reserve=500)
    assert result.status == "ok"
    assert result.report.tokens <= total + 10 - 500
    assert "b b b" not in json.dumps(result.model_view)  # the assistant turn went first


def test_the_three_views_are_separate_objects():
    secret = "sk-PLACEHOLDER-not-a-real-key-000000000000"
    items = sample_items()[:8] + [tool_result("t1", f"OPENAI_API_KEY={secret}")]
    items.insert(
        3,
        ParsedEntry(
            kind="reasoning", role="assistant", content={"text": "private chain of thought here"}
        ),
    )
    entries = views(items)
    result = build(entries, 10_000)
    assert result.status == "ok"
    assert result.debug_trace["request"] == result.model_view
    result.model_view["messages"].clear()
    assert result.debug_trace["request"]["messages"]  # a copy, not the same object
    assert secret not in json.dumps(result.debug_trace)
    front = frontend_view(entries)
    blob = json.dumps(front)
    assert secret not in blob and "private chain of thought" not in blob
    assert "Never modify the payments tables" not in blob  # system prompt stays private
    shown = {"seq", "role", "kind", "text", "tool", "is_error", "attachments", "truncated"}
    assert all(set(i) <= shown | {"status", "filtered", "labels"} for i in front["items"])
    result_item = next(
        i for i in front["items"] if i["kind"] == "tool_result" and i.get("filtered")
    )
    assert result_item["labels"] == ["secret: openai-key"]
    assert front["filtered"]["left_out"] == {"reasoning": 1}


def test_building_twice_gives_the_same_request():
    entries = views(padded_items())
    a = build(entries, 350, tail_tokens=10)
    b = build(entries, 350, tail_tokens=10)
    assert a.status == "ok" and a.debug_trace["rounds"]["folded_out"]
    assert a.model_view == b.model_view and a.debug_trace["decisions"] == b.debug_trace["decisions"]


def test_anthropic_ids_are_made_acceptable_and_stay_paired():
    items = [
        message("user", "Look twice."),
        tool_call("call_x#2", "lookup", {"q": 1}),
        tool_result("call_x#2", "found"),
        message("assistant", "Done."),
    ]
    result = build(views(items), 10_000, "anthropic")
    blocks = [b for m in result.model_view["messages"] for b in m["content"]]
    use = next(b for b in blocks if b["type"] == "tool_use")
    res = next(b for b in blocks if b["type"] == "tool_result")
    assert use["id"] == res["tool_use_id"] == "call_x_2"


def test_a_request_within_budget_is_returned_unchanged_with_no_compaction():
    entries = views(sample_items()[:10])
    result = build(entries, 100_000)
    actions = [d["action"] for d in result.debug_trace["decisions"]]
    assert actions == ["protect", "none", "validate"]
    assert len(result.model_view["messages"]) == 8


def test_bad_budgets_are_refused():
    from ledger_app.context import ContextInputError

    with pytest.raises(ContextInputError, match="target_format"):
        build(views(sample_items()), 100, "gemini")
    with pytest.raises(ContextInputError, match="output_reserve"):
        build(views(sample_items()), 100, output_reserve=100)


def test_every_corpus_path_is_covered():
    assert len(CORPUS_FILES) == 10 and all(Path(p).exists() for p in CORPUS_FILES)


def test_trace_records_each_decision_with_reason_and_token_effect():
    entries = views(sample_items())
    result = build(entries, 230, tail_tokens=10)
    for d in result.debug_trace["decisions"]:
        assert {"step", "action", "reason", "tokens_before", "tokens_after", "effect"} <= set(d)
        assert d["effect"] == d["tokens_after"] - d["tokens_before"]
    assert result.debug_trace["tokens"]["source"].startswith("tiktoken:o200k_base")
    copy.deepcopy(result.debug_trace)
