"""Steps 1-3 of a journaled call: checked, journaled and (when over budget) compacted.

:func:`call_prepare` runs the service layer in order (:mod:`proxy_app.services`): the key,
the body, the budgets, the scope, the history's placement and the compaction; it is
synchronous (the ORM) and runs one call at a time per process on SQLite.
:func:`answer_journal` journals the upstream's answer afterwards, and the ``X-Ledgerkeep-*``
response headers are built here (:func:`scope_headers`, :func:`prepared_headers`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest

from journal_app.auth import check_body_size
from journal_app.formats.titles import short_title
from ledger_app.background import after_block
from proxy_app import services
from proxy_app.prefix import request_messages
from proxy_app.request_body import request_body
from proxy_app.services import Prepared, Recorded
from proxy_app.services.scope import codex_session_id

log = logging.getLogger("ledgerkeep.proxy")


def scope_headers(recorded: Recorded) -> dict[str, str]:
    """The headers naming where a history landed: session, lane, branch, revision, and
    ``X-Ledgerkeep-Branched-From`` when it opened a new branch."""
    j = recorded.journal
    headers = {
        "X-Ledgerkeep-Session": j.session.key,
        "X-Ledgerkeep-Lane": j.lane,
        "X-Ledgerkeep-Branch": j.branch,
        "X-Ledgerkeep-Revision": str(recorded.revision),
    }
    if recorded.branched_from:
        headers["X-Ledgerkeep-Branched-From"] = recorded.branched_from
    return headers


def prepared_headers(prepared: Prepared) -> dict[str, str]:
    """The headers reporting the compaction: compacted, tokens before and after, the
    working budget, and the latest fold number when there is one."""
    headers = {
        "X-Ledgerkeep-Compacted": "true" if prepared.compacted else "false",
        "X-Ledgerkeep-Tokens-Before": str(prepared.tokens_before),
        "X-Ledgerkeep-Tokens-After": str(prepared.tokens_after),
        "X-Ledgerkeep-Working-Budget": str(prepared.working_budget),
    }
    if prepared.fold is not None:
        headers["X-Ledgerkeep-Fold"] = str(prepared.fold)
    return headers


def answer_journal(record: Callable[[], Recorded]) -> Recorded | None:
    """Journal an answer; a failure is logged, never kept from the client who has it."""
    try:
        with after_block(), services.sqlite_serial():
            return record()
    except Exception:
        log.exception("proxy: the upstream's answer could not be journaled")
        return None


@dataclass
class JournaledCall:
    """A checked, journaled and (when needed) compacted call, ready to go upstream."""

    body: dict[str, Any]
    items: list[Any]
    recorded: Recorded
    prepared: Prepared
    prefix: list[Any]


def call_prepare(request: HttpRequest, surface: str, headers: dict[str, str]) -> JournaledCall:
    """Steps 1-3 (synchronous: the ORM), one call at a time per process on SQLite
    (:func:`proxy_app.services.sqlite_serial`). ``headers`` gets the scope headers once
    known, so a refusal after journaling still names where the messages went. A fold the
    append makes due runs after this, on the background thread or a worker
    (:func:`ledger_app.background.after_block`); the call folds only what it needs, within
    ``PROXY_FOLD_SECONDS`` (:func:`proxy_app.services.request_compact`)."""
    with after_block(), services.sqlite_serial():
        return _checked_and_journaled(request, surface, headers)


def _checked_and_journaled(
    request: HttpRequest, surface: str, headers: dict[str, str]
) -> JournaledCall:
    check_body_size(request)
    key = services.proxy_authenticate(request)
    body = request_body(request)
    output_tokens, items = services.request_read(surface, body)
    working, window = services.budgets_for(
        model=body["model"],
        output_tokens=output_tokens,
        header=request.headers.get(services.HEADER_BUDGET),
    )
    prefix = []
    if surface == "responses" and body.get("previous_response_id"):
        prefix = services.previous_history(key.tenant, body["previous_response_id"])
    scope = services.proxy_scope(
        key=key,
        headers=request.headers,
        items=[*prefix, *items],
        runtime_session=codex_session_id(request),
    )
    title = next(
        (short_title(i.content["text"]) for i in items if i.kind == "message" and i.role == "user"),
        "",
    )
    sent = None if prefix else services.RequestPrefix(*request_messages(surface, body))
    recorded = services.conversation_record(
        scope=scope,
        items=[*prefix, *items],
        title=title,
        source_format=f"proxy-{surface}",
        request=sent,
    )
    headers.update(scope_headers(recorded))
    headers["X-Ledgerkeep-Working-Budget"] = str(working)  # on a refusal too
    prepared = services.request_compact(
        surface=surface,
        body=body,
        recorded=recorded,
        output_tokens=output_tokens,
        working=working,
        window=window,
        request=sent,
    )
    headers.update(prepared_headers(prepared))
    return JournaledCall(body, items, recorded, prepared, prefix)
