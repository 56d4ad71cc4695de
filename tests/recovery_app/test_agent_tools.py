"""The agent's tools: search (signed cursors), read (verified, filtered), analyst."""

from __future__ import annotations

import time

import pytest

from journal_app.formats.base import ParsedEntry, message, tool_call, tool_result
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from recovery_app.models import Receipt
from recovery_app.services import (
    CursorRefused,
    EntryNotFound,
    QueryInvalid,
    RecoveryError,
    recovery_analyst,
    recovery_read,
    recovery_search,
)
from tests.recovery_app.conftest import MIGRATE, StubModel, build_migration_case, raw_update

pytestmark = pytest.mark.django_db

SECRET = "sk-proj-PLACEHOLDERnotArealKey000000000000"


def _journal(key="tools", lane="main", n=25):
    t = tenant_ensure(slug="acme")
    j = journal_ensure(session=session_ensure(tenant=t, key=key), lane=lane)
    journal_append(
        journal=j, items=[message("assistant", f"step {i}: quokka count is {i}") for i in range(n)]
    )
    j.refresh_from_db()
    return j


def test_search_pages_through_a_frozen_revision_with_signed_cursors():
    j = _journal()
    page1 = recovery_search(journal=j, query="quokka", limit=10)
    assert [h["seq"] for h in page1.hits] == list(range(1, 11)) and page1.revision == 25
    assert page1.hits[0]["entry"].startswith("sha256:") and "quokka" in page1.hits[0]["snippet"]
    journal_append(journal=j, items=[message("assistant", "quokka after the freeze")])
    page2 = recovery_search(journal=j, query="quokka", cursor=page1.next_cursor, limit=10)
    page3 = recovery_search(journal=j, query="quokka", cursor=page2.next_cursor, limit=10)
    assert [h["seq"] for h in page2.hits] == list(range(11, 21))
    assert [h["seq"] for h in page3.hits] == list(range(21, 26))  # seq 26 is after the revision
    assert page3.next_cursor is None and page3.revision == 25
    fresh = recovery_search(journal=j, query="quokka", limit=50)
    assert fresh.revision == 26 and fresh.hits[-1]["seq"] == 26


def test_an_expired_cursor_is_refused():
    j = _journal()
    now = time.time()
    page = recovery_search(journal=j, query="quokka", now=now)
    with pytest.raises(CursorRefused) as exc:
        recovery_search(journal=j, query="quokka", cursor=page.next_cursor, now=now + 901)
    assert exc.value.reason == "expired"


def test_a_cursor_with_one_byte_changed_is_refused():
    j = _journal()
    token = recovery_search(journal=j, query="quokka").next_cursor
    i = len(token) // 3
    changed = token[:i] + ("x" if token[i] != "x" else "y") + token[i + 1 :]
    with pytest.raises(CursorRefused) as exc:
        recovery_search(journal=j, query="quokka", cursor=changed)
    assert exc.value.reason == "tampered"


def test_a_cursor_reused_in_another_session_or_lane_is_refused():
    j = _journal()
    other_session = _journal(key="tools-2")
    other_lane = _journal(lane="worker")
    token = recovery_search(journal=j, query="quokka").next_cursor
    for other in (other_session, other_lane):
        with pytest.raises(CursorRefused) as exc:
            recovery_search(journal=other, query="quokka", cursor=token)
        assert exc.value.reason == "scope"
    with pytest.raises(CursorRefused) as exc:
        recovery_search(journal=j, query="count", cursor=token)
    assert exc.value.reason == "query"


def test_search_refuses_an_unsearchable_query():
    with pytest.raises(QueryInvalid):
        recovery_search(journal=_journal(n=1), query="--")


def _secret_journal():
    t = tenant_ensure(slug="acme")
    j = journal_ensure(session=session_ensure(tenant=t, key="secrets"))
    journal_append(
        journal=j,
        items=[
            message("user", "Check which keys are set."),
            ParsedEntry(
                kind="reasoning",
                role="assistant",
                content={"text": "I will print the key " + SECRET},
            ),
            message(
                "assistant", f"<think>the key is {SECRET}</think>OPENAI_API_KEY={SECRET} is set."
            ),
            tool_call("e1", "terminal", {"cmd": "printenv | grep -i key"}),
            tool_result(
                "e1",
                f"OPENAI_API_KEY={SECRET}\nAWS_SECRET_ACCESS_KEY=PLACEHOLDERnotArealSecret0000000000000000\nEDITOR=vim",
            ),
        ],
    )
    j.refresh_from_db()
    return j


def test_read_filters_a_secret_and_a_reasoning_block_and_labels_it():
    j = _secret_journal()
    r = recovery_read(journal=j, seq=3)
    assert r.verified and all(r.checks.values())
    assert SECRET not in r.text and "the key is" not in r.text
    assert r.text == "[filtered: reasoning]OPENAI_API_KEY=[filtered: openai-key] is set."
    assert r.content == {"text": r.text}
    assert r.filtered and set(r.filter_labels) == {"reasoning", "secret: openai-key"}
    whole = recovery_read(journal=j, seq=2)
    assert whole.text == "[filtered: reasoning]" and whole.filter_labels == ["reasoning"]
    out = recovery_read(journal=j, seq=5)
    assert "PLACEHOLDERnotArealSecret" not in out.text and "EDITOR=vim" in out.text and out.filtered
    plain = recovery_read(journal=j, seq=1)
    assert (
        plain.filtered is False
        and plain.filter_labels == []
        and plain.text == "Check which keys are set."
    )


def test_search_snippets_are_filtered_and_reasoning_is_never_a_result():
    j = _secret_journal()
    page = recovery_search(journal=j, query="key")
    assert 2 not in [h["seq"] for h in page.hits]
    assert all(SECRET not in h["snippet"] for h in page.hits)
    assert any(h["filtered"] for h in page.hits)


def test_read_returns_everything_it_checked():
    case = build_migration_case()
    r = recovery_read(journal=case.journal, entry="sha256:" + case.call.entry_hash)
    assert r.seq == case.call.seq and r.content["arguments"]["command"] == MIGRATE
    assert r.body_hash == "sha256:" + case.call.body_hash and r.byte_length == case.call.byte_length
    assert [c["position"] for c in r.chunks] == list(range(len(r.chunks)))


def test_a_tampered_entry_reads_as_unverified_with_no_content():
    case = build_migration_case()
    raw_update(
        "UPDATE journal_app_chunk SET hash = %s WHERE entry_id = %s", ["0" * 64, case.call.pk]
    )
    r = recovery_read(journal=case.journal, seq=case.call.seq)
    assert r.verified is False and r.content is None and r.text is None
    assert r.checks["chunks"] is False and r.reason.startswith("chunks: chunk 0: stored offset 0")


def test_a_summary_reads_as_nothing():
    t = tenant_ensure(slug="acme")
    j = journal_ensure(session=session_ensure(tenant=t, key="summ"))
    journal_append(
        journal=j,
        items=[
            ParsedEntry(
                kind="event",
                role="runtime",
                derived=True,
                content={"type": "summary", "text": "all done"},
            )
        ],
    )
    r = recovery_read(journal=j, seq=1)
    assert r.verified is False and r.content is None and r.checks["raw"] is False
    assert "never evidence" in r.reason


def test_read_never_reaches_another_scope():
    case = build_migration_case()
    other = build_migration_case(key="other")
    with pytest.raises(EntryNotFound):
        recovery_read(journal=other.journal, entry=case.call.entry_hash)
    with pytest.raises(EntryNotFound):
        recovery_read(journal=case.journal, seq=10_000)
    with pytest.raises(RecoveryError):
        recovery_read(journal=case.journal)


def test_the_analyst_answers_with_checked_claims_and_leaves_a_receipt():
    case = build_migration_case()
    r = recovery_analyst(
        journal=case.journal,
        question="Which flag did migration 0042_add_refund_index use?",
        model=None,
    )
    assert r.kind == Receipt.Kind.ANALYST and r.outcome == Receipt.Outcome.RECOVERED
    assert r.trigger["reason"] == "the agent's question" and r.snapshot["exclude_seqs"] == []
    claim = next(c for c in r.claims if c["citations"][0]["entry"] == case.call.entry_hash)
    assert claim["status"] == "current" and "--fake" in claim["citations"][0]["quote"]
    statuses = {c["status"] for c in r.claims}
    assert statuses <= {"current", "historical", "reported", "unresolved"}
    assert "reported" in statuses  # the user's own doubt is something someone said
    with pytest.raises(QueryInvalid):
        recovery_analyst(journal=case.journal, question="use the same method as last time")


def test_the_analyst_uses_a_configured_model_through_the_same_checks():
    case = build_migration_case()
    stub = StubModel(
        [
            {
                "claim": "made up",
                "status": "current",
                "citations": [{"entry": case.call.entry_hash, "quote": "--real"}],
            }
        ]
    )
    r = recovery_analyst(journal=case.journal, question="0042_add_refund_index flag?", model=stub)
    assert stub.requests == 1 and r.claims == [] and r.outcome == Receipt.Outcome.NOTHING_FOUND
    assert "does not occur byte for byte" in r.rejected_claims[0]["reason"]
