"""Reads whose cost must not follow the ledger's size: the fold's lookups by key,
the facts count a fold records for the facts page, the term index without zero rows."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from bench import fold_scaling
from bench.generator import iter_session
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app import selectors
from ledger_app.models import Fold, LedgerFact, LedgerTerm
from ledger_app.selectors import ledger_facts
from ledger_app.services import ledger_fold, ledger_verify
from ledger_app.services.state import current_facts, latest_fold, writer_state

pytestmark = pytest.mark.django_db


def _journal(key, n, seed=18):
    tenant = tenant_ensure(slug="acme")
    journal = journal_ensure(session=session_ensure(tenant=tenant, key=key))
    journal_append(journal=journal, items=list(iter_session(n, seed=seed)))
    journal.refresh_from_db()
    return journal


def _fold_all(journal, step=24):
    upto = 0
    while upto < journal.head_seq:
        upto += step
        result = ledger_fold(journal=journal, upto=upto, writer="offline", recover=False)
        if result.fold is not None and result.created:
            upto = max(upto, result.fold.seq_end or upto)


def _rows_after(journal, number):
    return ledger_facts._facts_after(journal.pk, number).count()


def test_each_fold_records_its_fact_count_and_the_facts_page_reads_it(settings):
    settings.LEDGER_CONSOLIDATE_AT_TOKENS = 3_000  # consolidations (evictions) happen too
    settings.LEDGER_CHECKPOINT_TARGET_TOKENS = 1_000
    j = _journal("count", 400)
    _fold_all(j)
    folds = list(Fold.objects.filter(journal=j).order_by("number"))
    assert any(f.kind == Fold.Kind.CONSOLIDATION for f in folds)
    for f in folds:
        assert f.manifest["storage"]["facts"] == _rows_after(j, f.number), f.number
        assert f.manifest["storage"]["facts"] == len(Fold.objects.state_after(f)["facts"])
    fold = selectors.fold_at(j, folds[len(folds) // 2].number)
    with CaptureQueriesContext(connection) as ctx:
        selection = selectors.facts_at(j, fold, chosen={})
        page = list(selection.shown[:100])
    assert selection.total == _rows_after(j, fold.number) and page
    assert not [q for q in ctx.captured_queries if "COUNT(" in q["sql"].upper()]
    assert ledger_verify(journal=j).ok


def test_a_fold_stored_before_the_count_is_counted_and_the_next_one_records_it():
    j = _journal("legacy", 200)
    _fold_all(j)
    head = latest_fold(j)
    manifest = Fold.objects.get(pk=head.pk).manifest
    del manifest["storage"]["facts"]
    Fold.objects.filter(pk=head.pk).update(manifest=manifest)
    fold = selectors.fold_at(j, head.number)
    with CaptureQueriesContext(connection) as ctx:
        total = selectors.facts_at(j, fold, chosen={}).total
    assert total == _rows_after(j, head.number)
    assert [q for q in ctx.captured_queries if "COUNT(" in q["sql"].upper()]
    journal_append(journal=j, items=list(iter_session(60, seed=7))[-30:])
    result = ledger_fold(journal=j, writer="offline", recover=False)
    assert result.created
    assert result.fold.manifest["storage"]["facts"] == _rows_after(j, result.fold.number)


def test_a_term_no_active_fact_holds_has_no_row(settings):
    settings.LEDGER_CONSOLIDATE_AT_TOKENS = 3_000  # consolidations evict facts, and terms
    settings.LEDGER_CHECKPOINT_TARGET_TOKENS = 1_000
    j = _journal("terms", 400)
    _fold_all(j)
    assert LedgerFact.objects.filter(journal=j).exclude(until=None).exists()  # facts ended
    assert LedgerTerm.objects.filter(journal=j).exists()
    assert not LedgerTerm.objects.filter(journal=j, facts__lte=0).exists()
    report = ledger_verify(journal=j)
    assert report.ok, report.mismatch


def _rows_read(sql):
    """Rows the scans of ``sql``'s plan read (returned plus removed by a filter)."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    total, stack = 0, [plan[0]["Plan"]]
    while stack:
        node = stack.pop()
        if "Scan" in node["Node Type"] and "Bitmap Index" not in node["Node Type"]:
            loops = node.get("Actual Loops", 1)
            total += (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * loops
        stack.extend(node.get("Plans", []))
    return total


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL planner")
def test_a_folds_lookups_read_a_few_rows_without_planner_statistics():
    """Without statistics (a bulk load not analysed yet), a lookup by key with ``until IS
    NULL`` in SQL, or lookups joined by ``OR``, read every current row of the journal."""
    j = _journal("nostats", 500)
    fold_scaling.seed_ledger(j, 3_000, template_entries=200)
    facts = LedgerFact.objects.filter(journal=j, until__isnull=True)
    assert facts.count() >= 3_000
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM pg_statistic WHERE starelid = 'ledger_app_ledgerfact'::regclass"
        )
        cursor.execute("UPDATE pg_class SET reltuples = -1 WHERE relname = 'ledger_app_ledgerfact'")
    some = list(facts.order_by("pk").values_list("fact_id", flat=True)[:5])
    pin = facts.filter(pin=True).values_list("pin_entry", flat=True).first()
    key = facts.exclude(command_key="").values_list("command_key", flat=True).first()
    with CaptureQueriesContext(connection) as ctx:
        found = current_facts(j, some, [pin])
        state = writer_state(j, latest_fold(j), keys=([key], some))
    assert set(some) <= found.keys() and set(some) <= state["facts"].keys()
    assert any(f.get("command_key") == key for f in state["facts"].values())
    for q in ctx.captured_queries:
        assert _rows_read(q["sql"]) < 200, q["sql"][:300]


def test_the_facts_display_order_has_an_index():
    """``ledgerfact_order`` (journal, priority, fact_id by code point): the first page of the
    facts after a fold is read in index order instead of sorting every row."""
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "ledger_app_ledgerfact")
        assert constraints["ledgerfact_order"]["columns"] == ["journal_id", "priority", "fact_id"]
        if connection.vendor == "postgresql":
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'ledgerfact_order'")
            assert cursor.fetchone()[0].endswith('(journal_id, priority, fact_id COLLATE "C")')
