"""Journaling a resent history: :func:`conversation_record`, the proxy's one placement of a
request's history (and of an answer that could not follow its request).

Only the new suffix is appended (:func:`journal_app.services.journal_append`), the same
history twice appends nothing, and a history that diverges opens a new branch at the
divergence point (:mod:`proxy_app.services.placement`); a request's messages are placed
through the prefix index first (:mod:`proxy_app.services.prefix_index`). Every placement runs
under the session's lock (:func:`proxy_app.services.locks.session_lock`).
"""

from __future__ import annotations

from collections.abc import Sequence

from journal_app.formats.base import ParsedEntry
from journal_app.models import Journal
from journal_app.services import (
    ConflictError,
    GapError,
    journal_ensure,
    session_ensure,
)
from proxy_app.services.locks import session_lock
from proxy_app.services.placement import (
    Recorded,
    place_in_branches,
)
from proxy_app.services.prefix_index import (
    RequestPrefix,
    index_add,
    place_indexed,
)
from proxy_app.services.scope import ProxyScope


def _scope_place(
    scope: ProxyScope,
    items: Sequence[ParsedEntry],
    every: bool,
    request: RequestPrefix | None,
    title: str,
    source_format: str,
    source_name: str,
) -> Recorded:
    """:func:`conversation_record` for a scope (under the session's lock): by the prefix
    index when it places the history, else against every branch of the lane."""
    known = scope.session
    session = known or session_ensure(
        tenant=scope.tenant,
        key=scope.session_key,
        title=title,
        source_format=source_format,
        source_name=source_name,
    )
    recorded = None
    if request is not None and known is not None:
        recorded = place_indexed(session, scope.lane, scope.branch, request, items, every)
    if recorded is None:
        if scope.branch is not None:
            candidates = [journal_ensure(session=session, lane=scope.lane, branch=scope.branch)]
        else:
            candidates = list(
                Journal.objects.filter(session=session, lane=scope.lane).order_by("pk")
            ) or [journal_ensure(session=session, lane=scope.lane)]
        recorded = place_in_branches(candidates, items, every)
    if request is not None:
        index_add(session, scope.lane, scope.branch, request, items, recorded)
    return recorded


def conversation_record(
    *,
    items: Sequence[ParsedEntry],
    scope: ProxyScope | None = None,
    journal: Journal | None = None,
    title: str = "",
    source_format: str = "",
    every: bool = False,
    request: RequestPrefix | None = None,
    source_name: str = "proxy",
) -> Recorded:
    """Journal a resent history: the new suffix only, or a new branch where it diverges.

    Args:
        scope: from :func:`proxy_app.services.scope.proxy_scope`; its session is created on
            first use (needed unless ``journal`` is given).
        items: the whole history as journal items (:func:`proxy_app.matching.request_items`,
            plus the answer's items when recording an answer).
        journal: place in this branch only (answers go where their request went); default:
            the branch the header names, else the branch of the lane sharing the longest
            prefix with ``items`` (``main`` for a new session).
        every: match events and reasoning too (:func:`proxy_app.matching.match_key`): a
            followed file holds every record, a runtime's resent history does not.
        request: the request's messages as sent, when ``items`` are read from them: the
            history is then placed through the prefix index
            (:func:`proxy_app.services.prefix_index.place_indexed`: the stored prefix found
            from one digest, only the suffix read and keyed) and the request's own placement
            is recorded there for the next call.
        source_name: the new session's ``source_name`` (``proxy``; a followed file's
            absolute path, which :func:`proxy_app.follow.follow_file` checks its key against).

    Returns:
        :class:`proxy_app.services.placement.Recorded`. Idempotent: the same history again
        appends nothing. One transaction: a refused item leaves nothing written, session
        included.

    Concurrent calls of one session wait for each other
    (:func:`proxy_app.services.locks.session_lock`), so each places its history against what
    the others wrote: two histories that extend one prefix with different messages land as
    siblings (the second on a new branch), never as a conflict.

    Raises:
        EntryInvalid: from ``journal_append``; nothing written.
        ConflictError, GapError: only when a writer outside the proxy raced it twice.
    """
    if journal is not None:
        tenant_id, session_key = journal.session.tenant_id, journal.session.key
    else:
        assert scope is not None, "a scope or a journal is needed"
        tenant_id, session_key = scope.tenant.pk, scope.session_key
    for attempt in (1, 2):
        try:
            with session_lock(tenant_id, session_key):
                if journal is not None:
                    recorded = place_in_branches([journal], items, every)
                else:
                    assert scope is not None
                    recorded = _scope_place(
                        scope, items, every, request, title, source_format, source_name
                    )
            if scope is not None:
                scope.session = recorded.journal.session
            return recorded
        except (ConflictError, GapError):
            # only a writer outside the proxy (an import, the REST API) can race the lock
            if attempt == 2:
                raise
    raise AssertionError("unreachable")
