"""What a context build reads (docs/design.md 6): a bounded number of queries however long the
journal, no model instance per entry, and the same entry views and receipts as a row read
through :func:`ledger_app.services.entry_view`."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Entry
from journal_app.services import tenant_ensure
from journal_app.tokens import source_label
from ledger_app.services import entry_view
from ledger_app.services.context import context_build, context_preview
from ledger_app.services.context_reads import read_entries
from tests.factories import journal_build

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path / "media"


def rounds(n: int, big: str = "") -> list:
    """A user request, then ``n`` rounds of a call and its result (one result ``big``)."""
    items = [message("system", "Be terse."), message("user", "Check the totals.")]
    for i in range(n):
        items += [
            tool_call(f"c{i}", "read", {"path": f"src/m{i}.py", "note": "\U0001f600"}),
            tool_result(f"c{i}", big if big and i == 1 else f"line {i}: total {i * 3} EUR"),
            message("assistant", f"Read m{i}: ok."),
        ]
    return items


def queries_of(journal, **kwargs) -> int:
    with CaptureQueriesContext(connection) as captured:
        result = context_preview(journal=journal, views=("model", "debug"), **kwargs)
    assert result.status == "ok", result.failure
    return len(captured.captured_queries)


def test_a_build_reads_the_same_number_of_queries_for_ten_and_a_hundred_rounds():
    tenant = tenant_ensure(slug="reads")
    short = journal_build(tenant=tenant, key="short", items=rounds(10))
    long = journal_build(tenant=tenant, key="long", items=rounds(100))
    assert long.head_seq > 5 * short.head_seq
    budgets = {"working_budget": 50_000, "hard_limit": 50_000}
    assert queries_of(short, **budgets) == queries_of(long, **budgets)


def test_entry_rows_are_never_model_instances_in_a_build(monkeypatch):
    journal = journal_build(tenant=tenant_ensure(slug="reads"), items=rounds(20))
    made = []
    real = Entry.from_db.__func__

    def counted(cls, db, field_names, values):
        made.append(values)
        return real(cls, db, field_names, values)

    monkeypatch.setattr(Entry, "from_db", classmethod(counted))
    result = context_build(journal=journal, working_budget=50_000, hard_limit=50_000, write=False)
    assert result.status == "ok", result.failure
    assert made == []


def test_the_views_stored_counts_and_receipts_equal_a_row_read():
    big = "\n".join(f"row {i}: amount {i * 7} EUR" for i in range(3000))
    journal = journal_build(tenant=tenant_ensure(slug="reads"), items=rounds(4, big=big))
    views, stored, receipts = read_entries(journal, journal.head_seq - 2)
    rows = list(
        Entry.objects.filter(journal=journal, seq__lte=journal.head_seq - 2)
        .select_related("journal", "artifact__tenant")
        .order_by("seq")
    )
    assert views == [entry_view(e) for e in rows]
    label = source_label(settings.TOKEN_ENCODING)
    assert stored == {e.entry_hash: e.token_count for e in rows if e.token_source == label}
    with_artifact = [e for e in rows if e.artifact_id is not None]
    assert len(with_artifact) == 1  # the big result
    assert receipts == {e.entry_hash: e.artifact.receipt() for e in with_artifact}
