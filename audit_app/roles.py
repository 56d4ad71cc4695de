"""Roles as Django groups with permissions (docs/design.md sections 8 and 9).

A user's *role in a tenant* is their :class:`journal_app.models.Membership` row; the role's
*permissions* are those of the Django group of the same name. The groups are kept in step
with the memberships by :mod:`audit_app.receivers` (a user is in group ``reviewer`` while
they are a reviewer of at least one tenant), so ``user.has_perm(...)`` says what a role
may do and the membership says where. Views and services check both.

:func:`roles_ensure` creates the three groups and grants their permissions; it runs after
every ``migrate`` and ``flush`` (``post_migrate``), and the ``create_user`` command calls it.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, Permission

from journal_app.models import Membership

REVIEW_PERMISSION = "audit_app.review_retirement"
EXPORT_PERMISSION = "audit_app.export_session"
AUDIT_LOG_PERMISSION = "audit_app.view_audit_log"

_READ = [
    "journal_app.view_tenant",
    "journal_app.view_session",
    "journal_app.view_journal",
    "journal_app.view_entry",
    "journal_app.view_artifact",
    "ledger_app.view_fold",
    "ledger_app.view_retirementrequest",
    "audit_app.view_comment",
    "audit_app.add_comment",
    "audit_app.view_annotation",
    "audit_app.add_annotation",
    EXPORT_PERMISSION,
]

#: role name -> permission names ("app_label.codename"). Operators read, comment, annotate
#: and export; reviewers also decide P0 retirements; admins also read the audit log.
ROLE_PERMISSIONS: dict[str, list[str]] = {
    Membership.Role.OPERATOR: _READ,
    Membership.Role.REVIEWER: [*_READ, REVIEW_PERMISSION, "ledger_app.change_retirementrequest"],
    Membership.Role.ADMIN: [
        *_READ,
        REVIEW_PERMISSION,
        "ledger_app.change_retirementrequest",
        AUDIT_LOG_PERMISSION,
        "audit_app.view_auditevent",
    ],
}


def roles_ensure() -> dict[str, Group]:
    """Create the ``operator``, ``reviewer`` and ``admin`` groups with their permissions.

    Idempotent: a group's permissions are set to exactly :data:`ROLE_PERMISSIONS` (a
    permission that does not exist yet, e.g. before its app is migrated, is skipped).

    Returns:
        ``{role: Group}``.
    """
    wanted = {p for perms in ROLE_PERMISSIONS.values() for p in perms}
    found: dict[str, Permission] = {}
    for perm in Permission.objects.filter(
        content_type__app_label__in={p.split(".")[0] for p in wanted}
    ).select_related("content_type"):
        found[f"{perm.content_type.app_label}.{perm.codename}"] = perm
    groups = {}
    for role, perms in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=str(role))
        group.permissions.set([found[p] for p in perms if p in found])
        groups[str(role)] = group
    return groups


def user_roles_sync(user: Any) -> set[str]:
    """Put ``user`` in exactly the role groups of their memberships (any tenant).

    Returns:
        The role names the user now holds. Other (non-role) groups are left alone.
    """
    roles = set(Membership.objects.filter(user=user).values_list("role", flat=True).distinct())
    names = [str(r) for r in Membership.Role]
    groups = {g.name: g for g in Group.objects.filter(name__in=names)}
    if len(groups) < len(names):
        groups = roles_ensure()
    user.groups.remove(*[groups[n] for n in names if n not in roles])
    user.groups.add(*[groups[n] for n in names if n in roles])
    # has_perm caches per user object; drop the cache so a later check sees the change
    for attr in ("_perm_cache", "_group_perm_cache", "_user_perm_cache"):
        user.__dict__.pop(attr, None)
    return roles


def tenant_role(user: Any, tenant_id: int) -> str | None:
    """The user's role in the tenant (``"admin"`` for a superuser), or ``None``."""
    if getattr(user, "is_superuser", False):
        return str(Membership.Role.ADMIN)
    if not getattr(user, "is_authenticated", False):
        return None
    return (
        Membership.objects.filter(user=user, tenant_id=tenant_id).values_list("role", flat=True)
    ).first()
