"""API operations of the audit app: the audited read of an entry's stored bytes.

``GET /entries/{entry_hash}/raw``: every other entry endpoint shows bodies filtered by
:mod:`journal_app.privacy`; this one returns the stored canonical JSON, unfiltered, to a key
whose user is an admin of the key's tenant (a ``reviewer`` key of an admin), and logs each
read (:func:`audit_app.reads.entry_read_raw`). A ``client`` key is refused 403
(``forbidden``), and the refusal is logged too. Thin: one service call; errors are mapped
in ``config/api.py``.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest
from ninja import Router, Schema
from pydantic import Field

from audit_app.reads import entry_read_raw
from journal_app.hashing import display, strip_prefix
from journal_app.models import Entry
from journal_app.schemas import ERRORS, HashPart
from journal_app.services import entry_check

router = Router(tags=["audit"])


class EntryRawOut(Schema):
    """The stored bytes of an entry (canonical JSON, RFC 8785), unfiltered.

    ``body`` is the UTF-8 text of exactly the bytes ``body_hash`` is computed over
    (``byte_length`` of them); ``hash_verified`` is recomputed for this response.
    """

    entry_hash: str
    body_hash: str
    byte_length: int
    hash_verified: bool
    problems: list[str]
    body: str = Field(description="the stored canonical JSON body, not filtered")


@router.get(
    "/entries/{entry_hash}/raw",
    response={200: EntryRawOut, **ERRORS},
    summary="Read an entry's stored bytes, unfiltered (tenant admins; audited)",
)
def entry_raw(request: HttpRequest, entry_hash: HashPart) -> Any:
    """The stored body of the entry a hash names, in the key's tenant only (404 elsewhere).

    Needs a key whose user is a tenant admin; any other key gets 403 ``forbidden``. Each
    read and each refusal is an audit event (``entry.read_raw``, ``entry.read_raw.denied``).
    """
    entry = (
        Entry.objects.filter(
            journal__session__tenant=request.auth.tenant, entry_hash=strip_prefix(entry_hash)
        )
        .select_related("journal__session__tenant")
        .first()
    )
    if entry is None:
        raise Http404("no such entry")
    data = entry_read_raw(entry=entry, actor=request.auth, via="api")
    problems = entry_check(entry, chain=True)
    return {
        "entry_hash": display(entry.entry_hash),
        "body_hash": display(entry.body_hash),
        "byte_length": len(data),
        "hash_verified": not problems,
        "problems": problems,
        "body": data.decode("utf-8", errors="surrogatepass"),
    }
