"""API operations of recovery: the agent's ``search``, ``read`` and ``analyst`` tools.

docs/design.md section 7. Mounted by ``config/api.py``. Each operation takes the caller's journal
from ``request.auth`` (the key's tenant plus the session path; another tenant's journals do
not exist for the key) and calls one service. Scope is never a query or body parameter, and
a cursor signed for one scope is refused in any other.

Recovery's domain errors (a refused cursor 400 ``cursor_refused``, a denied request 403, an
unknown entry 404, an unsearchable query 422 ``invalid_query``) are ``DomainError``s that
carry their own status and code; ``config/api.py`` maps them, as every other app's.
"""

from __future__ import annotations

from typing import Annotated, Any

from django.http import Http404, HttpRequest
from ninja import Path, Query, Router

from journal_app.models import Journal
from journal_app.schemas import ERRORS, MAX_SEQ, HashPart, ScopePart
from recovery_app import services
from recovery_app.schemas import AnalystIn, AnalystOut, ReadOut, SearchOut

router = Router(tags=["recovery"])

SCOPE = "/sessions/{session}/{lane}/{branch}/recovery"


def caller_journal(request: HttpRequest, session: str, lane: str, branch: str) -> Journal:
    """The journal of the caller's credentials for this session (``Http404`` outside them).

    ``request.auth.journal`` is the credentials' resolver ``(session, lane, branch) ->
    Journal`` (:class:`journal_app.auth.ApiCaller`), or a journal already bound to the
    caller's session, which must then be the one the path names.
    """
    bound = request.auth.journal
    if callable(bound):
        return bound(session, lane, branch)
    if (bound.session.key, bound.lane, bound.branch) != (session, lane, branch):
        raise Http404(f"no journal {session}/{lane}/{branch}")
    return bound


@router.get(SCOPE + "/search", response={200: SearchOut, **ERRORS}, summary="Search the journal")
def search(
    request: HttpRequest,
    session: ScopePart,
    lane: ScopePart,
    branch: ScopePart,
    q: Annotated[str, Query(min_length=1, max_length=400, pattern=r"^[^\x00]*$")],
    cursor: Annotated[str | None, Query(max_length=2000)] = None,
    limit: Annotated[int, Query(ge=1, le=50)] = 10,
) -> Any:
    """Leads: raw entries holding every term (phrases), in seq order, at a frozen revision.

    Leads are not evidence: read an entry to get it verified. Summaries, compaction markers
    and reasoning blocks are never results. Snippets are filtered (secrets, reasoning).
    """
    journal = caller_journal(request, session, lane, branch)
    page = services.recovery_search(journal=journal, query=q, cursor=cursor, limit=limit)
    return {
        "query": page.query,
        "revision": page.revision,
        "hits": page.hits,
        "next_cursor": page.next_cursor,
    }


#: An entry's seq in a path: a positive 64-bit integer (the database column's range).
SeqPart = Annotated[int, Path(ge=1, le=MAX_SEQ)]


@router.get(SCOPE + "/read/seq/{seq}", response={200: ReadOut, **ERRORS}, summary="Read by seq")
def read_by_seq(
    request: HttpRequest, session: ScopePart, lane: ScopePart, branch: ScopePart, seq: SeqPart
) -> Any:
    """One entry re-read in full and checked against the journal's head: scope, seq, raw,
    hashes, byte length, every chunk. Content only when every check passes; secrets and
    hidden reasoning filtered, and ``filtered`` says so.

    An entry is named by its seq here, by its hash on ``read/entry/{entry}``: one route
    each, so the schema says what the server enforces, exactly one of the two."""
    journal = caller_journal(request, session, lane, branch)
    return services.recovery_read(journal=journal, seq=seq).__dict__


@router.get(
    SCOPE + "/read/entry/{entry}", response={200: ReadOut, **ERRORS}, summary="Read by hash"
)
def read_by_entry(
    request: HttpRequest,
    session: ScopePart,
    lane: ScopePart,
    branch: ScopePart,
    entry: HashPart,
    start: Annotated[int | None, Query(ge=0)] = None,
    end: Annotated[int | None, Query(ge=1)] = None,
) -> Any:
    """The entry of this hash (``sha256:<hex>`` or hex), re-read and verified as
    ``read/seq/{seq}`` does. With ``start`` and ``end`` (characters of the entry's text,
    ``end`` excluded), only that range: what a pinned message's attachment receipt names
    (``read(entry=sha256:..., range=[start, end])``), with its ``range_sha256``."""
    journal = caller_journal(request, session, lane, branch)
    if (start is None) != (end is None):
        raise services.RecoveryError("give both start and end, or neither")
    text_range = (start, end) if start is not None and end is not None else None
    return services.recovery_read(journal=journal, entry=entry, text_range=text_range).__dict__


@router.post(SCOPE + "/analyst", response={200: AnalystOut, **ERRORS}, summary="Ask the analyst")
def analyst(
    request: HttpRequest, session: ScopePart, lane: ScopePart, branch: ScopePart, payload: AnalystIn
) -> Any:
    """A bounded attempt (3 rounds, 4 searches, 8 reads, ...) answering ``question`` with
    claims marked current (at the revision), historical, reported or unresolved, each with
    exact quotes from hash-verified byte ranges; claims whose citations fail are listed as
    rejected with the reason. The claims are not checked for entailment."""
    journal = caller_journal(request, session, lane, branch)
    receipt = services.recovery_analyst(journal=journal, question=payload.question)
    return analyst_out(receipt)


def analyst_out(receipt: Any) -> dict[str, Any]:
    """The analyst's answer from its receipt."""
    return {
        "receipt": receipt.pk,
        "outcome": receipt.outcome,
        "reason": receipt.reason,
        "revision": receipt.snapshot.get("revision", 0),
        "claims": [
            {
                "claim": c["claim"],
                "status": c["status"],
                "citations": [{**x, "entry": "sha256:" + x["entry"]} for x in c["citations"]],
            }
            for c in receipt.claims
        ],
        "rejected": [
            {
                "claim": str(c.get("claim", "")),
                "status": str(c.get("status", "")),
                "reason": c["reason"],
            }
            for c in receipt.rejected_claims
        ],
        "queries": [q["query"] for q in receipt.queries],
        "usage": receipt.usage,
    }
