"""API keys and the API's authentication (docs/design.md sections 1, 7 and 9).

Keys
----
A key reads ``lk_<8 hex>_<43 url-safe characters>``. The first 11 characters (``lk_`` and
8 hex digits) are its **prefix**: stored in clear, unique, shown in lists and logs. The
whole key is shown once, by :func:`api_key_create`; only its ``sha256`` is stored
(:class:`~journal_app.models.ApiKey`). :func:`api_key_revoke` ends a key for good.

Authentication
--------------
Every API operation uses :data:`api_key_auth` (``Authorization: Bearer <key>``). The tenant
of a call is the key's tenant, never a parameter. On success ninja sets ``request.auth``
to an :class:`ApiCaller`; routers use it like this::

    @router.get("/sessions/{session}/{lane}/{branch}/things")
    def things(request, session: str, lane: str, branch: str):
        journal = request.auth.journal(session, lane, branch)  # Http404 outside the tenant
        request.auth.require_reviewer()                         # PermissionDenied (403)
        tenant = request.auth.tenant                             # for tenant-filtered queries

Any object not reached through ``request.auth`` must be filtered by ``request.auth.tenant``
and answer ``Http404`` when it belongs to another tenant (404, never 403: another tenant's
objects do not exist for this key).

Before the key is checked, the request's declared body size is compared with
``settings.API_MAX_BODY_BYTES``: authentication is the first thing ninja runs for an
operation, before any body is read, so an oversized request is refused (HTTP 413) without
reading it.

A key is refused like an unknown one (401) when its user is no longer active, or no longer
a member of the key's tenant with a role the key needs (keys follow their users).
Once the key is known, its requests are counted (django-ratelimit, in the ``default``
cache): over ``settings.API_RATE_LIMIT`` per key the request is refused with HTTP 429
``rate_limited`` and ``Retry-After``, before any work.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest
from django.utils import timezone
from django_ratelimit.core import get_usage
from ninja.security import HttpBearer

from journal_app.errors import DomainError
from journal_app.models import ApiKey, Journal, Membership, Session, Tenant
from journal_app.services import JournalError

KEY_PREFIX = "lk_"
_KEY = re.compile(r"^(lk_[0-9a-f]{8})_[A-Za-z0-9_-]{43}$")
#: ``last_used_at`` is written at most this often per key (one UPDATE, not one per request).
LAST_USED_RESOLUTION = timedelta(seconds=60)
#: Membership roles that may hold a key of each role (a client key: any member).
KEY_MEMBER_ROLES = {
    ApiKey.Role.CLIENT: (Membership.Role.OPERATOR, Membership.Role.REVIEWER, Membership.Role.ADMIN),
    ApiKey.Role.REVIEWER: (Membership.Role.REVIEWER, Membership.Role.ADMIN),
}

log = logging.getLogger("ledgerkeep.auth")


class ApiKeyError(JournalError):
    """A key that cannot be created or revoked (unknown prefix, reviewer without a user)."""


class RateLimited(DomainError):
    """The key has made more than ``settings.API_RATE_LIMIT`` requests (HTTP 429).

    Attributes:
        retry_after: whole seconds until the current window ends (the ``Retry-After``
            header ``config/api.py`` sends with it).
    """

    status = 429
    code = "rate_limited"

    def __init__(self, prefix: str, rate: str, retry_after: int, what: str = "") -> None:
        self.retry_after = retry_after
        super().__init__(
            what
            or f"key {prefix} is over its rate limit of {rate} requests"
            f"; retry after {retry_after} s"
        )


class PayloadTooLarge(DomainError):
    """The request declares a body over ``settings.API_MAX_BODY_BYTES`` (HTTP 413)."""

    status = 413
    code = "payload_too_large"

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(
            f"the request body is {size} bytes; the limit is {limit} bytes; nothing written"
        )


def key_digest(raw: str) -> str:
    """``sha256`` hex of a key's UTF-8 bytes (what :class:`ApiKey` stores)."""
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def api_key_create(
    *, tenant: Tenant, name: str, role: str = ApiKey.Role.CLIENT, user: Any = None
) -> tuple[ApiKey, str]:
    """Create a key for ``tenant`` and return it with its secret, which is never shown again.

    Args:
        tenant: the tenant every call made with the key acts in.
        name: a label (1-100 characters), e.g. the agent runtime that uses it.
        role: ``"client"`` (journal, ledger, recovery) or ``"reviewer"`` (also review actions).
        user: for ``reviewer`` keys, the user review decisions are recorded under; the user
            must be a reviewer or admin member of ``tenant``.

    Returns:
        ``(api_key, raw_key)``; ``raw_key`` starts with ``api_key.prefix``.

    Raises:
        ApiKeyError: empty or long name, unknown role, a reviewer key without a suitable user.
    """
    name = name.strip()
    if not 1 <= len(name) <= 100:
        raise ApiKeyError("a key needs a name of 1 to 100 characters")
    if role not in ApiKey.Role.values:
        raise ApiKeyError(f"role must be one of {', '.join(ApiKey.Role.values)}, got {role!r}")
    if role == ApiKey.Role.REVIEWER:
        if user is None:
            raise ApiKeyError(
                "a reviewer key needs the user its review decisions are recorded under"
            )
        allowed = Membership.objects.filter(
            user=user,
            tenant=tenant,
            role__in=[Membership.Role.REVIEWER, Membership.Role.ADMIN],
        ).exists()
        if not (allowed or getattr(user, "is_superuser", False)):
            raise ApiKeyError(f"{user} is not a reviewer or admin of tenant {tenant.slug}")
    while True:
        prefix = KEY_PREFIX + secrets.token_hex(4)
        if not ApiKey.objects.filter(prefix=prefix).exists():
            break
    raw = f"{prefix}_{secrets.token_urlsafe(32)}"
    key = ApiKey.objects.create(
        tenant=tenant, user=user, name=name, prefix=prefix, key_hash=key_digest(raw), role=role
    )
    return key, raw


def api_key_revoke(*, prefix: str) -> ApiKey:
    """Revoke the key with ``prefix`` (``lk_<8 hex>``, or the whole key); idempotent.

    Returns:
        The key, with ``revoked_at`` set (kept from the first revocation when repeated).

    Raises:
        ApiKeyError: no key has this prefix.
    """
    match = _KEY.match(prefix)
    prefix = match.group(1) if match else prefix
    key = ApiKey.objects.filter(prefix=prefix).select_related("tenant").first()
    if key is None:
        raise ApiKeyError(f"no API key has the prefix {prefix!r}")
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key


def api_key_holder_ok(key: ApiKey) -> bool:
    """Does the key's user still stand behind it? (keys follow their users)

    A key with no user (a client key made for a runtime) stands on its own. A key with a
    user counts only while that user is active and still a member of the key's tenant with
    a role in :data:`KEY_MEMBER_ROLES` for the key's role (a superuser needs no
    membership). A reviewer key always has a user (:func:`api_key_create`).
    """
    user = key.user
    if user is None:
        return key.role != ApiKey.Role.REVIEWER
    if not user.is_active:
        return False
    if user.is_superuser:
        return True
    return Membership.objects.filter(
        user=user, tenant=key.tenant, role__in=KEY_MEMBER_ROLES.get(key.role, ())
    ).exists()


def key_live(key: ApiKey) -> ApiKey | None:
    """``key`` read again: the row when it is still unrevoked and its holder still holds the
    role it needs (:func:`api_key_holder_ok`), else ``None``. One query; for long-lived
    holders of a key object (the MCP server) that must follow a revocation at once."""
    fresh = (
        ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True)
        .select_related("tenant", "user")
        .first()
    )
    return fresh if fresh is not None and api_key_holder_ok(fresh) else None


def api_key_authenticate(*, raw: str) -> ApiKey | None:
    """The live key whose secret is ``raw``, or ``None``.

    ``None`` for a key that is unknown, malformed or revoked, and for one whose user is
    inactive or no longer a member with the role the key needs (:func:`api_key_holder_ok`).
    The row is found by prefix and the digest compared in constant time. ``last_used_at``
    is refreshed when it is older than :data:`LAST_USED_RESOLUTION`.
    """
    match = _KEY.match(raw)
    if match is None:
        return None
    key = (
        ApiKey.objects.filter(prefix=match.group(1), revoked_at__isnull=True)
        .select_related("tenant", "user")
        .first()
    )
    if key is None or not hmac.compare_digest(key.key_hash, key_digest(raw)):
        return None
    if not api_key_holder_ok(key):
        return None
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key


@dataclass(frozen=True)
class ApiCaller:
    """Who is calling: ``request.auth`` on every API operation.

    Attributes:
        key: the :class:`ApiKey` row (``key.prefix`` names it; ``key.user`` for reviewers).
    """

    key: ApiKey

    @property
    def tenant(self) -> Tenant:
        """The tenant every object of this call belongs to."""
        return self.key.tenant

    @property
    def role(self) -> str:
        """``"client"`` or ``"reviewer"``."""
        return self.key.role

    @property
    def is_reviewer(self) -> bool:
        return self.key.role == ApiKey.Role.REVIEWER

    def require_reviewer(self) -> None:
        """Raise ``PermissionDenied`` (HTTP 403) unless this is a reviewer key."""
        if not self.is_reviewer:
            raise PermissionDenied(
                f"key {self.key.prefix} is a {self.key.role} key; this action needs a reviewer key"
            )

    def session(self, key: str) -> Session:
        """The tenant's session ``key``; ``Http404`` when the tenant has none of that name."""
        session = (
            Session.objects.filter(tenant=self.tenant, key=key).select_related("tenant").first()
        )
        if session is None:
            raise Http404(f"no session {key!r}")
        return session

    def journal(self, session: str, lane: str = "main", branch: str = "main") -> Journal:
        """The journal of scope (this tenant, ``session``, ``lane``, ``branch``).

        Raises:
            Http404: the tenant has no such journal.
        """
        journal = (
            Journal.objects.filter(
                session__tenant=self.tenant, session__key=session, lane=lane, branch=branch
            )
            .select_related("session__tenant")
            .first()
        )
        if journal is None:
            raise Http404(f"no journal {session}/{lane}/{branch}")
        return journal


def check_body_size(request: HttpRequest) -> None:
    """Refuse a request whose ``Content-Length`` exceeds ``settings.API_MAX_BODY_BYTES``.

    Raises:
        PayloadTooLarge: the declared length is over the limit (HTTP 413).
    """
    limit = settings.API_MAX_BODY_BYTES
    try:
        size = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        size = 0
    if size > limit:
        raise PayloadTooLarge(size, limit)


def check_rate_limit(request: HttpRequest, key: ApiKey) -> None:
    """Count this request against ``key`` and refuse it when over ``API_RATE_LIMIT``.

    Fixed windows of the rate's period (django-ratelimit), counted per key prefix in the
    ``default`` cache. A cache that cannot be reached lets the request through (logged):
    the limit protects the service, it must not take it down.

    Raises:
        RateLimited: over the limit (HTTP 429 with ``Retry-After``).
    """
    rate = settings.API_RATE_LIMIT
    if not rate:
        return
    try:
        usage = get_usage(
            request, group="api-key", key=lambda _g, _r: key.prefix, rate=rate, increment=True
        )
    except Exception:  # the cache is down: fail open
        log.warning("rate limit cache unavailable; request of key %s not counted", key.prefix)
        return
    if usage is not None and usage["should_limit"] and usage["limit"] > 0:
        raise RateLimited(key.prefix, rate, max(1, int(usage["time_left"])))


def check_failure_limit(request: HttpRequest) -> None:
    """Count a refused key against the client's address; over ``API_AUTH_FAILURE_RATE``
    (default ``30/m``) the answer is 429 ``rate_limited`` instead of 401, so guessing keys
    is slowed as using one is (django-ratelimit, ``default`` cache; fails open like
    :func:`check_rate_limit`).

    Raises:
        RateLimited: too many refused keys from this address in the window.
    """
    rate = settings.API_AUTH_FAILURE_RATE
    if not rate:
        return
    try:
        usage = get_usage(request, group="api-key-failures", key="ip", rate=rate, increment=True)
    except Exception:  # the cache is down: fail open
        log.warning("rate limit cache unavailable; refused key not counted")
        return
    if usage is not None and usage["should_limit"] and usage["limit"] > 0:
        retry = max(1, int(usage["time_left"]))
        raise RateLimited(
            "",
            rate,
            retry,
            what=f"too many refused API keys from this address (limit {rate}); "
            f"retry after {retry} s",
        )


class ApiKeyAuth(HttpBearer):
    """``Authorization: Bearer <key>``; ``request.auth`` becomes an :class:`ApiCaller`."""

    def __call__(self, request: HttpRequest) -> ApiCaller | None:
        check_body_size(request)
        # parsed here rather than by HttpBearer.__call__, which logs the whole header
        # (the secret) in DEBUG when the scheme is not "Bearer"
        scheme, _, token = (request.headers.get(self.header) or "").partition(" ")
        if scheme.lower() != self.openapi_scheme or not token:
            return None
        return self.authenticate(request, token)

    def authenticate(self, request: HttpRequest, token: str) -> ApiCaller | None:
        key = api_key_authenticate(raw=token.strip())
        if key is None:
            check_failure_limit(request)
            return None
        check_rate_limit(request, key)
        return ApiCaller(key)


api_key_auth = ApiKeyAuth()
