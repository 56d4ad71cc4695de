"""A proxied call never waits on every due fold: the append's fold runs after the call, the
call folds only what it needs within ``PROXY_FOLD_SECONDS`` (else 503 ``fold_pending``), a
failed compaction names a budget that fits, and a stream says where its answer went."""

from __future__ import annotations

import json

import httpx
import pytest

from journal_app.models import Journal
from ledger_app import background
from ledger_app.models import Fold
from ledger_app.services import ledger_compact
from ledger_app.services.compact import TIME_BUDGET_SPENT
from tests.proxy_app.conftest import entries

URL = "/proxy/openai/v1/chat/completions"


def _history(rounds: int, words: int = 0, output: int = 300) -> list[dict]:
    messages: list[dict] = [
        {"role": "system", "content": "You are careful. Never push to main."},
        {"role": "user", "content": "Fix the failing test in app.py"},
    ]
    for i in range(rounds):
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "run", "arguments": json.dumps({"cmd": f"t{i}"})},
                    }
                ],
            }
        )
        messages.append(
            {
                "role": "tool",
                "tool_call_id": f"c{i}",
                "content": f"out {i} " + "lorem ipsum " * output,
            }
        )
        messages.append({"role": "user", "content": f"next step {i} " + "please " * words})
    return messages


def _post(live_server, key, messages, budget: int, session: str, **extra) -> httpx.Response:
    return httpx.post(
        live_server.url + URL,
        json={"model": "m", "messages": messages, **extra},
        headers={
            "X-Ledgerkeep-Key": key,
            "X-Ledgerkeep-Session": session,
            "X-Ledgerkeep-Working-Budget": str(budget),
        },
        timeout=60,
    )


def _run(held: list) -> None:
    """Run the background work a call left, in order (as the background thread would)."""
    for fn in list(held):
        fn()


@pytest.fixture
def held(monkeypatch):
    """Background work collected, not run: what a call leaves for after it."""
    work: list = []
    monkeypatch.setattr(background, "run_in_background", work.append)
    return work


def test_the_fold_an_append_makes_due_runs_after_the_call_not_in_it(
    live_server, key, upstream, settings, held
):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 2_000
    upstream.push(text="done")
    r = _post(live_server, key, _history(20), budget=200_000, session="due")
    assert r.status_code == 200
    assert r.headers["X-Ledgerkeep-Compacted"] == "false"
    journal = Journal.objects.get(session__key="due", branch="main")
    # the history is over the threshold, but nothing was folded inside the call
    assert not Fold.objects.filter(journal=journal).exists()
    assert len(held) >= 1
    _run(held)
    assert Fold.objects.filter(journal=journal, kind=Fold.Kind.FOLD).count() >= 2


def test_a_call_that_needs_a_fold_folds_within_its_time_budget_else_503(
    live_server, key, upstream, settings, held
):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 2_000
    settings.PROXY_FOLD_SECONDS = 0  # no slice may start: the budget is spent at once
    history = _history(40, words=60)  # user messages alone are over the budget
    r = _post(live_server, key, history, budget=4_000, session="slow")
    assert r.status_code == 503
    body = r.json()
    assert body["code"] == "fold_pending"
    assert "PROXY_FOLD_SECONDS" in body["message"]
    assert int(r.headers["Retry-After"]) == 10
    # the messages are journaled, nothing was forwarded, no fold ran inside the call
    assert len(entries("slow")) == len(history)
    assert upstream.requests == []
    journal = Journal.objects.get(session__key="slow", branch="main")
    assert not Fold.objects.filter(journal=journal).exists()
    # the fold goes on after the call; the same request sent again is answered
    _run(held)
    assert Fold.objects.filter(journal=journal, kind=Fold.Kind.FOLD).exists()
    upstream.push(text="done")
    again = _post(live_server, key, history, budget=4_000, session="slow")
    assert again.status_code == 200
    assert again.headers["X-Ledgerkeep-Compacted"] == "true"


def test_within_its_budget_a_call_folds_what_it_needs_and_is_answered(
    live_server, key, upstream, settings, held
):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 2_000
    upstream.push(text="done")
    r = _post(live_server, key, _history(30), budget=6_000, session="fits")
    assert r.status_code == 200
    assert r.headers["X-Ledgerkeep-Compacted"] == "true"
    journal = Journal.objects.get(session__key="fits", branch="main")
    # folded in slices of about the threshold, not one fold of everything
    assert Fold.objects.filter(journal=journal, kind=Fold.Kind.FOLD).count() >= 2
    assert int(r.headers["X-Ledgerkeep-Tokens-After"]) <= 6_000


def test_a_failed_compaction_names_a_working_budget_that_would_fit(
    live_server, key, upstream, settings, held
):
    history = _history(12, words=300)  # the last request alone is over the budget
    r = _post(live_server, key, history, budget=200, session="tiny")
    assert r.status_code == 422
    message = r.json()["message"]
    assert "would fit" in message, message
    suggested = int(message.split("a working budget of ")[1].split(" tokens")[0].replace(",", ""))
    assert suggested > 200
    upstream.push(text="done")
    ok = _post(live_server, key, history, budget=suggested, session="tiny")
    assert ok.status_code == 200, ok.text


def test_compact_stops_at_its_deadline_with_nothing_folded(transactional_db, settings):
    from journal_app.formats.base import message
    from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure

    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9  # no automatic fold
    session = session_ensure(tenant=tenant_ensure(slug="t"), key="s")
    journal = journal_ensure(session=session)
    journal_append(
        journal=journal,
        items=[message("user", "hello " * 50), message("assistant", "hi " * 50)],
    )
    report = ledger_compact(journal=journal, deadline=0.0)
    assert report.stopped == TIME_BUDGET_SPENT
    assert report.rows == []
    assert not Fold.objects.filter(journal=journal).exists()
    # without the deadline the same call folds
    assert ledger_compact(journal=journal).rows


def test_a_stream_ends_with_a_comment_naming_the_answers_branch(live_server, key, upstream):
    upstream.push(text="Paris.")
    upstream.push(text="Lyon?")
    messages = [{"role": "user", "content": "Capital of France?"}]
    first = _post(live_server, key, messages, budget=100_000, session="sse", stream=True)
    assert ": X-Ledgerkeep-Answer-Journaled: true\n: X-Ledgerkeep-Branch: main\n" in first.text
    # the same history resampled: its answer goes on a new branch, the headers cannot say so
    second = _post(live_server, key, messages, budget=100_000, session="sse", stream=True)
    assert second.headers["X-Ledgerkeep-Branch"] == "main"
    trailer = second.text.split("data: [DONE]", 1)[1]
    assert ": X-Ledgerkeep-Branch: b2\n" in trailer
    assert ": X-Ledgerkeep-Branched-From: main@1\n" in trailer
    assert [e.text for e in entries("sse", "b2")] == ["Capital of France?", "Lyon?"]


def test_a_request_no_fold_can_fit_is_422_at_once_not_503(live_server, key, upstream, settings):
    settings.PROXY_FOLD_SECONDS = 0  # a 503 would come first if folding were thought to help
    history = _history(12, words=400)  # the last request alone is over the budget
    r = _post(live_server, key, history, budget=300, session="never")
    assert r.status_code == 422, r.text
    assert r.json()["code"] == "context_failed"


def test_a_suggested_budget_over_the_window_says_no_budget_fits(
    live_server, key, upstream, settings
):
    settings.MODEL_WINDOW_DEFAULT = 1_500
    history = _history(4, words=2_000)  # the last request alone is over the window
    r = _post(live_server, key, history, budget=1_000, session="huge")
    assert r.status_code == 422, r.text
    message = r.json()["message"]
    assert "no budget fits" in message and "would fit" not in message


def test_a_stream_through_a_wsgi_server_is_answered_and_journaled(key, upstream, settings):
    # runserver serves the async views through WSGI: Django reads an async stream in an event
    # loop of its own, where the upstream connection opened by the view cannot be read
    from django.test import Client

    upstream.push(text="Paris.")
    response = Client().post(
        URL,
        data=json.dumps(
            {"model": "m", "stream": True, "messages": [{"role": "user", "content": "Capital?"}]}
        ),
        content_type="application/json",
        HTTP_X_LEDGERKEEP_KEY=key,
        HTTP_X_LEDGERKEEP_SESSION="wsgi",
    )
    assert response.status_code == 200
    body = response.content
    assert b"data: [DONE]\n\n" in body
    assert body.endswith(
        b": X-Ledgerkeep-Answer-Journaled: true\n: X-Ledgerkeep-Branch: main\n"
        b": X-Ledgerkeep-Revision: 2\n\n"
    )
    assert [e.text for e in entries("wsgi")] == ["Capital?", "Paris."]


def test_many_open_requests_that_a_fold_would_close_get_503_not_422(
    live_server, key, upstream, settings, held
):
    # before any fold, every user request is an open request kept whole: over the budget;
    # folded, the older ones become one line each. So folding helps: 503, then 200
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 4_000
    settings.PROXY_FOLD_SECONDS = 0
    history = _history(120, words=40, output=10)
    r = _post(live_server, key, history, budget=4_000, session="requests")
    assert r.status_code == 503, r.text
    assert r.json()["code"] == "fold_pending"
    assert r.headers["X-Ledgerkeep-Working-Budget"] == "4000"
    _run(held)
    upstream.push(text="done")
    settings.PROXY_FOLD_SECONDS = 20
    again = _post(live_server, key, history, budget=4_000, session="requests")
    assert again.status_code == 200, again.text
