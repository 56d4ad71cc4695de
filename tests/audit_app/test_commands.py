"""``create_tenant`` and ``create_user``."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from journal_app.models import Membership, Tenant

pytestmark = pytest.mark.django_db


def _run(*args, **env):
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_tenant_is_idempotent():
    assert _run("create_tenant", "acme", "--name", "Acme Inc") == "tenant created acme (Acme Inc)\n"
    assert _run("create_tenant", "acme") == "tenant exists  acme (Acme Inc)\n"
    assert Tenant.objects.get().name == "Acme Inc"
    with pytest.raises(CommandError, match="tenant 'no way' is not valid"):
        _run("create_tenant", "no way")


def test_create_user_with_roles_in_several_tenants():
    _run("create_tenant", "acme")
    _run("create_tenant", "globex")
    out = _run(
        "create_user",
        "rita",
        "--tenant",
        "acme:reviewer",
        "--tenant",
        "globex",
        "--password",
        "pw-rita-1",
    )
    assert (
        out
        == "user created rita: tenants acme:reviewer, globex:operator; groups operator, reviewer\n"
    )
    rita = get_user_model().objects.get(username="rita")
    assert rita.check_password("pw-rita-1")
    assert rita.has_perm("audit_app.review_retirement")
    out = _run("create_user", "rita", "--tenant", "acme:admin")
    assert "user updated rita: tenants acme:admin, globex:operator; groups admin, operator" in out
    assert "password" not in out


def test_create_user_prints_a_generated_password_once(monkeypatch):
    _run("create_tenant", "acme")
    out = _run("create_user", "oscar", "--tenant", "acme")
    password = out.splitlines()[1].split()[1]
    assert get_user_model().objects.get(username="oscar").check_password(password)
    monkeypatch.setenv("OSCAR_PW", "from-the-env")
    _run("create_user", "oscar", "--password-env", "OSCAR_PW")
    assert get_user_model().objects.get(username="oscar").check_password("from-the-env")
    assert Membership.objects.get().role == "operator"


def test_create_user_names_a_missing_tenant_and_writes_nothing():
    with pytest.raises(CommandError, match="no tenant 'nope': create it first"):
        _run("create_user", "x", "--tenant", "nope:reviewer")
    _run("create_tenant", "acme")
    with pytest.raises(CommandError, match="unknown role 'boss'"):
        _run("create_user", "x", "--tenant", "acme:boss")
    assert not get_user_model().objects.filter(username="x").exists()
