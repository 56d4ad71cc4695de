"""The bulk append path, streaming verify and the canonical header.

Runs on SQLite (``bulk_create`` path) and PostgreSQL (``COPY`` path) alike: the same rows,
hashes and errors are asserted on both. Query counts, not times.
"""

from __future__ import annotations

import pytest
import rfc8785
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import given, settings
from hypothesis import strategies as st

from journal_app.entry_validation import EntryInvalid
from journal_app.formats.base import message, tool_call, tool_result
from journal_app.hashing import CanonicalisationError, canonical_record
from journal_app.models import Chunk, Entry, EntryIdentifiers, Journal
from journal_app.services import (
    ConflictError,
    journal_append,
    journal_ensure,
    journal_verify,
    session_ensure,
    tenant_ensure,
)


def _journal(key: str = "s1") -> Journal:
    t = tenant_ensure(slug="acme")
    return journal_ensure(session=session_ensure(tenant=t, key=key))


def _items(n: int, start: int = 0) -> list:
    out = []
    for i in range(start, start + n):
        out.append(message("user", f"step {i}: look at src/mod_{i}.py " + "x" * (i % 7) * 900))
    return out


_ATOM = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.text(),
    st.floats(allow_nan=False, allow_infinity=False),
)
_RECORD = st.recursive(
    st.dictionaries(st.text(), _ATOM, max_size=6),
    lambda inner: st.dictionaries(
        st.text(),
        st.one_of(_ATOM, inner, st.lists(st.one_of(_ATOM, inner), max_size=3)),
        max_size=4,
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_RECORD)
def test_canonical_record_is_rfc8785_for_any_record(record):
    try:
        want = rfc8785.dumps(record)
    except Exception:
        with pytest.raises(CanonicalisationError):
            canonical_record(record)
        return
    assert canonical_record(record) == want


def test_canonical_record_escapes_like_rfc8785_and_refuses_a_lone_surrogate():
    tricky = {"b": '\x00\x1f\x7f\u2028"\\ é 😀', "a": True, "c": None, "d": {"z": 1, "y": -5}}
    assert canonical_record(tricky) == rfc8785.dumps(tricky)
    with pytest.raises(CanonicalisationError, match="surrogate"):
        canonical_record({"a": "\ud800"})


@pytest.mark.django_db
def test_the_bulk_path_stores_the_rows_the_chain_prepares_and_they_verify():
    j = _journal()
    result = journal_append(journal=j, items=_items(12))
    assert [e.seq for e in result.entries] == list(range(1, 13))
    assert all(e.pk is not None and not e._state.adding for e in result.entries)
    stored = list(Entry.objects.filter(journal=j).order_by("seq"))
    assert [e.entry_hash for e in stored] == [e.entry_hash for e in result.entries]
    assert [e.pk for e in stored] == [e.pk for e in result.entries]
    assert all(e.created_at is not None for e in stored)
    # bodies over 4 KiB are cut in several chunks, each linked to its entry
    assert Chunk.objects.filter(entry__journal=j).count() == sum(
        len(range(0, e.byte_length, 4096)) or 1 for e in stored
    )
    assert journal_verify(journals=[j]).ok


@pytest.mark.django_db
def test_an_append_batch_costs_the_same_queries_whatever_its_size():
    """PostgreSQL: one query for the ids and one COPY per table, whatever the batch size;
    SQLite: only the INSERT statements grow (its limit of 999 parameters per statement)."""
    counts, others = [], []
    for n, key in ((5, "small"), (300, "big")):
        j = _journal(key)
        journal_append(journal=j, items=_items(1))
        with CaptureQueriesContext(connection) as ctx:
            journal_append(journal=j, items=_items(n, start=1))
        sqls = [q["sql"] for q in ctx.captured_queries]
        counts.append(len(sqls))
        others.append(len([q for q in sqls if not q.startswith("INSERT")]))
        assert not any("SUM(" in q.upper() for q in sqls)
    assert others[0] == others[1] <= 10, others
    if connection.vendor == "postgresql":
        assert counts[0] == counts[1], counts


@pytest.mark.django_db
def test_the_fold_trigger_after_an_append_runs_no_aggregate(django_capture_on_commit_callbacks):
    j = _journal()
    journal_append(journal=j, items=_items(3))
    with (
        CaptureQueriesContext(connection) as ctx,
        django_capture_on_commit_callbacks(execute=True),
    ):
        journal_append(journal=j, items=_items(3, start=3))
    assert not any("SUM(" in q["sql"].upper() for q in ctx.captured_queries)
    # the derived rows were written after the commit (the queued task, eager here)
    assert EntryIdentifiers.objects.filter(entry__journal=j, entry__seq__gt=3).count() == 3


@pytest.mark.django_db
def test_a_refused_batch_leaves_no_row_and_the_counter_unchanged():
    j = _journal()
    journal_append(journal=j, items=_items(2))
    before = Journal.objects.get(pk=j.pk).unfolded_tokens
    with pytest.raises(ConflictError):
        journal_append(
            journal=j, items=[message("user", "other"), *_items(3, start=2)], start_seq=2
        )
    bad = [*_items(2, start=2), tool_result("nope", "no call before me")]
    with pytest.raises(EntryInvalid):
        journal_append(journal=j, items=bad)
    assert Entry.objects.filter(journal=j).count() == 2
    assert Journal.objects.get(pk=j.pk).unfolded_tokens == before > 0


@pytest.mark.django_db
def test_verify_reads_a_constant_number_of_queries_whatever_the_journal_length():
    counts = []
    for n, key in ((4, "short"), (150, "long")):
        j = _journal(key)
        journal_append(
            journal=j, items=[*_items(n - 2), tool_call("c1", "exec", {}), tool_result("c1", "ok")]
        )
        with CaptureQueriesContext(connection) as ctx:
            report = journal_verify(journals=[j])
        assert report.ok and report.entries == n
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1], counts


@pytest.mark.django_db
def test_verify_still_names_a_changed_chunk_of_a_later_entry():
    j = _journal()
    journal_append(journal=j, items=_items(9))
    e = Entry.objects.get(journal=j, seq=6)  # 5 * 900 bytes of x: two chunks
    c = Chunk.objects.get(entry=e, position=1)
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("SET session_replication_role = replica")
        cur.execute("UPDATE journal_app_chunk SET hash = %s WHERE id = %s", ["0" * 64, c.pk])
        if connection.vendor == "postgresql":
            cur.execute("SET session_replication_role = DEFAULT")
    report = journal_verify(journals=[j])
    assert report.first_failure["seq"] == 6
    assert report.first_failure["problems"] == [
        f"chunk 1: stored offset {c.offset} length {c.length} hash {'0' * 64}, "
        f"recomputed offset {c.offset} length {c.length} hash {c.hash}"
    ]
