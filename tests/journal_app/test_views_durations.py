"""Issue 17 (fresh-eyes finding): a round's duration runs from its first entry's start, so a
Codex round (turn_context, then reasoning, call and output under one timestamp) no longer
reads 0 ms."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from journal_app.rounds import round_duration
from journal_app.selectors import entry_started
from journal_app.services import journal_import
from journal_app.times import entry_time
from journal_app.views.timeline_page import span_text
from tests.conftest import CORPUS
from tests.factories import MembershipFactory, UserFactory

T0 = datetime(2025, 9, 25, 1, 22, 27, tzinfo=UTC)


def test_a_round_runs_from_its_start_to_its_last_timed_entry():
    same = [T0 + timedelta(seconds=7)] * 3  # reasoning, call, output: one timestamp
    assert round_duration(T0, same) == timedelta(seconds=7)
    assert round_duration(None, same) == timedelta(0)  # no start known: first to last
    assert round_duration(None, [T0, T0 + timedelta(seconds=2)]) == timedelta(seconds=2)
    assert round_duration(None, [T0]) is None and round_duration(T0, []) is None
    assert round_duration(T0, [T0]) is None  # one instant took no time


def test_an_entry_starts_at_its_turn_context_when_that_is_earlier():
    meta = {
        "timestamp": "2025-09-25T01:22:34.068Z",
        "turn_context": {"timestamp": "2025-09-25T01:22:27Z"},
    }
    assert entry_started(meta) == T0
    assert entry_started({"timestamp": "2025-09-25T01:22:27Z"}) == T0
    later_context = {"timestamp": "2025-09-25T01:22:27Z", "turn_context": {"timestamp": "bad"}}
    assert entry_started(later_context) == T0 and entry_started({}) is None


@pytest.mark.django_db
def test_codex_rounds_have_a_positive_duration_on_the_timeline(client, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    path = CORPUS / "codex-rollout-jsonl" / "codex-vscode-long-monorepo-session.jsonl"
    journal = journal_import(path=path, tenant="corpus").journal
    tenant = journal.session.tenant
    member = MembershipFactory(tenant=tenant, user=UserFactory(username="bob")).user
    client.force_login(member)
    url = reverse(
        "journal:timeline", args=[tenant.slug, journal.session.key, journal.lane, journal.branch]
    )
    blocks = client.get(url).context["blocks"]
    calls = [b for b in blocks if b.round.kind == "api" and b.round.call_ids and not b.continued]
    assert len(calls) >= 10
    # the source writes a call round's items under one timestamp: first to last is 0 ms
    instant = [b for b in calls if len({r.at for r in b.rows if r.at}) == 1]
    assert len(instant) >= len(calls) - 3
    started = [b for b in calls if "turn_context" in b.rows[0].entry.meta_dict]
    assert len(started) >= len(calls) - 2  # a turn aborted mid-call may carry none
    assert all(b.duration and b.duration != "0 ms" for b in started), [b.duration for b in started]
    for b in started:  # from the model call's start (turn_context) to the round's last entry
        begun = entry_time(b.rows[0].entry.meta_dict["turn_context"])
        assert b.duration == span_text(max(r.at for r in b.rows if r.at) - begun)
