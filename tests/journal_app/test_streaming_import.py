"""Streaming import: bounded batches in one transaction, the same hashes
as one append, bytes-driven progress, nothing written when it fails half way."""

from __future__ import annotations

import json

import pytest
from django.test import TestCase

from journal_app.formats import FormatError, source
from journal_app.models import Entry, Journal, Session, Tenant
from journal_app.services import imports, journal_import
from journal_app.signals import entries_appended
from tests.conftest import CORPUS

pytestmark = pytest.mark.django_db

CLAUDE = CORPUS / "claude-code-jsonl" / "claude-code-session-frontend-refactor.jsonl"


def test_batches_give_the_hashes_of_one_append(monkeypatch, settings):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**12
    whole = journal_import(path=CLAUDE, tenant="a", session="whole").journal
    monkeypatch.setattr(imports, "BATCH_ENTRIES", 7)
    monkeypatch.setattr(source, "STREAM_FROM_BYTES", 0)
    batched = journal_import(path=CLAUDE, tenant="a", session="batched")
    assert batched.entries == whole.head_seq == batched.journal.head_seq
    # the same entries (the scope differs, so compare what the chain hashes per entry)
    assert list(
        Entry.objects.filter(journal=batched.journal).order_by("seq").values_list("body_hash")
    ) == list(Entry.objects.filter(journal=whole).order_by("seq").values_list("body_hash"))
    again = journal_import(path=CLAUDE, tenant="a", session="batched")
    assert (again.append.appended, again.append.unchanged) == (0, whole.head_seq)
    assert again.journal.head_hash == batched.journal.head_hash
    s = Session.objects.get(key="batched")
    assert s.title == Session.objects.get(key="whole").title != ""
    assert s.meta == Session.objects.get(key="whole").meta


def test_one_signal_per_journal_per_import(monkeypatch, settings):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**12
    monkeypatch.setattr(imports, "BATCH_ENTRIES", 5)
    sent = []

    def spy(sender, *, journal, appended, head_seq, **kw):
        sent.append((journal.pk, appended, head_seq))

    entries_appended.connect(spy, weak=False)
    try:
        with TestCase.captureOnCommitCallbacks(execute=True):
            result = journal_import(path=CLAUDE, tenant="a", session="s")
    finally:
        entries_appended.disconnect(spy)
    j = result.journal
    assert sent == [(j.pk, j.head_seq, j.head_seq)]


def test_progress_reports_bytes_read(monkeypatch, tmp_path, settings):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**12
    monkeypatch.setattr(imports, "BATCH_ENTRIES", 10)
    monkeypatch.setattr(source, "STREAM_FROM_BYTES", 0)
    monkeypatch.setattr(source, "_READ", 4096)
    calls = []
    journal_import(path=CLAUDE, tenant="a", session="p", progress=lambda d, t: calls.append((d, t)))
    size = CLAUDE.stat().st_size
    assert len(calls) > 3 and all(t == size for _, t in calls)
    done = [d for d, _ in calls]
    assert done == sorted(done) and done[-1] == size and done[0] < size


def test_a_failure_after_some_batches_writes_nothing(monkeypatch, tmp_path, settings):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**12
    monkeypatch.setattr(imports, "BATCH_ENTRIES", 5)
    monkeypatch.setattr(source, "STREAM_FROM_BYTES", 0)
    path = tmp_path / "broken.jsonl"
    text = CLAUDE.read_text()
    lines = text.count("\n")
    path.write_text(text + '{"type": "user", "uuid": "zz", "sessionId": "x"}\n')
    with pytest.raises(FormatError) as err:
        journal_import(path=path, tenant="fresh", session="s")
    assert err.value.location == f"line {lines + 1}" and err.value.field == "message"
    assert not Tenant.objects.filter(slug="fresh").exists()
    assert Journal.objects.count() == Entry.objects.count() == 0


def test_an_invalid_entry_is_named_by_its_source_line(monkeypatch, tmp_path, settings):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**12
    monkeypatch.setattr(imports, "BATCH_ENTRIES", 3)
    path = tmp_path / "chat.json"
    msgs = [{"role": "user", "content": f"m{i}"} for i in range(7)]
    msgs.append({"role": "user", "content": "bad \ud800"})
    path.write_text(json.dumps(msgs), encoding="utf-8")
    with pytest.raises(FormatError) as err:
        journal_import(path=path, tenant="t", session="s")
    assert err.value.location == "index 7" and err.value.field == "content"
    assert Entry.objects.count() == 0


def test_with_debug_on_the_query_log_holds_one_batch_not_the_whole_import(monkeypatch, settings):
    # DEBUG keeps every query's SQL with its parameters (the bodies): an import of a large
    # file in a checkout (DEBUG on by default) grew by each batch's inserts, 9,000 deep
    from django.db import connection, reset_queries

    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**12
    settings.DEBUG = True  # the cursor logs each query, as in a checkout
    monkeypatch.setattr(imports, "BATCH_ENTRIES", 5)
    monkeypatch.setattr(source, "STREAM_FROM_BYTES", 0)
    reset_queries()
    result = journal_import(path=CLAUDE, tenant="a", session="s")
    logged = len(connection.queries_log)
    reset_queries()
    batches = -(-result.journal.head_seq // 5)
    assert batches >= 10
    assert logged < 40  # the last batch's queries and what follows it, not ~10 a batch
