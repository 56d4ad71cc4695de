"""The derived-rows task: identifiers and search segments window by window with one privacy
memo per window, the same rows as each derived alone, each text scanned once."""

import pytest
from django.db import connection

from journal_app import privacy
from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Entry, EntryIdentifiers
from journal_app.services import entry_identifiers_row
from recovery_app import tasks
from recovery_app.models import SearchSegment
from recovery_app.search import segment_rows
from tests.factories import TenantFactory, journal_build

pytestmark = pytest.mark.django_db

SECRET = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0kLmN"


def items():
    out = []
    for n in range(5):
        out += [
            message("user", f"Use key {SECRET} for run {n}: see billing/refunds.py in 12 ms"),
            tool_call(f"c{n}", "exec", {"command": f"OPENAI_API_KEY={SECRET} pytest -x t{n}.py"}),
            tool_result(f"c{n}", f"ran 8 tests in 0.{n}s; token {SECRET} #12{n}"),
        ]
    return out


def test_windows_write_every_row_as_derived_alone_and_scan_each_text_once(monkeypatch):
    journal = journal_build(tenant=TenantFactory(), items=items())
    entries = list(Entry.objects.filter(journal=journal).order_by("seq"))
    alone_ids = {e.pk: entry_identifiers_row(e).values for e in entries}
    alone_segs = [(s.entry_id, s.segment, s.tokens) for s in segment_rows(entries)]
    scanned: list[str] = []
    real = privacy.findings
    monkeypatch.setattr(privacy, "findings", lambda t: scanned.append(t) or real(t))
    monkeypatch.setattr(tasks, "WINDOW", 4)  # 15 entries: four windows

    out = tasks.derive_appended(journal.pk, 1, journal.head_seq)

    assert out == {"identifiers": 15, "indexed_seq": 15}
    stored = dict(EntryIdentifiers.objects.values_list("entry_id", "values"))
    assert stored == alone_ids
    assert any(["command", v] for rows in stored.values() for _, v in rows)
    assert all(SECRET not in str(v) for v in stored.values())
    segs = SearchSegment.objects.filter(journal=journal).order_by("seq", "segment")
    if connection.vendor == "postgresql":  # a trigger keeps the text as tsv, tokens ''
        alone_segs = [(e, n, "") for e, n, _t in alone_segs]
    assert [(s.entry_id, s.segment, s.tokens) for s in segs] == alone_segs
    assert len(alone_segs) >= 15
    # a message's or a tool output's text is read by both the identifiers and the index:
    # scanned once; a tool call's arguments and its rendered call are different texts
    assert len(scanned) == len(set(scanned))
    texts = {e.text for e in entries if e.kind != "tool_call"}
    assert texts <= set(scanned)
