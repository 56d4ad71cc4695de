"""Tenants, memberships and API keys in the Django admin (README, "Accounts and keys").

Keys are created and revoked through :mod:`journal_app.auth` (the same services as the
``create_api_key`` and ``revoke_api_key`` commands): the secret is shown once, in the admin's
message after "Save", and only its sha256 is stored. Each change is recorded in the audit
log through :func:`audit_app.services.audit_record`.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import reverse

from audit_app.services import api_key_end, api_key_issue, audit_record
from journal_app.auth import ApiKeyError
from journal_app.models import ApiKey, Membership, Tenant


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]

    def save_model(self, request: HttpRequest, obj: Tenant, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        audit_record(
            actor=request.user,
            tenant=obj,
            action="tenant.change" if change else "tenant.create",
            object_type="tenant",
            object_id=obj.slug,
            details={"via": "admin", "fields": list(form.changed_data)},
        )

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        super().save_formset(request, form, formset, change)
        for obj in formset.new_objects + [o for o, _ in formset.changed_objects]:
            _membership_event(request, obj, "membership.set")
        for obj in formset.deleted_objects:
            _membership_event(request, obj, "membership.remove")


def _membership_event(request: HttpRequest, m: Membership, action: str) -> None:
    audit_record(
        actor=request.user,
        tenant=m.tenant,
        action=action,
        object_type="membership",
        object_id=f"{m.user.get_username()}@{m.tenant.slug}",
        details={"via": "admin", "role": m.role},
    )


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "tenant", "role"]
    list_filter = ["role", "tenant"]
    search_fields = ["user__username", "tenant__slug"]
    autocomplete_fields = ["user", "tenant"]

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        _membership_event(request, obj, "membership.set")

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        _membership_event(request, obj, "membership.remove")
        super().delete_model(request, obj)


class ApiKeyAddForm(forms.ModelForm):
    class Meta:
        model = ApiKey
        fields = ["tenant", "name", "role", "user"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["prefix", "tenant", "name", "role", "user", "created_at", "revoked_at"]
    list_filter = ["role", "tenant", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["prefix", "name", "tenant__slug"]
    actions = ["revoke"]
    readonly_fields = ["prefix", "key_hash", "created_at", "revoked_at", "last_used_at"]

    def get_form(self, request: HttpRequest, obj: ApiKey | None = None, **kwargs: Any) -> Any:
        if obj is None:
            kwargs["form"] = ApiKeyAddForm
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:
        if obj is None:
            return ["tenant", "name", "role", "user"]
        return ["tenant", "name", "role", "user", *self.readonly_fields]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> Any:
        if obj is None:
            return []
        return ["tenant", "role", "user", *self.readonly_fields]

    def has_delete_permission(self, request: HttpRequest, obj: ApiKey | None = None) -> bool:
        return False  # revoke instead: a key's row stays for the audit trail

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        try:
            key, raw = api_key_issue(
                tenant=obj.tenant, name=obj.name, role=obj.role, user=obj.user, via="admin"
            )
        except ApiKeyError as exc:  # nothing written; the reason is shown
            messages.error(request, f"No key created: {exc}")
            return
        obj.pk = key.pk
        obj.prefix = key.prefix
        obj.key_hash = key.key_hash
        obj.created_at = key.created_at
        messages.warning(
            request,
            f"The key {key.prefix} is {raw} : copy it now, it is never shown again.",
        )

    def response_add(self, request: HttpRequest, obj: ApiKey, post_url_continue: Any = None) -> Any:
        if obj.pk is None:  # refused by api_key_create: back to the list, with the reason
            return HttpResponseRedirect(reverse("admin:journal_app_apikey_changelist"))
        return super().response_add(request, obj, post_url_continue)

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for key in queryset:
            api_key_end(prefix=key.prefix, via="admin")
        messages.success(request, f"Revoked {queryset.count()} key(s).")
