"""Content search across a tenant's sessions, over the recovery search index (docs/design.md 7, 8).

The index (:mod:`recovery_app.search`) holds each raw entry's privacy-filtered text; the
per-journal backends answer one journal at a time. This reader asks the same index for every
journal of one tenant at once (PostgreSQL ``tsv @@ to_tsquery``, SQLite FTS5 ``MATCH``),
newest session first, a page at a time. A hit's snippet is cut from the entry's text filtered
by :func:`journal_app.privacy.filter_text`, as every other surface shows it, so a search never
confirms a secret's value. README "The UI" (Search) describes the page.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection

from journal_app.content import content_text
from journal_app.models import Entry, Journal, Tenant
from journal_app.privacy import filter_text
from recovery_app.lexical import Query, parse_query, snippet
from recovery_app.models import SearchIndexState
from recovery_app.search import SearchUnavailable, index_sync

#: hits a page lists
PER_PAGE = 25
#: the highest page number served (offset paging; narrow the query beyond it)
MAX_PAGE = 200


@dataclass(frozen=True)
class SearchHit:
    """One matching entry: where it is and a filtered snippet around the first match."""

    entry: Entry
    journal: Journal
    snippet: str


@dataclass(frozen=True)
class SearchPage:
    """A page of hits (``page`` from 1) and whether another page follows."""

    query: Query
    hits: list[SearchHit]
    page: int
    has_next: bool
    journals: int


def _catch_up(journals: list[Journal]) -> None:
    """Index the journals that grew since their last indexing (one query when none did)."""
    indexed = dict(
        SearchIndexState.objects.filter(journal__in=journals).values_list(
            "journal_id", "indexed_seq"
        )
    )
    for j in journals:
        if indexed.get(j.pk, 0) < j.head_seq:
            index_sync(journal=j)


def _matching_ids(journal_ids: list[int], query: Query, offset: int, limit: int) -> list[int]:
    marks = ", ".join(["%s"] * len(journal_ids))
    if connection.vendor == "postgresql":
        sql = (
            "SELECT s.entry_id FROM recovery_app_searchsegment s"
            f" WHERE s.journal_id IN ({marks})"
            " AND s.tsv @@ to_tsquery('simple'::regconfig, %s)"
            " GROUP BY s.entry_id, s.journal_id, s.seq"
            " ORDER BY s.journal_id DESC, s.seq LIMIT %s OFFSET %s"
        )
        params = [*journal_ids, query.tsquery(), limit, offset]
    elif connection.vendor == "sqlite":
        sql = (
            "SELECT s.entry_id FROM recovery_fts f"
            " JOIN recovery_app_searchsegment s ON s.id = f.rowid"
            f" WHERE recovery_fts MATCH %s AND s.journal_id IN ({marks})"
            " GROUP BY s.entry_id, s.journal_id, s.seq"
            " ORDER BY s.journal_id DESC, s.seq LIMIT %s OFFSET %s"
        )
        params = [query.fts5(), *journal_ids, limit, offset]
    else:
        raise SearchUnavailable(f"no search backend for database {connection.vendor!r}")
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return [row[0] for row in cur.fetchall()]


def tenant_search(
    *, tenant: Tenant, raw_query: str, page: int = 1, session_key: str = ""
) -> SearchPage:
    """Entries of ``tenant``'s sessions (or of one session, ``session_key``) whose indexed
    text holds every term of ``raw_query`` (:func:`recovery_app.lexical.parse_query`).

    Args:
        tenant: the tenant searched; the caller has checked the user may read it.
        raw_query: words, ``"quoted phrases"``; at most 400 characters.
        page: 1-based page of :data:`PER_PAGE` hits (clamped to 1..:data:`MAX_PAGE`).
        session_key: narrows the search to one session of the tenant when given.

    Returns:
        :class:`SearchPage`: hits ordered by journal (newest first), then seq.

    Raises:
        QueryInvalid: nothing searchable, or too long a query.
        SearchUnavailable: a database without a search backend.
    """
    query = parse_query(raw_query)
    page = min(max(1, page), MAX_PAGE)
    journals_qs = Journal.objects.filter(session__tenant=tenant).select_related("session")
    if session_key:
        journals_qs = journals_qs.filter(session__key=session_key)
    journals = list(journals_qs)
    if not journals:
        return SearchPage(query, [], page, False, 0)
    _catch_up(journals)
    ids = _matching_ids([j.pk for j in journals], query, (page - 1) * PER_PAGE, PER_PAGE + 1)
    has_next = len(ids) > PER_PAGE and page < MAX_PAGE
    ids = ids[:PER_PAGE]
    by_id = {
        e.pk: e
        for e in Entry.objects.filter(pk__in=ids).only(
            "id", "journal_id", "seq", "kind", "role", "tool_name", "entry_hash", "body"
        )
    }
    by_journal = {j.pk: j for j in journals}
    hits = []
    for pk in ids:
        e = by_id[pk]
        text = filter_text(content_text(e.kind, e.content), kind=e.kind).text
        hits.append(SearchHit(e, by_journal[e.journal_id], snippet(query, text)))
    return SearchPage(query, hits, page, has_next, len(journals))
