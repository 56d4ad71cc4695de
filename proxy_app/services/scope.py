"""Who a proxied call is and where it writes: the key, the session, the lane, the branch.

* :func:`proxy_authenticate`: the live key of the call (``X-Ledgerkeep-Key`` or a ledgerkeep
  key sent as the provider credential), counted against the API's rate limits;
* :func:`proxy_scope`: the key's tenant, the session (from ``X-Ledgerkeep-Session``, else
  :func:`derived_session_key` of the first system and user message), the lane and the branch
  header, each checked against the journal's scope rule;
* the ``X-Ledgerkeep-*`` request header names.

Nothing here writes to the journal (the rate limits count in the cache): a new session is
created where the history is journaled
(:func:`proxy_app.services.conversation.conversation_record`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from django.http import HttpRequest

from journal_app.auth import api_key_authenticate, check_failure_limit, check_rate_limit
from journal_app.formats.base import ParsedEntry
from journal_app.hashing import canonical_body
from journal_app.models import ApiKey, Session, Tenant
from journal_app.schemas import SCOPE_PART
from proxy_app.errors import (
    ProxyRequestInvalid,
    Unauthenticated,
)
from proxy_app.upstream import tenant_key_in

HEADER_KEY = "X-Ledgerkeep-Key"
HEADER_SESSION = "X-Ledgerkeep-Session"
HEADER_LANE = "X-Ledgerkeep-Lane"
HEADER_BRANCH = "X-Ledgerkeep-Branch"
HEADER_BUDGET = "X-Ledgerkeep-Working-Budget"
SESSION_PREFIX = "px-"


def proxy_authenticate(request: HttpRequest) -> ApiKey:
    """The live key of a proxied call, counted against the API's rate limits.

    The key is ``X-Ledgerkeep-Key``, else a ledgerkeep key sent as the provider credential
    (``Authorization: Bearer lk_...`` or ``x-api-key: lk_...``,
    :func:`proxy_app.upstream.tenant_key_in`; never forwarded upstream, so the server's
    ``UPSTREAM_*_API_KEY`` is then the upstream credential). As on the API
    (:mod:`journal_app.auth`): a refused key counts against the client address
    (``API_AUTH_FAILURE_RATE``), a live one against the key (``API_RATE_LIMIT``).

    Raises:
        Unauthenticated: missing, unknown, malformed or revoked (HTTP 401).
        RateLimited: over either limit (HTTP 429 with ``Retry-After``).
    """
    raw = request.headers.get(HEADER_KEY) or tenant_key_in(request.headers)
    if not raw:
        raise Unauthenticated(
            f"no key: send {HEADER_KEY}, or the ledgerkeep key as the API key "
            "(Authorization: Bearer lk_... or x-api-key: lk_...)",
            field=HEADER_KEY,
        )
    key = api_key_authenticate(raw=raw.strip())
    if key is None:
        check_failure_limit(request)
        raise Unauthenticated(f"the {HEADER_KEY} key is unknown or revoked", field=HEADER_KEY)
    check_rate_limit(request, key)
    return key


def derived_session_key(items: Sequence[ParsedEntry]) -> str:
    """A stable session key from the first system and the first user message.

    ``px-`` and 24 hex digits of the sha256 of ``{"system": text, "user": text}`` in
    canonical JSON: every call of one conversation derives the same key.
    """
    first: dict[str, str] = {"system": "", "user": ""}
    for item in items:
        if item.kind == "message" and item.role in ("system", "developer") and not first["system"]:
            first["system"] = item.content.get("text", "")
        if item.kind == "message" and item.role == "user" and not first["user"]:
            first["user"] = item.content.get("text", "")
    return SESSION_PREFIX + hashlib.sha256(canonical_body(first)).hexdigest()[:24]


@dataclass
class ProxyScope:
    """The scope a proxied call writes to: tenant, session key, lane, branch header."""

    tenant: Tenant
    session_key: str
    lane: str
    branch: str | None
    session: Session | None = None


def _scope_header(headers: Mapping[str, str], name: str, part: str) -> str | None:
    """The value of a scope header, checked against the journal's scope rule; ``None`` if unset.

    Raises:
        ProxyRequestInvalid: a value the journal refuses as a session, lane or branch name
            (HTTP 422, ``field`` names the header); nothing is journaled or forwarded.
    """
    value = (headers.get(name) or "").strip()
    if not value:
        return None
    if not re.fullmatch(SCOPE_PART, value):
        raise ProxyRequestInvalid(
            f"{name}: {part} {value!r} is not valid: use 1-100 letters, digits, '.', '_' or '-'",
            field=name,
        )
    return value


def proxy_scope(
    *, key: ApiKey, headers: Mapping[str, str], items: Sequence[ParsedEntry]
) -> ProxyScope:
    """Resolve the scope from the key and the ``X-Ledgerkeep-*`` headers.

    Sessions are per tenant (as in the REST API): the session header is looked up in the
    key's tenant only, and a name the tenant does not have yet is created there on the first
    journaled call (:func:`proxy_app.services.conversation.conversation_record`), whatever
    other tenants call theirs.

    Raises:
        ProxyRequestInvalid: a session, lane or branch header that is not a valid scope part
            (:data:`journal_app.schemas.SCOPE_PART`), HTTP 422 naming the header.
    """
    tenant = key.tenant
    raw = _scope_header(headers, HEADER_SESSION, "session")
    session_key = raw or derived_session_key(items)
    lane = _scope_header(headers, HEADER_LANE, "lane") or "main"
    branch = _scope_header(headers, HEADER_BRANCH, "branch")
    session = Session.objects.filter(tenant=tenant, key=session_key).first()
    return ProxyScope(tenant, session_key, lane, branch, session)
