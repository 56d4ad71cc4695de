"""Signal receivers of the audit app; connected in :meth:`audit_app.apps.AuditAppConfig.ready`."""

from __future__ import annotations

from typing import Any

from audit_app.roles import roles_ensure, user_roles_sync


def ensure_roles(sender: Any, **kwargs: Any) -> None:
    """``post_migrate``: (re)create the role groups once the audit app is migrated.

    Runs after ``migrate`` and after ``flush`` (which empties ``auth_group``), once per
    migrated app; only the audit app's signal does the work.
    """
    if getattr(sender, "name", "") == "audit_app":
        roles_ensure()


def membership_changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    """``post_save``/``post_delete`` of a Membership: keep the user's role groups in step."""
    if kwargs.get("raw"):
        return
    user = instance.user
    user_roles_sync(user)
