"""Migrations 0005-0007: existing entries get their figures hash.

Runs the three steps for real: back to 0004, an entry written the old way (no figures
hash), forward again; the filled hash is the one the append path computes, and
``journal_verify`` then passes (on PostgreSQL with the append-only trigger back on).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from journal_app.chain import figures_hash
from journal_app.models import Entry, Journal
from journal_app.services import journal_verify
from tests.factories import TenantFactory, journal_build

BEFORE = [("journal_app", "0004_journal_ended")]
AFTER = [("journal_app", "0007_entry_figures_hash_not_null")]


@pytest.fixture
def back_to_the_leaves():
    """Whatever the test does, the schema ends at every app's latest migration (the tests
    after this one, live-server ones included, need the whole schema)."""
    yield
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_it_fills_the_figures_hash_of_entries_written_before_it(back_to_the_leaves):
    journal = journal_build(tenant=TenantFactory(slug="mig"))
    expected = dict(Entry.objects.filter(journal=journal).values_list("seq", "figures_hash"))
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    executor.loader.build_graph()
    old = executor.loader.project_state(BEFORE[0]).apps.get_model("journal_app", "Entry")
    assert "figures_hash" not in {f.name for f in old._meta.fields}
    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    filled = dict(Entry.objects.filter(journal=journal).values_list("seq", "figures_hash"))
    assert filled == expected and all(len(h) == 64 for h in filled.values())
    first = Entry.objects.get(journal=journal, seq=1)
    assert first.figures_hash == figures_hash(
        entry_hash=first.entry_hash,
        token_count=first.token_count,
        token_source=first.token_source,
        source_ref=first.source_ref,
        artifact=None,
    )
    # the columns of 0007's journal table only (later migrations add more)
    at_0007 = Journal.objects.only(
        "session", "lane", "branch", "head_seq", "head_hash", "chunk_bytes"
    )
    assert journal_verify(journals=[at_0007.get(pk=journal.pk)]).ok
    if connection.vendor == "postgresql":  # the append-only trigger is on again
        with pytest.raises(Exception, match="append-only"), connection.cursor() as cur:
            cur.execute("UPDATE journal_app_entry SET token_count = 1 WHERE id = %s", [first.pk])
