"""The MCP server for the history tools (docs/design.md section 7, "Agent tools").

Built with the official ``mcp`` SDK (:class:`mcp.server.fastmcp.FastMCP`). Four tools, each
one call of the service the REST API calls, with the same budgets, cursors and filtering:

* ``search(query, cursor?, limit?)``: :func:`recovery_app.services.recovery_search`;
* ``read(seq? | entry?)``: :func:`recovery_app.services.recovery_read`;
* ``analyst(question)``: :func:`recovery_app.services.recovery_analyst`;
* ``ledger(q?)``: the current facts with their support hashes (read-only), shaped as the
  REST ``GET .../ledger`` shapes them.

Scope is never a tool argument: it comes from the key (its tenant) and the session, lane
and branch the server was started with (``manage.py mcp_server --key KEY --session S``).
A session of another tenant does not exist for the key. Refusals come back as tool errors
whose text carries the API's error code (``... not_found: ...``, ``... cursor_refused: ...``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from fnmatch import fnmatchcase
from typing import Any

from asgiref.sync import sync_to_async
from django.db.models import Max
from django.http import Http404
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError

from journal_app.auth import ApiCaller, api_key_authenticate, key_live
from journal_app.errors import DomainError
from journal_app.hashing import display
from journal_app.models import ApiKey, Journal, Session
from ledger_app import selectors
from ledger_app.selectors import presenters
from recovery_app import services as recovery
from recovery_app.api import analyst_out

TOOLS = ("search", "read", "analyst", "ledger")


def _call(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except DomainError as exc:
        raise ToolError(f"{exc.code}: {exc.message or exc.code}") from None
    except Http404 as exc:
        raise ToolError(f"not_found: {exc}") from None


def ledger_read(journal: Journal, q: str = "") -> dict[str, Any]:
    """The latest ledger of ``journal``: facts with support resolved to raw entries."""
    selected = selectors.fold_at(journal, None)
    selection = selectors.facts_at(journal, selected, chosen={}, q=q)
    selection.raise_error()
    known = selectors.entries_known(journal, presenters.support_hashes(selection.shown))
    return {
        "fold": selected.number if selected else None,
        "revision": selected.revision if selected else None,
        "state_hash": display(selected.state_hash) if selected else None,
        "total": selection.total,
        "facts": [
            presenters.fact_out(r.fact, known) for r in presenters.fact_rows(selection.shown, known)
        ],
    }


#: the session or branch name that means "the one written to most recently"
LATEST = "latest"


def live_journal(caller: ApiCaller, session: str, lane: str, branch: str) -> Journal:
    """The journal the tools act in, looked up at each call.

    ``session`` is a session key, a glob pattern (``px-*``: the proxy's derived sessions) or
    ``latest`` (any session of the tenant); ``branch`` a branch name or ``latest``. With a
    pattern, ``latest`` or branch ``latest``, the journal is the matching one (in ``lane``)
    whose newest entry is the newest: the live conversation, including a branch a resampled
    answer opened (README "Use it with your agent").

    Raises:
        Http404: nothing of the key's tenant matches.
    """
    pattern = any(c in session for c in "*?[")
    if not pattern and session != LATEST and branch != LATEST:
        return caller.journal(session, lane, branch)
    journals = Journal.objects.filter(session__tenant=caller.tenant, lane=lane)
    if session != LATEST:
        keys = Session.objects.filter(tenant=caller.tenant).values_list("key", flat=True)
        journals = journals.filter(session__key__in=[k for k in keys if fnmatchcase(k, session)])
    if branch != LATEST:
        journals = journals.filter(branch=branch)
    newest = (
        journals.annotate(last=Max("entries__pk"))
        .filter(last__isnull=False)
        .select_related("session__tenant")
        .order_by("-last")
        .first()
    )
    if newest is None:
        raise Http404(f"no journal of session {session!r}, lane {lane!r}, branch {branch!r}")
    return newest


def build_server(*, key: ApiKey, session: str, lane: str = "main", branch: str = "main") -> FastMCP:
    """An MCP server whose tools act in (key's tenant, ``session``, ``lane``, ``branch``).

    The journal is looked up on every call, so a server started before the runtime's first
    entry works once the session exists; the key is checked again at every call
    (:func:`journal_app.auth.key_live`), so revoking it stops the server's tools.
    """
    caller = ApiCaller(key)
    server = FastMCP(
        "ledgerkeep",
        instructions=(
            "History tools over the journal of this agent session. search gives leads, read "
            "gives hash-verified evidence, analyst answers a question with cited claims, ledger "
            "lists the current facts with their support hashes."
        ),
    )

    def journal() -> Journal:
        return live_journal(caller, session, lane, branch)

    def checked() -> Any:
        # the key is checked again at every call, as the REST API checks it at every
        # request: a key revoked, or whose user left the role, stops working at once
        if key_live(key) is None:
            raise ToolError(
                "unauthenticated: the server's API key was revoked or its user no longer "
                "holds the role it needs"
            )
        return None

    def run(fn: Callable[[], Any]) -> Any:
        return sync_to_async(lambda: (checked(), _call(fn))[1], thread_sensitive=True)()

    @server.tool()
    async def search(query: str, cursor: str | None = None, limit: int = 10) -> dict[str, Any]:
        """Search the session's journal: leads (seq, entry hash, filtered snippet) in seq order.

        Leads are not evidence: read an entry to get it verified. Pass next_cursor back as
        cursor for the next page (the revision stays frozen)."""
        if not 1 <= limit <= 50:
            raise ToolError("validation_error: limit must be between 1 and 50")

        def go() -> dict[str, Any]:
            page = recovery.recovery_search(
                journal=journal(), query=query, cursor=cursor, limit=limit
            )
            return {
                "query": page.query,
                "revision": page.revision,
                "hits": page.hits,
                "next_cursor": page.next_cursor,
            }

        return await run(go)

    @server.tool()
    async def read(seq: int | None = None, entry: str | None = None) -> dict[str, Any]:
        """Read one entry (by seq or sha256 entry hash) in full, re-checked against the journal:
        scope, seq, hashes, byte length, every chunk. Secrets and hidden reasoning filtered."""
        return await run(
            lambda: recovery.recovery_read(journal=journal(), seq=seq, entry=entry).__dict__
        )

    @server.tool()
    async def analyst(question: str) -> dict[str, Any]:
        """Ask a bounded analyst (3 rounds, 4 searches, 8 reads): claims marked current,
        historical, reported or unresolved, each with exact quotes from verified entries."""

        def go() -> dict[str, Any]:
            out = analyst_out(recovery.recovery_analyst(journal=journal(), question=question))
            return json.loads(json.dumps(out, default=str))

        return await run(go)

    @server.tool()
    async def ledger(q: str = "") -> dict[str, Any]:
        """The current ledger: every fact with category, priority, lifecycle and its support
        (entry hashes and seqs). Orientation only: the support entries are the evidence.
        q filters like the facts page (pin:true text:"migration")."""
        return await run(lambda: ledger_read(journal(), q))

    return server


def bearer_guard(app: Any, key: ApiKey) -> Any:
    """``app`` (the Streamable HTTP ASGI app) behind ``Authorization: Bearer <key>``: every
    HTTP request must carry the server's own key, still live (:func:`journal_app.auth.key_live`);
    anything else is 401 in the API's error shape, before the MCP layer sees it.

    Over stdio the launching process owns the pipe; over HTTP anyone who reaches the port
    would otherwise act with the key the server was started with (fresh eyes).
    """

    def allowed(token: str) -> bool:
        found = api_key_authenticate(raw=token)
        return found is not None and found.pk == key.pk

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            headers = dict(scope.get("headers") or [])
            scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
            ok = scheme.lower() == "bearer" and bool(token.strip())
            if ok:
                ok = await sync_to_async(allowed, thread_sensitive=True)(token.strip())
            if not ok:
                body = json.dumps(
                    {
                        "code": "unauthenticated",
                        "message": "send this server's API key as 'Authorization: Bearer <key>'",
                        "field": None,
                        "entry": None,
                    }
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded
