"""Search backends: one contract on SQLite FTS5 and PostgreSQL full-text search.

The same tests run on both databases (``make test`` runs the suite on each); the contract
is stated independently by :func:`recovery_app.lexical.matches`, and every backend result
is compared with it.
"""

from __future__ import annotations

import importlib
import random

import pytest
from django.apps import apps
from django.db import connection

from journal_app.formats.base import ParsedEntry, message, tool_call, tool_result
from journal_app.models import AppendOnlyError, Entry
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from recovery_app.lexical import SEGMENT_TOKENS, matches, parse_query
from recovery_app.models import SearchIndexState, SearchSegment
from recovery_app.search import backend, index_sync

pytestmark = pytest.mark.django_db


def _journal(key="s1", lane="main", items=()):
    t = tenant_ensure(slug="acme")
    j = journal_ensure(session=session_ensure(tenant=t, key=key), lane=lane)
    if items:
        journal_append(journal=j, items=list(items))
    index_sync(journal=j)
    j.refresh_from_db()
    return j


def _search(j, q, revision=None, **kw):
    leads = backend().search(
        journal_id=j.pk,
        revision=j.head_seq if revision is None else revision,
        query=parse_query(q),
        **kw,
    )
    return [lead.seq for lead in leads]


ITEMS = [
    message("user", "Apply migration 0042_add_refund_index to billing."),
    tool_call(
        "m1", "exec", {"command": "python manage.py migrate billing 0042_add_refund_index --fake"}
    ),
    tool_result("m1", "Applying billing.0042_add_refund_index... FAKED"),
    ParsedEntry(
        kind="reasoning",
        role="assistant",
        content={"text": "secret plan about 0042_add_refund_index"},
    ),
    ParsedEntry(
        kind="event",
        role="runtime",
        derived=True,
        content={"type": "summary", "text": "Summary: 0042_add_refund_index was applied"},
    ),  # fmt: skip
    message("assistant", "The REFUND index exists; Größe café 日本語 noted."),
    message("user", "index the refund table later"),
]


def test_it_is_the_backend_of_the_database():
    assert backend().vendor == connection.vendor


def test_results_are_raw_entries_holding_every_term_in_seq_order():
    j = _journal(items=ITEMS)
    assert _search(j, "0042_add_refund_index") == [1, 2, 3]  # not reasoning (4), not summary (5)
    assert _search(j, "0042_add_refund_index fake") == [2]
    assert _search(j, "refund index") == [1, 2, 3, 6, 7]  # two terms, any order
    assert _search(j, '"refund index"') == [1, 2, 3, 6]  # a phrase: adjacent, in order
    assert _search(j, "FAKED") == [3] and _search(j, "faked") == [3]
    assert _search(j, "größe café") == [6] and _search(j, "日本語") == [6]
    assert _search(j, "nothing_like_this") == []


def test_revision_after_limit_and_exclude_bound_the_results():
    j = _journal(items=ITEMS)
    assert _search(j, "refund", revision=2) == [1, 2]
    assert _search(j, "refund", after=2) == [3, 6, 7]
    assert _search(j, "refund", limit=2) == [1, 2]
    assert _search(j, "refund", exclude=[1, 6]) == [2, 3, 7]


def test_other_journals_never_leak_in():
    j = _journal(items=ITEMS)
    other_lane = _journal(lane="worker", items=[message("user", "refund elsewhere")])
    other_session = _journal(key="s2", items=[message("user", "refund elsewhere")])
    assert _search(j, "elsewhere") == []
    assert _search(other_lane, "refund") == [1] and _search(other_session, "refund") == [1]


def test_a_term_deep_in_a_long_entry_is_found():
    words = " ".join(f"w{i}" for i in range(SEGMENT_TOKENS + 500))
    j = _journal(items=[message("assistant", words + " needle_0042 end")])
    assert SearchSegment.objects.filter(journal=j).count() == 2
    assert _search(j, "needle_0042") == [1]  # past PostgreSQL's 16,383 positions
    assert _search(j, '"w0 w1 w2"') == [1]
    # a phrase across the cut between segments is inside their overlap
    assert _search(j, f'"w{SEGMENT_TOKENS - 1} w{SEGMENT_TOKENS}"') == [1]


def test_every_backend_result_agrees_with_the_contract():
    rng = random.Random(7)
    vocab = ["alpha", "beta", "gamma", "0042", "fake", "Index", "refund_index", "x-1", "café"]
    items = [
        message(
            rng.choice(["user", "assistant"]), " ".join(rng.choices(vocab, k=rng.randint(1, 8)))
        )
        for _ in range(120)
    ]
    j = _journal(items=items)
    texts = {e.seq: e.text for e in Entry.objects.filter(journal=j)}
    for _ in range(60):
        terms = rng.sample(vocab, rng.randint(1, 3))
        if rng.random() < 0.3:
            terms = ['"' + " ".join(rng.sample(vocab, 2)) + '"']
        q = " ".join(terms)
        expected = [s for s, t in sorted(texts.items()) if matches(parse_query(q), t)]
        assert _search(j, q, limit=1000) == expected, q


def test_appends_are_indexed_by_the_signal_after_commit(django_capture_on_commit_callbacks):
    t = tenant_ensure(slug="acme")
    j = journal_ensure(session=session_ensure(tenant=t, key="sig"))
    with django_capture_on_commit_callbacks(execute=True):
        journal_append(journal=j, items=[message("user", "index me: 0042_add_refund_index")])
    assert SearchIndexState.objects.get(journal=j).indexed_seq == 1
    assert SearchSegment.objects.filter(journal=j, seq=1).count() == 1
    with django_capture_on_commit_callbacks(execute=True):
        journal_append(journal=j, items=[message("user", "and me")])
    assert SearchIndexState.objects.get(journal=j).indexed_seq == 2


def test_sync_catches_up_and_is_idempotent():
    t = tenant_ensure(slug="acme")
    j = journal_ensure(session=session_ensure(tenant=t, key="lazy"))
    journal_append(journal=j, items=ITEMS)  # no commit callbacks in this test: not indexed yet
    assert not SearchSegment.objects.filter(journal=j).exists()
    assert index_sync(journal=j, upto=3) == 3
    assert index_sync(journal=j) == len(ITEMS)
    count = SearchSegment.objects.filter(journal=j).count()
    assert index_sync(journal=j) == len(ITEMS)
    assert SearchSegment.objects.filter(journal=j).count() == count == 5  # 2 never indexed


def test_the_index_is_append_only():
    j = _journal(items=ITEMS)
    with pytest.raises(AppendOnlyError):
        SearchSegment.objects.filter(journal=j).update(tokens="")
    with pytest.raises(AppendOnlyError):
        SearchSegment.objects.filter(journal=j).first().delete()


def test_the_data_migration_indexes_entries_that_predate_the_index():
    t = tenant_ensure(slug="acme")
    j = journal_ensure(session=session_ensure(tenant=t, key="old"))
    journal_append(journal=j, items=ITEMS)
    fill = importlib.import_module("recovery_app.migrations.0003_fill_search_index")
    fill.forwards(apps, None)
    assert SearchIndexState.objects.get(journal=j).indexed_seq == len(ITEMS)
    j.refresh_from_db()
    assert _search(j, "0042_add_refund_index") == [1, 2, 3]
