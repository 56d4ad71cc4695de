"""Audited reads of unfiltered entry bytes (docs/design.md sections 4, 8, 9).

Every page and endpoint shows an entry's body filtered by :mod:`journal_app.privacy`
(secrets and hidden reasoning replaced, ``filtered`` and why said). The stored bytes
themselves are for a role that may read them: a tenant **admin** (a superuser counts as one).
No new permission is added: the admin role is the tenant's most trusted role already (it
reads the audit log), and a role check needs no migration. Each raw read, and each refused
attempt, is an :class:`~audit_app.models.AuditEvent`:

* ``entry.read_raw``: the stored bytes of an entry were returned (details: bytes, via, key);
* ``entry.read_raw.denied``: an actor without the role asked (details: role, via, key);
* ``session.export_raw.denied``: an export (stored bytes) was refused.

An API key acts as the user it names: a ``client`` key names none and is always refused; a
``reviewer`` key is allowed when its user is an admin of the key's tenant.
"""

from __future__ import annotations

from typing import Any

from audit_app.roles import tenant_role
from audit_app.services import AuditError, audit_record
from journal_app.hashing import display
from journal_app.models import Entry, Membership, Session, Tenant

#: The role that may read unfiltered entry bytes and export them.
RAW_READ_ROLE = str(Membership.Role.ADMIN)


class RawReadDenied(AuditError):
    """The actor may not read unfiltered entry bytes in this tenant (HTTP 403)."""

    status = 403
    code = "forbidden"


def _key_of(actor: Any) -> Any:
    key = getattr(actor, "key", None)  # journal_app.auth.ApiCaller
    if key is not None and hasattr(key, "prefix"):
        return key
    if hasattr(actor, "prefix") and hasattr(actor, "key_hash"):  # an ApiKey row
        return actor
    return None


def raw_read_actor(actor: Any, tenant: Tenant) -> tuple[Any, str | None]:
    """``(user, refusal)``: the user ``actor`` acts as, and why it may not read raw bytes
    of ``tenant`` (``None`` when it may).

    Args:
        actor: a user, an :class:`~journal_app.models.ApiKey`, or a
            :class:`journal_app.auth.ApiCaller` (``request.auth``).
        tenant: the tenant the bytes belong to.
    """
    key = _key_of(actor)
    if key is not None:
        user = getattr(key, "user", None)
        if key.tenant_id != tenant.pk:
            return user, f"key {key.prefix} belongs to another tenant"
        if user is None:
            return None, (
                f"key {key.prefix} is a {key.role} key; unfiltered entries need a key whose "
                f"user is a tenant {RAW_READ_ROLE}"
            )
        actor = user
    if actor is None or not getattr(actor, "is_authenticated", False):
        return None, "unfiltered entries need a signed-in tenant admin"
    if tenant_role(actor, tenant.pk) != RAW_READ_ROLE:
        return actor, f"only the tenant's {RAW_READ_ROLE}s read unfiltered entries"
    return actor, None


def raw_read_allowed(*, actor: Any, tenant: Tenant) -> bool:
    """Whether ``actor`` may read unfiltered bytes of ``tenant`` (no audit event: for links)."""
    return raw_read_actor(actor, tenant)[1] is None


def _refuse(
    actor: Any, user: Any, tenant: Tenant, action: str, obj: tuple[str, str, str], via: str
) -> None:
    key = _key_of(actor)
    audit_record(
        actor=user,
        tenant=tenant,
        action=action,
        object_type=obj[0],
        object_id=obj[1],
        object_label=obj[2],
        details={
            "via": via,
            "role": tenant_role(user, tenant.pk) if user is not None else None,
            **({"key": key.prefix} if key is not None else {}),
        },
    )


def entry_read_raw(*, entry: Entry, actor: Any, via: str = "ui") -> bytes:
    """The stored bytes of ``entry`` (its canonical JSON body, UTF-8), unfiltered; audited.

    Args:
        entry: the entry (its journal's tenant decides who may read it).
        actor: a user, an API key or ``request.auth`` (see :func:`raw_read_actor`).
        via: where the read came from (``"ui"``, ``"api"``), kept in the audit event.

    Returns:
        Exactly the bytes the entry's ``body_hash`` is computed over.

    Raises:
        RawReadDenied: (403) the actor is not an admin of the entry's tenant; the refusal is
            logged as ``entry.read_raw.denied`` and nothing is returned.
    """
    journal = entry.journal
    tenant = journal.session.tenant
    obj = ("entry", display(entry.entry_hash), f"{journal.scope_label} seq {entry.seq}")
    user, refusal = raw_read_actor(actor, tenant)
    if refusal is not None:
        _refuse(actor, user, tenant, "entry.read_raw.denied", obj, via)
        raise RawReadDenied(refusal, entry=f"seq {entry.seq}")
    data = entry.body.encode("utf-8", errors="surrogatepass")
    audit_record(
        actor=user,
        tenant=tenant,
        action="entry.read_raw",
        object_type=obj[0],
        object_id=obj[1],
        object_label=obj[2],
        details={"via": via, "bytes": len(data), **_key_details(actor)},
    )
    return data


def _key_details(actor: Any) -> dict[str, Any]:
    key = _key_of(actor)
    return {"key": key.prefix} if key is not None else {}


def raw_export_allow(*, session: Session, actor: Any, via: str = "ui") -> None:
    """Allow an export of ``session`` (stored bytes, re-importable hash for hash), or refuse.

    An export carries every entry's stored bytes, so it needs the raw-read role. ``actor``
    ``None`` is a command run on the server by its operator (no user): allowed. An allowed
    export is logged by its caller (``session.export`` with the file's digest,
    :func:`audit_app.services.export_record`); a refusal is logged here as
    ``session.export_raw.denied``.

    Raises:
        RawReadDenied: (403) the actor is not an admin of the session's tenant.
    """
    if actor is None:
        return
    tenant = session.tenant
    user, refusal = raw_read_actor(actor, tenant)
    if refusal is not None:
        obj = ("session", session.key, session.shown_title or session.key)
        _refuse(actor, user, tenant, "session.export_raw.denied", obj, via)
        raise RawReadDenied(refusal.replace("read unfiltered entries", "export sessions"))
