"""Who a proxied call is and where it writes: the key, the session, the lane, the branch.

* :func:`proxy_authenticate`: the live key of the call (``X-Ledgerkeep-Key`` or a ledgerkeep
  key sent as the provider credential), counted against the API's rate limits;
* :func:`proxy_scope`: the key's tenant, the session (from ``X-Ledgerkeep-Session``, else
  the runtime's own session id, :func:`codex_session_id` and :func:`runtime_session_key`,
  else :func:`derived_session_key` of the first system and user message), the lane and the
  branch header, each checked against the journal's scope rule;
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
#: the headers Codex (codex-rs, Responses API) names its session with, read in this order:
#: ``session_id`` (every version), ``conversation_id`` (older versions, the same value);
#: ``build_conversation_headers`` in openai/codex ``codex-rs/codex-api/src/requests/headers.rs``
CODEX_SESSION_HEADERS = ("session_id", "conversation_id")
#: the automatic session of a Codex session: this prefix and its id
CODEX_SESSION_PREFIX = SESSION_PREFIX + "codex-"
_KEY_CHARS = re.compile(r"[^A-Za-z0-9._-]")


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


def codex_session_id(request: HttpRequest) -> str | None:
    """Codex's own session id of a proxied call (:data:`CODEX_SESSION_HEADERS`), or ``None``.

    Django leaves out of ``request.headers`` every header whose name holds ``_`` (under
    ASGI, the production server, and the development server), so the headers are read from
    the ASGI scope as sent; a WSGI request (the test client) has them in ``META``
    (``HTTP_SESSION_ID``). A blank value counts as none.
    """
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict):
        sent = {
            bytes(name).decode("latin1").lower(): bytes(value).decode("latin1")
            for name, value in scope.get("headers", [])
        }
    else:
        sent = {
            name: str(request.META.get("HTTP_" + name.upper(), ""))
            for name in CODEX_SESSION_HEADERS
        }
    for name in CODEX_SESSION_HEADERS:
        value = (sent.get(name) or "").strip()
        if value:
            return value
    return None


def runtime_session_key(runtime_id: str) -> str:
    """The automatic session key of a runtime's own session id: :data:`CODEX_SESSION_PREFIX`
    and the id (a Codex id is a UUID: ``px-codex-0199a2b4-...``).

    Each id gives one key, and two ids never the same: an id holding characters a session
    key cannot hold (:data:`journal_app.schemas.SCOPE_PART`) has them as ``-`` and 12 hex
    digits of the sha256 of the id added; one too long for a key keeps its start and that
    hash (100 characters).
    """
    clean = _KEY_CHARS.sub("-", runtime_id)
    key = CODEX_SESSION_PREFIX + clean
    if clean == runtime_id and len(key) <= 100:
        return key
    digest = hashlib.sha256(runtime_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{key[: 100 - 13]}-{digest}"


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
    *,
    key: ApiKey,
    headers: Mapping[str, str],
    items: Sequence[ParsedEntry],
    runtime_session: str | None = None,
) -> ProxyScope:
    """Resolve the scope from the key and the ``X-Ledgerkeep-*`` headers.

    The session is ``X-Ledgerkeep-Session`` when given; else, when the call carries the
    runtime's own session id (``runtime_session``, :func:`codex_session_id`), the key
    :func:`runtime_session_key` makes of it, so two Codex sessions that begin alike never
    share a session and one that compacts its history never splits; else the key
    :func:`derived_session_key` derives from the first system and user message.

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
    if raw:
        session_key = raw
    elif runtime_session:
        session_key = runtime_session_key(runtime_session)
    else:
        session_key = derived_session_key(items)
    lane = _scope_header(headers, HEADER_LANE, "lane") or "main"
    branch = _scope_header(headers, HEADER_BRANCH, "branch")
    session = Session.objects.filter(tenant=tenant, key=session_key).first()
    return ProxyScope(tenant, session_key, lane, branch, session)
