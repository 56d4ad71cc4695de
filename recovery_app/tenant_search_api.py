"""API operation of content search across the key's tenant: the same hits as the "Search"
page (:func:`recovery_app.tenant_search.tenant_search`). Mounted by ``config/api.py``."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Query, Router, Schema

from journal_app.hashing import display
from journal_app.schemas import ERRORS
from recovery_app.tenant_search import MAX_PAGE, tenant_search

router = Router(tags=["recovery"])


class TenantHitOut(Schema):
    """One matching entry; ``snippet`` is privacy-filtered."""

    session: str
    lane: str
    branch: str
    seq: int
    kind: str
    role: str
    tool_name: str
    entry_hash: str
    snippet: str


class TenantSearchOut(Schema):
    """A page of hits (25) across the tenant's sessions."""

    query: str
    page: int
    has_next: bool
    journals: int
    hits: list[TenantHitOut]


@router.get("/search", response={200: TenantSearchOut, **ERRORS}, summary="Search every session")
def search_sessions(
    request: HttpRequest,
    q: Annotated[str, Query(min_length=1, max_length=400, pattern=r"^[^\x00]*$")],
    page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1,
    session: Annotated[str, Query(max_length=200, pattern=r"^[^\x00]*$")] = "",
) -> Any:
    """Raw entries of every session of the key's tenant (or of ``session``) holding every
    term of ``q`` (words, ``"phrases"``), newest journal first, then by seq; 422
    ``invalid_query`` for a query with nothing searchable."""
    result = tenant_search(tenant=request.auth.tenant, raw_query=q, page=page, session_key=session)
    return {
        "query": result.query.text,
        "page": result.page,
        "has_next": result.has_next,
        "journals": result.journals,
        "hits": [
            {
                "session": h.journal.session.key,
                "lane": h.journal.lane,
                "branch": h.journal.branch,
                "seq": h.entry.seq,
                "kind": h.entry.kind,
                "role": h.entry.role,
                "tool_name": h.entry.tool_name,
                "entry_hash": display(h.entry.entry_hash),
                "snippet": h.snippet,
            }
            for h in result.hits
        ],
    }
