"""A long session's context answers with a bounded response and a fixed number of queries
: the debug trace capped with counts of what was left out, only the views
asked for built, the frontend check linear. Sizes and query counts, never times.
"""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from ninja.testing import TestClient

from bench.generator import session
from config.api import api
from journal_app.auth import api_key_create
from journal_app.services import tenant_ensure
from ledger_app.context import TRACE_CAP, bounded_trace, capped
from ledger_app.services.context import context_preview
from ledger_app.validation import HiddenTexts, validate_frontend
from tests.factories import journal_build

pytestmark = pytest.mark.django_db

#: Entries of the generated session (a few thousand: about 1.5M tokens at corpus shapes).
ENTRIES = 3_000
#: The bound asserted on a model + debug response, bytes: the request at a 32,000-token
#: budget (about 130 kB of text) plus a capped trace; the uncapped trace alone was over 600 kB
#: at 2,000 entries and grows with the session.
MAX_BYTES = 400_000
#: Queries of a context request once its folds stand (measured: 23 at 3,000 entries, SQLite).
MAX_QUERIES = 30


@pytest.fixture(autouse=True)
def media(tmp_path, settings):
    settings.MEDIA_ROOT = str(tmp_path)


@pytest.fixture
def long_journal():
    tenant = tenant_ensure(slug="acme")
    return tenant, journal_build(tenant=tenant, key="long", items=session(ENTRIES, seed=3))


def test_capped_keeps_the_first_and_last_halves_and_counts_the_rest():
    assert capped(list(range(10)), 4) == ([0, 1, 8, 9], 6)
    assert capped(list(range(3)), 4) == ([0, 1, 2], 0)
    assert capped(list(range(5)), 0) == ([], 5)


def test_the_bounded_trace_summarises_every_decision_and_counts_what_it_left_out():
    decisions = [
        {"step": 4, "action": "fold", "effect": -10, "reason": f"round {i}"} for i in range(250)
    ] + [{"step": 5, "action": "validate", "effect": 0, "reason": "ok"}]
    trace = {
        "decisions": decisions,
        "rounds": {"folded_out": [[i, i + 1] for i in range(0, 500, 2)], "total": 300},
        "ledger": {"facts_left_out": [f"F{i}" for i in range(120)]},
        "validation": [{"ok": False, "problems": [{"check": "x"}] * 130}],
        "notes": ["n"] * 3,
        "request": {"messages": [{"role": "user", "content": "hi"}] * 7},
    }
    out = bounded_trace(trace, cap=100)
    assert len(out["decisions"]) == 100
    assert out["decisions"][0]["reason"] == "round 0"
    assert out["decisions"][-1]["action"] == "validate"  # the last half keeps the end
    assert out["decisions_summary"] == [
        {"step": 4, "action": "fold", "count": 250, "effect": -2500},
        {"step": 5, "action": "validate", "count": 1, "effect": 0},
    ]
    assert out["left_out"] == {
        "decisions": 151,
        "rounds.folded_out": 150,
        "ledger.facts_left_out": 20,
        "validation[0].problems": 30,
    }
    assert out["rounds"]["folded_out_count"] == 250 and out["rounds"]["total"] == 300
    assert out["notes"] == ["n"] * 3
    assert out["request"] == {"messages": 7, "same_as": "model_view"}
    assert len(trace["decisions"]) == 251  # the input is not changed


def test_hidden_texts_finds_a_whole_reasoning_text_anywhere_and_nothing_else():
    thought = "I should not tell the user about the staging password rotation."
    hidden = HiddenTexts([thought, "short", "   "])
    assert hidden.found_in(f"The assistant said: {thought} Then it ran.")
    assert not hidden.found_in(thought[:-5])  # only part of it: not a leak of the whole
    assert not hidden.found_in("short answer")  # texts under 20 characters are not looked for
    assert not HiddenTexts([]).found_in(thought)


def test_the_frontend_check_reports_a_leaked_reasoning_text_once_per_item():
    thought = "Let me think about whether the migration can be skipped today."
    view = {
        "items": [
            {"seq": 1, "role": "user", "kind": "message", "text": "hello"},
            {"seq": 2, "role": "assistant", "kind": "message", "text": f"ok. {thought}"},
        ]
    }
    report = validate_frontend(view, reasoning=[thought], entry_of={2: "ab" * 32})
    assert [(p.check, p.index) for p in report.problems] == [("no_hidden_reasoning", 1)]


def test_a_long_sessions_context_response_is_bounded_in_size_and_queries(long_journal):
    tenant, journal = long_journal
    _, raw = api_key_create(tenant=tenant, name="runtime")
    client = TestClient(api, headers={"Authorization": f"Bearer {raw}"})
    body = {"working_budget": 32_000, "hard_limit": 270_000, "views": ["model", "debug"]}
    first = client.post("/sessions/long/context", json=body)  # folds what it needs (writes)
    assert first.status_code == 200, first.content[:500]
    with CaptureQueriesContext(connection) as queries:
        response = client.post("/sessions/long/context", json=body)
    assert response.status_code == 200, response.content[:500]
    data = response.json()
    size = len(response.content)
    assert size <= MAX_BYTES, size
    assert len(first.content) <= MAX_BYTES
    trace = data["debug_trace"]
    assert data["frontend_view"] is None and "frontend" not in data["validation"]
    assert len(trace["decisions"]) <= TRACE_CAP
    counted = sum(row["count"] for row in trace["decisions_summary"])
    assert counted == len(trace["decisions"]) + trace["left_out"].get("decisions", 0)
    # the session is long enough for the cap to matter: the rounds left out are listed up to
    # it; the folded prefix, read as metadata only, is one decision, not one per round
    assert trace["rounds"]["folded_out_count"] > TRACE_CAP
    assert trace["left_out"]["rounds.folded_out"] > 0
    prefix = [d for d in trace["decisions"] if d.get("rounds")]
    assert len(prefix) == 1 and prefix[0]["rounds"] > TRACE_CAP
    # one body read after: the deliverable the continuation record quotes (its "end state")
    assert trace["reads"]["metadata_only"] > 0 and trace["reads"]["loaded_after"] <= 1
    if data["model_view"] is not None:
        assert trace["request"] == {
            "messages": len(data["model_view"]["messages"]),
            "same_as": "model_view",
        }
    # the folds stand: a read of a fixed number of queries (the key, the journal, its entries
    # in one query, the folds and the ledger as of the latest, the artifacts it references),
    # whatever the session's length
    assert len(queries) <= MAX_QUERIES, [q["sql"][:80] for q in queries.captured_queries]


def test_the_uncapped_result_keeps_every_decision_for_the_ui(long_journal):
    _, journal = long_journal
    result = context_preview(journal=journal, working_budget=32_000)
    full = result.to_dict(cap=None)
    assert len(full["debug_trace"]["decisions"]) == len(result.debug_trace["decisions"])
    assert len(json.dumps(result.to_dict(("model", "debug")))) < len(json.dumps(full))


#: The bound asserted on the context page of the long session, bytes (each view: 50 items per
#: page, texts cut at 2,000 characters).
MAX_PAGE_BYTES = 600_000


def test_the_context_page_of_a_long_session_is_paged_and_bounded(long_journal, client):
    from django.urls import reverse

    from tests.factories import MembershipFactory, UserFactory

    tenant, journal = long_journal
    user = MembershipFactory(tenant=tenant, user=UserFactory(username="op")).user
    client.force_login(user)
    url = reverse("ledger:context", args=["acme", "long", "main", "main"])
    for view in ("model", "frontend", "debug"):
        response = client.get(url, {"view": view, "page": "2", "working_budget": "32000"})
        assert response.status_code == 200
        body = response.content.decode()
        assert len(response.content) <= MAX_PAGE_BYTES, (view, len(response.content))
        assert f'id="{view}-h"' in body
        assert [v for v in ("model", "frontend", "debug") if f'id="{v}-h"' in body] == [view]
        # the state is in the URL: a plain GET form carrying the open view, page links
        # keeping every parameter, a permalink naming this view and page
        assert 'hx-get="' not in body.split('id="context-form"')[1].split("</form>")[0]
        assert f'<input type="hidden" name="view" value="{view}">' in body
        assert f"view={view}" in body and "page=2" in body
        if view != "model":  # the model view of a failed build has no second page
            assert "Page 2 of" in body
            assert "page=3" in body and "working_budget=32000" in body, body[
                body.index("pagination") :
            ][:600]


def test_the_default_request_sends_a_window_of_the_frontend_view(long_journal):
    tenant, journal = long_journal
    _, raw = api_key_create(tenant=tenant, name="runtime")
    client = TestClient(api, headers={"Authorization": f"Bearer {raw}"})
    body = {"working_budget": 32_000, "hard_limit": 270_000}  # every view (the default)
    client.post("/sessions/long/context", json=body)  # folds what it needs (writes)

    response = client.post("/sessions/long/context", json=body)

    front = response.json()["frontend_view"]
    total = front["items_total"]
    assert total > 1_000  # every entry the user may see (was all sent: 7.9 MB at 8,766)
    assert len(front["items"]) == 200 and front["items_offset"] == total - 200
    assert len(response.content) <= 2 * MAX_BYTES, len(response.content)
    # a client pages the history from the start with frontend_offset
    page = client.post(
        "/sessions/long/context",
        json={**body, "views": ["frontend"], "frontend_offset": 0, "frontend_limit": 50},
    ).json()["frontend_view"]
    assert page["items_offset"] == 0 and len(page["items"]) == 50
    seqs = [i["seq"] for i in page["items"]]
    assert seqs == sorted(seqs) and seqs[-1] < front["items"][0]["seq"]
    too_many = client.post("/sessions/long/context", json={**body, "frontend_limit": 2_001})
    assert too_many.status_code == 422 and too_many.json()["field"] == "frontend_limit"
