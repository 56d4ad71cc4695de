"""Every state change of the audit app: comments, annotations, exports, accounts.

docs/design.md sections 8 and 9. Services are keyword-only, raise domain errors (never HTTP), and
record an :class:`~audit_app.models.AuditEvent` in the same transaction as the change they
log, so the log holds exactly what happened. P0 retirement reviews are
:func:`ledger_app.services.retirement_review` (it logs through :func:`audit_record`). The
hash-chained log of row writes is :mod:`audit_app.chained_log`.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from audit_app.models import Annotation, AuditEvent, Comment
from audit_app.origin import origin_current
from audit_app.roles import roles_ensure, user_roles_sync
from journal_app.auth import api_key_create, api_key_revoke
from journal_app.errors import DomainError
from journal_app.models import ApiKey, Entry, Journal, Membership, Session, Tenant
from journal_app.services import tenant_ensure

COMMENT_MAX_CHARS = 10_000


class AuditError(DomainError):
    """Base of the audit app's domain errors (HTTP 422 unless a subclass says otherwise)."""

    status = 422
    code = "invalid_request"


class CommentInvalid(AuditError):
    """An empty or oversized comment, or a target that is not in the scope (HTTP 400)."""

    status = 400
    code = "invalid_comment"


class AccountError(AuditError):
    """A bad username, role or tenant given to the account services."""


def _actor_name(user: Any) -> str:
    return user.get_username() if user is not None else ""


def audit_record(
    *,
    actor: Any,
    tenant: Tenant | None,
    action: str,
    object_type: str,
    object_id: str,
    object_label: str = "",
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one audit event.

    Args:
        actor: the user (``None`` for a command run without one).
        tenant: the tenant the object belongs to (``None`` for account-level events).
        action: a dotted verb: ``review.approve``, ``review.refuse``, ``review.denied``,
            ``comment.add``, ``annotation.add``, ``session.export``, ``account.create``...
        object_type, object_id, object_label: what was acted on.
        details: any JSON-serialisable extra facts (the comment text, the export digest).

    Returns:
        The stored event (append-only).
    """
    return AuditEvent.objects.create(
        tenant=tenant,
        actor=actor,
        actor_name=_actor_name(actor),
        action=action,
        object_type=object_type,
        object_id=str(object_id)[:300],
        object_label=object_label[:300],
        details=details or {},
    )


def journal_scope(journal: Any) -> dict[str, str]:
    """``{"session", "lane", "branch"}`` of a journal, for an event's details (the audit
    log's session filter reads ``session``)."""
    return {"session": journal.session.key, "lane": journal.lane, "branch": journal.branch}


def journal_event(
    *, journal: Any, action: str, revision: int, details: dict[str, Any]
) -> AuditEvent:
    """Record ``action`` on a journal at ``revision`` (seq): the object is the journal, the
    actor and ``surface`` the origin of the work (:func:`audit_app.origin.origin_current`),
    the details ``surface``, the journal's scope (:func:`journal_scope`), ``revision`` and
    ``details``. The failed calls a session's overview lists are such events
    (``context.failed``, ``model_call.failed``)."""
    origin = origin_current()
    return audit_record(
        actor=origin.actor,
        tenant=journal.session.tenant,
        action=action,
        object_type="journal",
        object_id=str(journal.pk),
        object_label=f"{journal.scope_label} at seq {revision}",
        details={
            "surface": origin.surface,
            **journal_scope(journal),
            "revision": revision,
            **details,
        },
    )


def _clean_text(text: str) -> str:
    text = (text or "").strip()
    if not text:
        raise CommentInvalid("a comment needs text")
    if len(text) > COMMENT_MAX_CHARS:
        raise CommentInvalid(f"a comment is at most {COMMENT_MAX_CHARS:,} characters")
    return text


def comment_add(
    *,
    journal: Journal,
    author: Any,
    text: str,
    entry: Entry | None = None,
    fact_id: str = "",
    label: str = "",
) -> Comment:
    """Add a comment to an entry or to a ledger fact id of ``journal``, and log it.

    The one way a comment is written (``comment.add`` in the same transaction). Exactly one
    target: ``entry`` (an entry of ``journal``) or ``fact_id``. Whether a fact id exists is
    the ledger's to say (:func:`ledger_app.comments.comment_on_fact` checks it, then calls
    this); the audit app does not read the ledger.

    Args:
        label: what the audit log shows for the target (defaults to the journal's scope).

    Raises:
        CommentInvalid: empty text, more than :data:`COMMENT_MAX_CHARS` characters, no
            target or two, or an entry of another journal.
    """
    text = _clean_text(text)
    fact_id = (fact_id or "").strip()
    if (entry is None) == (not fact_id):
        raise CommentInvalid("a comment is on one entry or on one fact")
    if entry is not None and entry.journal_id != journal.pk:
        raise CommentInvalid(f"entry seq {entry.seq} is not in {journal.scope_label}")
    with transaction.atomic():
        comment = Comment.objects.create(
            tenant_id=journal.session.tenant_id,
            journal=journal,
            entry=entry,
            fact_id=fact_id,
            author=author,
            text=text,
        )
        audit_record(
            actor=author,
            tenant=journal.session.tenant,
            action="comment.add",
            object_type="entry" if entry is not None else "fact",
            object_id="sha256:" + entry.entry_hash if entry is not None else fact_id,
            object_label=label or journal.scope_label,
            details={"comment": comment.pk, "text": text},
        )
    return comment


def comment_on_entry(*, entry: Entry, author: Any, text: str) -> Comment:
    """Add a comment to a journal entry and log it (``comment.add``); see :func:`comment_add`.

    Raises:
        CommentInvalid: empty text or more than :data:`COMMENT_MAX_CHARS` characters.
    """
    journal = entry.journal
    return comment_add(
        journal=journal,
        author=author,
        text=text,
        entry=entry,
        label=f"{journal.scope_label} seq {entry.seq}",
    )


def annotation_add(*, session: Session, author: Any, verdict: str, note: str = "") -> Annotation:
    """Label ``session`` a good or bad compaction example and log it (``annotation.add``).

    Raises:
        CommentInvalid: ``verdict`` is not ``good`` or ``bad``, or the note is too long.
    """
    if verdict not in Annotation.Verdict.values:
        raise CommentInvalid(f"verdict must be 'good' or 'bad', got {verdict!r}")
    note = (note or "").strip()
    if len(note) > COMMENT_MAX_CHARS:
        raise CommentInvalid(f"a note is at most {COMMENT_MAX_CHARS:,} characters")
    with transaction.atomic():
        annotation = Annotation.objects.create(
            tenant_id=session.tenant_id, session=session, author=author, verdict=verdict, note=note
        )
        audit_record(
            actor=author,
            tenant=session.tenant,
            action="annotation.add",
            object_type="session",
            object_id=f"{session.tenant.slug}/{session.key}",
            details={"annotation": annotation.pk, "verdict": verdict, "note": note},
        )
    return annotation


def export_record(*, user: Any, session: Session, details: dict[str, Any]) -> AuditEvent:
    """Log one session export (``session.export``) with its figures and digest."""
    return audit_record(
        actor=user,
        tenant=session.tenant,
        action="session.export",
        object_type="session",
        object_id=f"{session.tenant.slug}/{session.key}",
        details=details,
    )


# Accounts (the create_tenant / create_user commands) --------------------------------------


def account_ensure(
    *,
    username: str,
    password: str | None = None,
    email: str = "",
    memberships: list[tuple[Tenant, str]] | None = None,
    superuser: bool = False,
) -> tuple[Any, bool, str | None]:
    """Create or update a user and set their tenant memberships and roles.

    Args:
        username: the login name.
        password: set when given; a new user without one gets a random password.
        email: stored when given.
        memberships: ``[(tenant, role)]``; each sets (or changes) the user's role in that
            tenant. Memberships of other tenants are left alone.
        superuser: make the user a superuser (sees every tenant).

    Returns:
        ``(user, created, generated_password)``; the password is ``None`` unless generated.

    Raises:
        AccountError: empty username or an unknown role (nothing written).
    """
    username = (username or "").strip()
    if not username:
        raise AccountError("a user needs a username")
    for _tenant, role in memberships or []:
        if role not in Membership.Role.values:
            raise AccountError(
                f"unknown role {role!r} (known: {', '.join(Membership.Role.values)})"
            )
    User = get_user_model()
    generated = None
    with transaction.atomic():
        roles_ensure()
        user, created = User.objects.get_or_create(username=username)
        if password:
            user.set_password(password)
        elif created:
            generated = secrets.token_urlsafe(12)
            user.set_password(generated)
        if email:
            user.email = email
        if superuser:
            user.is_superuser = user.is_staff = True
        user.save()
        for tenant, role in memberships or []:
            Membership.objects.update_or_create(user=user, tenant=tenant, defaults={"role": role})
        user_roles_sync(user)
        origin = origin_current()
        # one event per tenant given, so each tenant's audit log shows its new member; an
        # account without a tenant (a superuser) is logged without one
        for tenant in [t for t, _ in memberships or []] or [None]:
            audit_record(
                actor=origin.actor,
                tenant=tenant,
                action="account.create" if created else "account.update",
                object_type="user",
                object_id=username,
                details={
                    "surface": origin.surface,
                    "memberships": [[t.slug, r] for t, r in memberships or []],
                    "superuser": user.is_superuser,
                },
            )
    return user, created, generated


# API keys (the create_api_key / revoke_api_key commands, the admin) --------------------------


def api_key_issue(
    *, tenant: Tenant, name: str, role: str = ApiKey.Role.CLIENT, user: Any = None, via: str = ""
) -> tuple[ApiKey, str]:
    """Create an API key (:func:`journal_app.auth.api_key_create`) and log ``api_key.create``
    in the same transaction, with the surface and person of
    :func:`audit_app.origin.origin_current` (README "Audit log").

    Args:
        via: where it was asked, when the surface does not say it (``"admin"``).

    Returns:
        ``(api_key, raw_key)``, as :func:`~journal_app.auth.api_key_create`.

    Raises:
        ApiKeyError: as :func:`~journal_app.auth.api_key_create` (nothing written).
    """
    with transaction.atomic():
        key, raw = api_key_create(tenant=tenant, name=name, role=role, user=user)
        _key_event(key, "api_key.create", via, {"role": key.role, "name": key.name})
    return key, raw


def api_key_end(*, prefix: str, via: str = "") -> ApiKey:
    """Revoke the key with ``prefix`` (:func:`journal_app.auth.api_key_revoke`, idempotent)
    and log ``api_key.revoke`` in the same transaction; a repeated revocation is logged too,
    with ``already_revoked``.

    Raises:
        ApiKeyError: no key has this prefix (nothing written).
    """
    with transaction.atomic():
        asked = timezone.now()
        key = api_key_revoke(prefix=prefix)
        already = key.revoked_at is not None and key.revoked_at < asked
        _key_event(key, "api_key.revoke", via, {"already_revoked": already})
    return key


def tenant_create(*, slug: str, name: str = "", via: str = "") -> tuple[Tenant, bool]:
    """Create the tenant ``slug`` if it does not exist
    (:func:`journal_app.services.tenant_ensure`) and log ``tenant.create`` in the same
    transaction, with the surface and person of :func:`audit_app.origin.origin_current`
    (README "Audit log"); an existing tenant is left unchanged and nothing is logged.

    Args:
        slug: letters, digits, ``.``, ``_`` or ``-`` (1-100 characters).
        name: display name (default: the slug).
        via: where it was asked, when the surface does not say it.

    Returns:
        ``(tenant, created)``.

    Raises:
        JournalError: the slug is not valid (nothing written).
    """
    with transaction.atomic():
        existed = Tenant.objects.filter(slug=slug).exists()
        tenant = tenant_ensure(slug=slug, name=name)
        if not existed:
            _origin_event(tenant, "tenant.create", "tenant", tenant.slug, tenant.name, via, {})
    return tenant, not existed


def _key_event(key: ApiKey, action: str, via: str, details: dict[str, Any]) -> None:
    _origin_event(key.tenant, action, "api_key", key.prefix, key.name, via, details)


def _origin_event(
    tenant: Tenant,
    action: str,
    object_type: str,
    object_id: str,
    label: str,
    via: str,
    details: dict[str, Any],
) -> None:
    """One audit event by whoever :func:`audit_app.origin.origin_current` says asked, its
    surface (and ``via`` when given) first in the details."""
    origin = origin_current()
    audit_record(
        actor=origin.actor,
        tenant=tenant,
        action=action,
        object_type=object_type,
        object_id=object_id,
        object_label=label,
        details={"surface": origin.surface, **({"via": via} if via else {}), **details},
    )


def export_records(session: Session, journals: list[Journal]) -> list[dict[str, Any]]:
    """The session export's ``comment`` and ``annotation`` records, in creation order.

    Read by :mod:`ledger_app.export`, which sits above the audit app and imports this
    directly (no registration: the dependency points down, README "Architecture").
    """
    by_pk = {j.pk: j for j in journals}
    records: list[dict[str, Any]] = []
    for c in (
        Comment.objects.filter(journal__in=journals)
        .select_related("author", "entry")
        .order_by("created_at", "pk")
    ):
        j = by_pk[c.journal_id]
        records.append(
            {
                "type": "comment",
                "lane": j.lane,
                "branch": j.branch,
                "target": "fact" if c.fact_id else "entry",
                "fact_id": c.fact_id or None,
                "entry_hash": c.entry.entry_hash if c.entry_id else None,
                "author": c.author.get_username(),
                "text": c.text,
                "created_at": c.created_at,
            }
        )
    for a in session.annotations.select_related("author").order_by("created_at", "pk"):
        records.append(
            {
                "type": "annotation",
                "verdict": a.verdict,
                "note": a.note,
                "author": a.author.get_username(),
                "created_at": a.created_at,
            }
        )
    return records
