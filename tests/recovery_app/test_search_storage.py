"""The search index keeps each segment's text once (migration 0004, bench/README.md "Storage").

On PostgreSQL the ``BEFORE INSERT`` trigger turns a segment's tokens into ``tsv`` and stores
``''`` in ``tokens``; searches (phrases included) read only ``tsv``. The migration's backward
step rebuilds the text from ``tsv``'s positions, token for token. SQLite keeps the text: its
FTS5 table reads it.
"""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.db import connection

from journal_app.formats.base import message
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from recovery_app.lexical import parse_query, segments, tokenize
from recovery_app.models import SearchSegment
from recovery_app.search import backend, index_sync

pytestmark = pytest.mark.django_db

TEXT = "Deploy the Fix to build 42 now; then the fix ships. Résumé 0042_add_refund_index"


def _indexed():
    j = journal_ensure(session=session_ensure(tenant=tenant_ensure(slug="acme"), key="s"))
    journal_append(journal=j, items=[message("user", TEXT), message("assistant", "fix ok")])
    index_sync(journal=j)
    j.refresh_from_db()
    return j


def _seqs(j, q):
    leads = backend().search(journal_id=j.pk, revision=j.head_seq, query=parse_query(q))
    return [lead.seq for lead in leads]


def test_segments_hold_their_text_once_and_phrases_still_match():
    j = _indexed()
    stored = list(SearchSegment.objects.filter(journal=j).order_by("seq").values_list("tokens"))
    if connection.vendor == "postgresql":
        assert stored == [("",), ("",)]
    else:
        assert stored[0] == (segments(tokenize(TEXT))[0],)
    assert _seqs(j, '"the fix ships"') == [1]
    assert _seqs(j, '"fix ships the"') == []
    assert _seqs(j, "fix") == [1, 2]
    assert _seqs(j, "résumé 0042_add_refund_index") == [1]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the trigger is PostgreSQL's")
def test_the_backward_migration_rebuilds_the_text_from_tsv():
    j = _indexed()
    step = importlib.import_module("recovery_app.migrations.0004_searchsegment_tsv_only_h29")
    with connection.cursor() as cur:  # the test's inserts are one open transaction
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
    with connection.schema_editor() as editor:
        step.backwards(apps, editor)
    try:
        tokens = list(
            SearchSegment.objects.filter(journal=j).order_by("seq").values_list("tokens", flat=True)
        )
        assert tokens == [segments(tokenize(TEXT))[0], "fix ok"]
        assert _seqs(j, '"the fix ships"') == [1]
    finally:
        with connection.schema_editor() as editor:
            step.forwards(apps, editor)
    assert set(SearchSegment.objects.filter(journal=j).values_list("tokens", flat=True)) == {""}
    assert _seqs(j, '"the fix ships"') == [1]
