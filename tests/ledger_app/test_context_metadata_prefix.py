"""The folded prefix read as metadata only (docs/design.md 6, "The folded prefix"): what the
build still reads of it, the rule the service and the builder share, and the views."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from journal_app.formats.base import ParsedEntry, message, tool_call, tool_result
from journal_app.rounds import group_rounds
from journal_app.services import tenant_ensure
from ledger_app.context.prefix import prefix_rounds
from ledger_app.context.task_state import TASK_LIST_WORDS
from ledger_app.entry_view import EntryView, MetadataView, metadata_only
from ledger_app.offline.heuristics import PLAN_TOOLS
from ledger_app.services import context as context_service
from ledger_app.services import context_reads, ledger_fold
from ledger_app.services.context import context_preview
from ledger_app.validation import TASK_STATE_MARK
from tests.factories import journal_build

BUDGETS = {"working_budget": 3_000, "hard_limit": 3_000}


def folded_journal(tenant, key: str, rounds: int, early: bool = True):
    """A system prompt and a goal; early on (``early``) what the task state reads from the
    whole journal: a pending approval, a todo list, a call that never returned, an imported
    summary; then ``rounds`` rounds of reads, all but the last five folded."""
    items = [message("system", "Be terse."), message("user", "Check the totals in src/.")]
    if early:
        items += [
            ParsedEntry(
                kind="event",
                role="runtime",
                content={"type": "exec_approval_request", "call_id": "deploy-1"},
            ),
            tool_call("t1", "TodoWrite", {"todos": [{"content": "sum m1", "status": "pending"}]}),
            tool_result("t1", "Todos updated"),
            tool_call("lost", "bash", {"command": "make slow-target"}),
            message("user", "(summary) earlier: the totals of m0 were checked", derived=True),
        ]
    for i in range(rounds):
        items += [
            tool_call(f"c{i}", "read", {"path": f"src/m{i}.py"}),
            tool_result(f"c{i}", f"m{i}: " + f"total {i} EUR; " * 60),
            message("assistant", f"Read m{i}: ok."),
        ]
    journal = journal_build(tenant=tenant, key=key, items=items)
    result = ledger_fold(journal=journal, upto=journal.head_seq - 15)
    assert result.fold is not None, result.reason
    journal.refresh_from_db()
    return journal


def _whole(journal, revision, **_):
    return context_reads.BuildReads(*context_reads.read_entries(journal, revision))


def _task_state(result) -> str:
    texts = [
        m["content"]
        for m in result.model_view["messages"]
        if isinstance(m.get("content"), str) and m["content"].startswith(TASK_STATE_MARK)
    ]
    assert len(texts) == 1
    return texts[0]


@pytest.mark.django_db
def test_the_task_state_reads_the_prefix_as_a_whole_read_does(monkeypatch, settings, tmp_path):
    """The approval, the todo list, the call that never returned and the goal are all in the
    folded prefix; read as metadata, the build still states each of them, in the words a
    whole read gives, and asks for no body after the read."""
    settings.MEDIA_ROOT = tmp_path / "media"
    journal = folded_journal(tenant_ensure(slug="meta"), "s1", 40)
    prefix = context_preview(journal=journal, views=("model", "debug"), **BUDGETS)
    assert prefix.status == "ok", prefix.failure
    reads = prefix.debug_trace["reads"]
    assert reads["metadata_only"] > 60 and reads["loaded_after"] == 0
    assert reads["read_whole_from"] > 50  # the goal and the early entries lie before it
    state = _task_state(prefix)
    assert "pending approval deploy-1" in state
    assert "[pending] sum m1" in state
    assert "make slow-target" in state
    assert "seq 2" in state  # the current user goal
    monkeypatch.setattr(context_service, "read_for_build", _whole)
    whole = context_preview(journal=journal, views=("model", "debug"), **BUDGETS)
    assert whole.debug_trace["reads"]["metadata_only"] == 0
    assert _task_state(whole) == state
    assert whole.model_view == prefix.model_view
    assert whole.debug_trace["notes"] == prefix.debug_trace["notes"]


@pytest.mark.django_db
def test_a_build_over_a_folded_prefix_makes_the_same_queries_at_any_length(settings, tmp_path):
    """Scaling shape: the queries of a preview do not grow with the prefix, and the bodies of
    its results are never read (none is parsed: no view of a prefix result has content)."""
    settings.MEDIA_ROOT = tmp_path / "media"
    tenant = tenant_ensure(slug="meta")
    counts = {}
    for rounds in (30, 90):
        journal = folded_journal(tenant, f"s{rounds}", rounds, early=False)
        context_preview(journal=journal, views=("model", "debug"), **BUDGETS)  # warm
        with CaptureQueriesContext(connection) as queries:
            result = context_preview(journal=journal, views=("model", "debug"), **BUDGETS)
        assert result.status == "ok", result.failure
        assert result.debug_trace["reads"]["loaded_after"] == 0
        counts[rounds] = len(queries)
        reads = context_reads.read_for_build(
            journal, journal.head_seq, covered_upto=journal.head_seq - 15, tail_tokens=750,
            limit=3_000,
        )  # fmt: skip
        results = [v for v in reads.views if v.kind == "tool_result"]
        unread = [v for v in results if metadata_only(v)]
        assert len(unread) >= rounds - 10
        assert all(v._content is None for v in unread)
    assert counts[30] == counts[90]


@pytest.mark.django_db
def test_a_short_or_unfolded_journal_is_read_whole(settings, tmp_path):
    """No prefix when nothing is folded, or when the folded rounds would fit the limit."""
    settings.MEDIA_ROOT = tmp_path / "media"
    journal = folded_journal(tenant_ensure(slug="meta"), "s1", 12, early=False)
    head = journal.head_seq
    unfolded = context_reads.read_for_build(
        journal, head, covered_upto=0, tail_tokens=750, limit=3_000
    )
    roomy = context_reads.read_for_build(
        journal, head, covered_upto=head - 15, tail_tokens=750, limit=10**6
    )
    for reads in (unfolded, roomy):
        assert reads.metadata_before == 0
        assert not any(metadata_only(v) for v in reads.views)
        assert len(reads.views) == head


def test_prefix_rounds_lowers_its_threshold_past_a_round_whose_result_came_late():
    """A round whose result arrived after the threshold ends the prefix, and the seq read
    whole moves back to its start, so the builder's rule finds the same rounds."""
    entries = [
        EntryView(1, "a", "message", "user", "go", {}),
        EntryView(2, "b", "tool_call", "assistant", "", {}, "c1"),
        EntryView(3, "c", "tool_result", "tool", "ok", {}, "c1"),
        EntryView(4, "d", "tool_call", "assistant", "", {}, "late"),
        EntryView(5, "e", "message", "assistant", "next", {}),
        EntryView(6, "f", "tool_call", "assistant", "", {}, "c3"),
        EntryView(7, "g", "tool_result", "tool", "ok", {}, "c3"),
        EntryView(8, "h", "tool_result", "tool", "ok", {}, "late"),  # joins its call's round
        EntryView(9, "i", "tool_call", "assistant", "", {}, "c4"),
        EntryView(10, "j", "tool_result", "tool", "ok", {}, "c4"),
    ]
    rounds = group_rounds(entries)
    first, prefix = prefix_rounds(rounds, 8, covered_upto=10)
    assert [r.seqs for r in prefix] == [[2, 3]]
    assert first == 4  # the round of "late" (4-8) starts there
    assert prefix_rounds(rounds, first, covered_upto=10) == (first, prefix)
    # nothing the fold does not cover is in it
    assert prefix_rounds(rounds, 8, covered_upto=2)[1] == []


def test_every_plan_tool_name_holds_a_task_list_word():
    """The service reads whole every call of the prefix whose tool name holds one of
    :data:`TASK_LIST_WORDS`; each name :func:`plan_items` accepts must hold one."""
    assert all(any(w in name for w in TASK_LIST_WORDS) for name in PLAN_TOOLS)


def test_a_metadata_view_reads_its_body_once_when_asked_and_stays_metadata_only():
    loads = []

    def load(seq):
        loads.append(seq)
        return {"text": "hello"}

    view = MetadataView.of_meta(
        seq=7, entry_hash="ab" * 32, kind="message", role="assistant", tool_call_id="",
        tool_name="", derived=False, is_error=False, meta='{"usage": {"input_tokens": 3}}',
        chunk_bytes=4096, load=load,
    )  # fmt: skip
    assert loads == [] and metadata_only(view)
    assert view.meta == {"usage": {"input_tokens": 3}}
    assert view.text == "hello" and view.content == {"text": "hello"}
    assert loads == [7]  # once
    assert metadata_only(view)  # a scan skips it whatever was loaded since
    eager = EntryView(
        7, "ab" * 32, "message", "assistant", "hello", {"text": "hello"},
        meta={"usage": {"input_tokens": 3}}, chunk_bytes=4096,
    )  # fmt: skip
    assert view == eager
    assert not metadata_only(eager)


@pytest.mark.django_db
@pytest.mark.parametrize("rounds", [40, 80])
def test_the_request_is_the_same_whatever_views_are_asked_for(settings, tmp_path, rounds):
    """Asking for the frontend view too (which reads every entry whole) does not change the
    request: the model view is built from the same read either way."""
    settings.MEDIA_ROOT = tmp_path / "media"
    journal = folded_journal(tenant_ensure(slug="meta"), f"s{rounds}", rounds)
    budgets = {"working_budget": 6_000, "hard_limit": 8_000}
    alone = context_preview(journal=journal, views=("model", "debug"), **budgets)
    both = context_preview(journal=journal, views=("model", "frontend", "debug"), **budgets)
    assert alone.debug_trace["reads"]["metadata_only"] > 0
    assert alone.model_view == both.model_view
    assert alone.debug_trace["decisions"] == both.debug_trace["decisions"]
    assert len(both.frontend_view["items"]) > 0
    # the frontend view shows the prefix's entries, read whole
    start = alone.debug_trace["reads"]["read_whole_from"]
    shown = {item["seq"] for item in both.frontend_view["items"]}
    assert len({s for s in shown if s < start}) > alone.debug_trace["reads"]["metadata_only"] // 2
