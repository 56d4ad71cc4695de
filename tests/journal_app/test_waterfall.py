"""The waterfall: spans of model calls and tool runs with durations (pure), and the page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.waterfall import BAR_WIDTH, Step, spans_of, waterfall
from tests.factories import MembershipFactory, TenantFactory, UserFactory, journal_build

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def steps():
    return [
        Step(1, "message", "user", at=at(0)),
        Step(2, "message", "assistant", at=at(4), output_tokens=30, input_tokens=100),
        Step(3, "tool_call", "assistant", "c1", "exec", at=at(5)),
        Step(4, "tool_result", "tool", "c1", at=at(15), is_error=True),
        Step(5, "tool_call", "assistant", "c2", "read", at=at(20), started=at(16)),
        Step(6, "tool_result", "tool", "c2", at=at(20.5)),
        Step(7, "tool_call", "assistant", "c3", "exec", at=at(30)),
    ]


def test_calls_and_tool_runs_become_spans_with_durations():
    spans = spans_of(steps())

    assert [(s.kind, s.label, s.first_seq, s.last_seq) for s in spans] == [
        ("call", "model call", 2, 3),
        ("tool", "exec", 3, 4),
        ("call", "model call", 5, 5),
        ("tool", "read", 5, 6),
        ("call", "model call", 7, 7),
        ("tool", "exec", 7, 7),
    ]
    first_call, exec_run, second_call, read_run, third_call, open_run = spans
    # a call runs from the last input (seq 1 at 0 s) to its last output (seq 3 at 5 s)
    assert first_call.duration == timedelta(seconds=5)
    assert (first_call.input_tokens, first_call.output_tokens) == (100, 30)
    assert (exec_run.duration, exec_run.failed) == (timedelta(seconds=10), True)
    # the turn_context time (started) opens the call, not the previous entry's time
    assert second_call.duration == timedelta(seconds=4)
    assert read_run.duration == timedelta(milliseconds=500)
    assert (open_run.open, open_run.duration) == (True, None)
    assert third_call.duration == timedelta(seconds=9.5)  # from seq 6's result at 20.5 s


def test_bars_sit_on_the_page_time_axis():
    built = waterfall(steps())

    assert (built.timed, built.total) == (True, timedelta(seconds=30))
    exec_run = built.spans[1]
    assert (exec_run.x, exec_run.width) == (
        round(5 / 30 * BAR_WIDTH, 2),
        round(10 / 30 * BAR_WIDTH, 2),
    )
    assert all(0 <= s.x <= BAR_WIDTH and s.x + s.width <= BAR_WIDTH + 0.01 for s in built.spans)


def test_without_times_bars_follow_the_seq_order_and_have_no_duration():
    plain = [Step(s.seq, s.kind, s.role, s.tool_call_id, s.tool_name) for s in steps()]
    built = waterfall(plain)

    assert built.timed is False
    assert [s.duration for s in built.spans] == [None] * 6
    assert built.spans[0].x == round(BAR_WIDTH / 7, 2)  # seq 2 of seqs 1..7
    assert built.spans[-1].x > built.spans[1].x


def test_no_steps_no_spans():
    assert waterfall([]).spans == []


def _timed(items, start=0):
    for n, item in enumerate(items):
        item.metadata = {**item.metadata, "timestamp": at(start + n * 2).isoformat()}
    return items


@pytest.mark.django_db
def test_the_page_lists_the_spans_with_durations_and_cost(client, settings):
    settings.LEDGER_MODEL_PRICES = {"gpt-5-codex": [1.25, 10.0]}
    acme = TenantFactory(slug="acme")
    user = MembershipFactory(tenant=acme, user=UserFactory(username="oscar"), role="operator").user
    answer = message("assistant", "Running the tests.")
    answer.metadata = {
        "model": "gpt-5-codex",
        "usage": {"input_tokens": 1_000_000, "output_tokens": 0},
    }
    items = _timed(
        [
            message("user", "Fix it."),
            answer,
            tool_call("t1", "exec", {"command": "pytest"}),
            tool_result("t1", "1 failed", is_error=True, exit_code=1),
        ]
    )
    journal_build(tenant=acme, key="wf", items=items)
    client.force_login(user)

    r = client.get(reverse("journal:waterfall", args=["acme", "wf", "main", "main"]))

    body = r.content.decode()
    assert r.status_code == 200
    assert '1 model call, 1 tool run, <strong class="bad">1 failed</strong>' in body
    assert "This page spans 6 s of source time." in body
    assert "$1.2500" in body  # 1M input tokens at $1.25 per 1M
    assert body.count('class="wf-tool wf-failed"') == 1


@pytest.mark.django_db
def test_another_tenants_waterfall_is_404(client):
    acme, globex = TenantFactory(slug="acme"), TenantFactory(slug="globex")
    journal_build(tenant=acme, key="wf")
    user = MembershipFactory(tenant=globex, user=UserFactory(username="mallory"), role="admin").user
    client.force_login(user)

    assert (
        client.get(reverse("journal:waterfall", args=["acme", "wf", "main", "main"])).status_code
        == 404
    )


@pytest.mark.django_db
def test_pages_split_a_long_journal_and_clamp(client):
    acme = TenantFactory(slug="acme")
    user = MembershipFactory(tenant=acme, user=UserFactory(username="oscar"), role="operator").user
    items = [message("user", "go")]
    for i in range(200):
        items += [tool_call(f"c{i}", "exec", {"n": i}), tool_result(f"c{i}", "ok")]
    journal_build(tenant=acme, key="long", items=items)  # 401 entries: 2 pages of 300
    client.force_login(user)
    url = reverse("journal:waterfall", args=["acme", "long", "main", "main"])

    last = client.get(url + "?page=9").content.decode()
    bad = client.get(url + "?page=x").content.decode()

    assert "Page 2 of 2" in last and "Entries 301–401" in last
    assert "Page 1 of 2" in bad


@pytest.mark.django_db
def test_the_api_reads_the_same_spans(client):
    from journal_app.auth import api_key_create

    acme = TenantFactory(slug="acme")
    items = _timed(
        [
            message("user", "Fix it."),
            tool_call("t1", "exec", {"command": "pytest"}),
            tool_result("t1", "1 failed", is_error=True, exit_code=1),
        ]
    )
    journal_build(tenant=acme, key="wf", items=items)
    _, raw = api_key_create(tenant=acme, name="runtime")

    r = client.get("/api/v1/sessions/wf/main/main/waterfall", HTTP_AUTHORIZATION=f"Bearer {raw}")

    body = r.json()
    assert r.status_code == 200
    assert (body["page"], body["pages"], body["timed"], body["total_ms"]) == (1, 1, True, 4000)
    assert [(s["kind"], s["label"], s["duration_ms"], s["failed"]) for s in body["spans"]] == [
        ("call", "model call", 2000, False),
        ("tool", "exec", 2000, True),
    ]
