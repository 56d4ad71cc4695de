"""Who may read what: the tenant filter every page's read goes through, and the roles.

A user reads the tenants they hold a :class:`~journal_app.models.Membership` of; superusers
read all. Anything outside that answers ``Http404`` (never 403: another tenant's objects do
not exist for this user). The links a page shows for the audit log and the export follow the
same rules as the views they lead to (:func:`may_read_audit_log`, :func:`may_export`), so a
link is never shown to someone the view would refuse.
"""

from __future__ import annotations

import difflib
import re

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import Http404

from journal_app.hashing import strip_prefix
from journal_app.models import Artifact, Entry, Journal, Membership, Session, Tenant

User = AbstractBaseUser | AnonymousUser

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def tenants_for_user(user: User) -> QuerySet[Tenant]:
    """The tenants ``user`` may read: all for a superuser, else those of their memberships."""
    if not user.is_authenticated:
        return Tenant.objects.none()
    if user.is_superuser:
        return Tenant.objects.all()
    return Tenant.objects.filter(membership__user=user)


def get_session_for_user(user: User, tenant_slug: str, key: str) -> Session:
    """The session ``tenant_slug/key`` if ``user`` may read it; ``Http404`` otherwise, whose
    message names up to three sessions of that tenant the user may read with a close key
    ("did you mean ...?": a mistyped address; nothing of a tenant the user cannot read)."""
    readable = Session.objects.filter(tenant__in=tenants_for_user(user), tenant__slug=tenant_slug)
    session = readable.filter(key=key).select_related("tenant").first()
    if session is None:
        keys = list(readable.order_by("key").values_list("key", flat=True)[:SUGGEST_AMONG])
        close = difflib.get_close_matches(key, keys, n=3, cutoff=0.6)
        raise Http404(
            f"no session {key!r} you can read in tenant {tenant_slug!r}"
            + (f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else "")
        )
    return session


#: most session keys of a tenant a mistyped address is compared with
SUGGEST_AMONG = 10_000


def _scope_journals(
    user: User, tenant_slug: str, key: str, lane: str, branch: str
) -> QuerySet[Journal]:
    """The journal of scope ``tenant/key/lane/branch`` among the user's tenants (0 or 1 row),
    with its session and tenant."""
    return Journal.objects.filter(
        session__tenant__in=tenants_for_user(user),
        session__tenant__slug=tenant_slug,
        session__key=key,
        lane=lane,
        branch=branch,
    ).select_related("session__tenant")


def get_journal_for_user(user: User, tenant_slug: str, key: str, lane: str, branch: str) -> Journal:
    """The journal of scope ``tenant/key/lane/branch`` if ``user`` may read it; else ``Http404``."""
    journal = _scope_journals(user, tenant_slug, key, lane, branch).first()
    if journal is None:
        raise Http404("no such journal")
    return journal


def parse_hash(value: str) -> str:
    """``sha256:<hex>`` or ``<hex>`` to bare lowercase hex; ``Http404`` if it is not 64 hex digits."""
    digest = strip_prefix(value)
    if not _HEX64.match(digest):
        raise Http404("not a sha256 digest")
    return digest


def entry_for_user(user: User, entry_hash: str) -> Entry:
    """The entry with ``entry_hash`` (either spelling) if ``user`` may read it; else ``Http404``."""
    entry = (
        Entry.objects.filter(
            journal__session__tenant__in=tenants_for_user(user), entry_hash=parse_hash(entry_hash)
        )
        .select_related("journal__session__tenant", "artifact__tenant")
        .first()
    )
    if entry is None:
        raise Http404("no such entry")
    return entry


def artifact_for_user(user: User, tenant_slug: str, content_hash: str) -> Artifact:
    """The artifact ``tenant/content_hash`` if ``user`` may read it; else ``Http404``."""
    artifact = (
        Artifact.objects.filter(
            tenant__in=tenants_for_user(user),
            tenant__slug=tenant_slug,
            content_hash=parse_hash(content_hash),
        )
        .select_related("tenant")
        .first()
    )
    if artifact is None:
        raise Http404("no such artifact")
    return artifact


AUDIT_LOG_PERMISSION = "audit_app.view_audit_log"


def may_read_audit_log(user: User, tenant: Tenant) -> bool:
    """True when ``user`` may read the tenant's audit log: an admin membership and the
    ``audit_app.view_audit_log`` permission (a superuser always), the audit log view's rule,
    so the link is shown only to those it would not refuse. One query for a non-admin."""
    if getattr(user, "is_superuser", False):
        return True
    return _is_admin(user, tenant) and user.has_perm(AUDIT_LOG_PERMISSION)


def _is_admin(user: User, tenant: Tenant) -> bool:
    """Whether ``user`` is an admin member of ``tenant``: one query per user object and
    tenant (remembered on the user, which lives for one request)."""
    memo = user.__dict__.setdefault("_ledgerkeep_admin_of", {})
    if tenant.pk not in memo:
        memo[tenant.pk] = Membership.objects.filter(
            user=user, tenant=tenant, role=Membership.Role.ADMIN
        ).exists()
    return memo[tenant.pk]


def may_export(user: User, tenant: Tenant) -> bool:
    """True when ``user`` may export the tenant's sessions: the ``audit_app.export_session``
    permission and an admin membership (the raw-read role: the export holds stored bytes), a
    superuser always; the export view's rule, so its button is shown only to those it
    would not refuse."""
    if getattr(user, "is_superuser", False):
        return True
    return _is_admin(user, tenant) and user.has_perm("audit_app.export_session")


#: roles that may fold from the page and decide P0 retirements (the review rule's roles)
FOLDING_ROLES = (Membership.Role.REVIEWER, Membership.Role.ADMIN)


def get_journal_with_role(
    user: User, tenant_slug: str, key: str, lane: str, branch: str
) -> tuple[Journal, str | None]:
    """:func:`get_journal_for_user` and the user's role in the journal's tenant (``"admin"``
    for a superuser, ``None`` without a membership), read in the same query.

    Raises:
        Http404: no such journal, or not one of the user's tenants.
    """
    if not user.is_authenticated:
        raise Http404("no such journal")
    role = Membership.objects.filter(user=user, tenant=OuterRef("session__tenant")).values("role")[
        :1
    ]
    journal = (
        _scope_journals(user, tenant_slug, key, lane, branch)
        .annotate(user_role=Subquery(role))
        .first()
    )
    if journal is None:
        raise Http404("no such journal")
    return journal, (str(Membership.Role.ADMIN) if user.is_superuser else journal.user_role)
