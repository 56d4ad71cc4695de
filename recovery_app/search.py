"""Search backends: PostgreSQL full-text search and SQLite FTS5 (docs/design.md section 7).

One interface (:class:`SearchBackend`), one result contract:

* results are raw entries of **one journal** with ``seq <= revision`` and ``seq > after``
  whose indexed tokens hold every term of the query as a phrase
  (:mod:`recovery_app.lexical`), minus ``exclude`` seqs;
* ordered by ``seq`` ascending, each entry once, at most ``limit`` of them;
* derived entries (summaries, compaction markers) and reasoning blocks are never results:
  they are never indexed (:func:`segment_rows`).

A result is a lead (:class:`Lead`), not evidence: the service re-reads and verifies it.
The index is filled by :func:`index_sync`, which catches a journal up to its head: after each
append commits (the queued :func:`recovery_app.tasks.derive_appended`) and before any search,
so a lost run costs latency, not results. On PostgreSQL the segments are written with
``COPY`` and the database generates their ``tsvector`` (migration 0002).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from django.db import connection, transaction

from journal_app.content import content_text
from journal_app.models import Entry, Journal
from journal_app.privacy import Finder, filter_text
from journal_app.services.append import copy_rows
from recovery_app.lexical import Query, segments, tokenize
from recovery_app.models import SearchIndexState, SearchSegment

BATCH = 1000


@dataclass(frozen=True)
class Lead:
    """One search result: where to read, and what the index said the entry's hash is."""

    seq: int
    entry_id: int
    entry_hash: str


class SearchBackend(Protocol):
    """What every backend provides."""

    vendor: str

    def search(
        self,
        *,
        journal_id: int,
        revision: int,
        query: Query,
        after: int = 0,
        limit: int = 10,
        exclude: Sequence[int] = (),
    ) -> list[Lead]:
        """Leads per the module's result contract."""
        ...


def _exclusion(exclude: Sequence[int]) -> tuple[str, list[int]]:
    if not exclude:
        return "", []
    return f" AND s.seq NOT IN ({', '.join(['%s'] * len(exclude))})", [int(x) for x in exclude]


class PostgresSearch:
    """``tsv @@ ('journal:<id>' && to_tsquery('simple', ...))`` on the GIN-indexed column.

    The journal's own lexeme in every segment's ``tsv`` (migration 0002) lets the GIN index
    return only this journal's matches, however common the term is in other journals.
    """

    vendor = "postgresql"

    def search(
        self,
        *,
        journal_id: int,
        revision: int,
        query: Query,
        after: int = 0,
        limit: int = 10,
        exclude: Sequence[int] = (),
    ) -> list[Lead]:
        extra, params = _exclusion(exclude)
        sql = (
            "SELECT s.seq, s.entry_id, e.entry_hash FROM ("
            " SELECT DISTINCT s.seq, s.entry_id FROM recovery_app_searchsegment s"
            " WHERE s.journal_id = %s AND s.seq > %s AND s.seq <= %s"
            " AND s.tsv @@ (%s::tsquery && to_tsquery('simple'::regconfig, %s))" + extra + ""
            " ORDER BY s.seq LIMIT %s) s"
            " JOIN journal_app_entry e ON e.id = s.entry_id ORDER BY s.seq"
        )
        with connection.cursor() as cur:
            cur.execute(
                sql,
                [
                    journal_id,
                    after,
                    revision,
                    f"'journal:{int(journal_id)}'",
                    query.tsquery(),
                    *params,
                    limit,
                ],
            )
            return [Lead(*row) for row in cur.fetchall()]


class SQLiteSearch:
    """``recovery_fts MATCH ...`` on the FTS5 table over the segments."""

    vendor = "sqlite"

    def search(
        self,
        *,
        journal_id: int,
        revision: int,
        query: Query,
        after: int = 0,
        limit: int = 10,
        exclude: Sequence[int] = (),
    ) -> list[Lead]:
        extra, params = _exclusion(exclude)
        sql = (
            "SELECT DISTINCT s.seq, s.entry_id, e.entry_hash FROM recovery_fts f"
            " JOIN recovery_app_searchsegment s ON s.id = f.rowid"
            " JOIN journal_app_entry e ON e.id = s.entry_id"
            " WHERE recovery_fts MATCH %s AND s.journal_id = %s AND s.seq > %s AND s.seq <= %s"
            + extra
            + " ORDER BY s.seq LIMIT %s"
        )
        with connection.cursor() as cur:
            cur.execute(sql, [query.fts5(), journal_id, after, revision, *params, limit])
            return [Lead(*row) for row in cur.fetchall()]


BACKENDS: dict[str, type] = {"postgresql": PostgresSearch, "sqlite": SQLiteSearch}


class SearchUnavailable(Exception):
    """The database has no search backend (only PostgreSQL and SQLite do)."""


def backend() -> SearchBackend:
    """The backend of the default database connection."""
    cls = BACKENDS.get(connection.vendor)
    if cls is None:
        raise SearchUnavailable(f"no search backend for database {connection.vendor!r}")
    return cls()


def indexable(kind: str, derived: bool) -> bool:
    """Whether an entry is indexed: raw and not a reasoning block."""
    return not derived and kind != "reasoning"


def segment_rows(
    entries: Iterable[Entry], *, findings: Finder | None = None
) -> list[SearchSegment]:
    """The :class:`SearchSegment` rows of ``entries`` (not saved). ``findings``: a privacy
    memo (:func:`journal_app.privacy.memo_findings`) shared with the identifiers of the same
    entries, or ``None`` to scan here; the filtered text is the same either way."""
    rows = []
    for e in entries:
        if not indexable(e.kind, e.derived):
            continue
        # the index holds the filtered text: a search must never confirm a secret's value
        # (journal_app.privacy: the same verdict as every other surface)
        text = content_text(e.kind, e.content)
        text = filter_text(text, kind=e.kind, found=findings(text) if findings else None).text
        for n, tokens in enumerate(segments(tokenize(text))):
            rows.append(
                SearchSegment(
                    entry_id=e.pk, journal_id=e.journal_id, seq=e.seq, segment=n, tokens=tokens
                )
            )
    return rows


def index_sync(*, journal: Journal, upto: int | None = None, findings: Finder | None = None) -> int:
    """Index ``journal``'s entries after its indexed seq, up to ``upto`` (default: head).

    Idempotent and safe to call concurrently: the journal's :class:`SearchIndexState` row is
    locked while entries are indexed, and segments are unique per (entry, segment).

    ``findings``: a privacy memo shared with the caller's other derived rows of the same
    entries (:func:`segment_rows`), or ``None``.

    Returns:
        The journal's indexed seq afterwards.
    """
    state = (
        SearchIndexState.objects.filter(journal=journal)
        .values_list("indexed_seq", flat=True)
        .first()
    )
    head = Journal.objects.values_list("head_seq", flat=True).get(pk=journal.pk)
    target = head if upto is None else min(upto, head)
    if state is not None and state >= target:
        return state
    with transaction.atomic():
        st, _ = SearchIndexState.objects.select_for_update().get_or_create(journal=journal)
        last = st.indexed_seq
        while last < target:
            rows = list(
                Entry.objects.filter(journal=journal, seq__gt=last, seq__lte=target)
                .order_by("seq")
                .only("id", "journal_id", "seq", "kind", "derived", "body")[:BATCH]
            )
            if not rows:
                break
            segs = segment_rows(rows, findings=findings)
            if connection.vendor == "postgresql":
                copy_rows(SearchSegment, segs)  # the tsv column is generated by the database
            else:
                SearchSegment.objects.bulk_create(segs, batch_size=BATCH)
            last = rows[-1].seq
        if last != st.indexed_seq:
            SearchIndexState.objects.filter(pk=st.pk).update(indexed_seq=last)
        return last
