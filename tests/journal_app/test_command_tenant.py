"""``import_journal`` and ``follow`` refuse a tenant that does not exist yet (a typo) unless
it is ``default`` or ``--create-tenant`` is given, and write nothing when they refuse
(:func:`journal_app.services.scope.tenant_for_command`)."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from journal_app.models import Entry, Journal, Session, Tenant
from journal_app.services import JournalError, tenant_ensure
from journal_app.services.scope import tenant_for_command

pytestmark = pytest.mark.django_db

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "demo-session.json"
CODEX = "codex-rollout-jsonl"


@pytest.fixture
def rollout(corpus, tmp_path) -> Path:
    """A Codex rollout to follow, copied so the file name is known."""
    source = sorted((corpus / CODEX).glob("*.jsonl"))[0]
    copy = tmp_path / "rollout.jsonl"
    copy.write_bytes(source.read_bytes())
    return copy


def rows() -> tuple[int, int, int, int]:
    return (
        Tenant.objects.count(),
        Session.objects.count(),
        Journal.objects.count(),
        Entry.objects.count(),
    )


def import_journal(*args: str) -> str:
    out = StringIO()
    call_command("import_journal", str(SAMPLE), *args, "--no-progress", stdout=out)
    return out.getvalue()


def follow(path: Path, *args: str) -> str:
    out = StringIO()
    call_command("follow", str(path), *args, "--once", stdout=out)
    return out.getvalue()


def test_the_service_passes_a_known_tenant_and_refuses_an_unknown_one_naming_it():
    tenant_ensure(slug="acme")
    tenant_ensure(slug="globex")
    assert tenant_for_command("acme") == "acme"
    assert tenant_for_command("default") == "default"  # created on first use
    assert tenant_for_command("brandnew", create=True) == "brandnew"
    with pytest.raises(JournalError) as refused:
        tenant_for_command("acmee")
    text = str(refused.value)
    assert text.startswith("no tenant 'acmee'; did you mean 'acme'?")
    assert "known tenants: acme, globex." in text
    assert "--create-tenant" in text and "manage.py create_tenant acmee" in text
    # nothing close: no suggestion, the known tenants still listed
    with pytest.raises(JournalError, match=r"^no tenant 'zzz'; known tenants: acme, globex\."):
        tenant_for_command("zzz")
    with pytest.raises(JournalError, match="is not valid"):
        tenant_for_command("no way", create=True)
    assert Tenant.objects.count() == 2  # the service never writes


def test_a_refusal_lists_at_most_twenty_known_tenants():
    Tenant.objects.bulk_create(Tenant(slug=f"t{n:02}", name=f"t{n:02}") for n in range(25))
    with pytest.raises(JournalError, match=r"known tenants: t00, .*, t19 and 5 more\."):
        tenant_for_command("nosuch")


def test_import_journal_refuses_an_unknown_tenant_and_writes_nothing():
    tenant_ensure(slug="acme")
    before = rows()
    with pytest.raises(CommandError) as refused:
        import_journal("--tenant", "acmee")
    text = str(refused.value)
    assert "refused" in text and "no tenant 'acmee'; did you mean 'acme'?" in text
    assert "--create-tenant" in text
    assert rows() == before
    assert not Tenant.objects.filter(slug="acmee").exists()


def test_import_journal_creates_the_tenant_when_asked_and_the_default_one_always():
    out = import_journal("--tenant", "fresh", "--create-tenant", "--session", "s")
    assert "scope      fresh/s/main/main" in out
    assert Entry.objects.filter(journal__session__tenant__slug="fresh").count() > 0
    # the default tenant needs no flag (the quick start's first import)
    import_journal("--session", "d")
    assert Session.objects.filter(tenant__slug="default", key="d").exists()
    # an existing tenant needs none either
    import_journal("--tenant", "fresh", "--session", "again")
    assert Session.objects.filter(tenant__slug="fresh").count() == 2


def test_follow_refuses_an_unknown_tenant_and_writes_nothing(rollout):
    tenant_ensure(slug="acme")
    before = rows()
    with pytest.raises(CommandError) as refused:
        follow(rollout, "--tenant", "nosuch")
    text = str(refused.value)
    assert text.startswith("no tenant 'nosuch'; known tenants: acme.")
    assert "--create-tenant" in text
    assert rows() == before


def test_follow_creates_the_tenant_when_asked_and_follows_into_an_existing_one(rollout):
    follow(rollout, "--tenant", "newco", "--create-tenant")
    assert Session.objects.filter(tenant__slug="newco", key="rollout").exists()
    head = Entry.objects.filter(journal__session__tenant__slug="newco").count()
    assert head > 0
    follow(rollout, "--tenant", "newco")  # known now: no flag needed, nothing new
    assert Entry.objects.filter(journal__session__tenant__slug="newco").count() == head
    follow(rollout)  # the default tenant, created on first use
    assert Session.objects.filter(tenant__slug="default", key="rollout").exists()


@pytest.mark.parametrize("command", ["follow", "import_journal"])
def test_the_help_says_an_unknown_tenant_needs_create_tenant(command):
    from django.core.management import load_command_class

    app = "proxy_app" if command == "follow" else "recovery_app"
    parser = load_command_class(app, command).create_parser("manage.py", command)
    text = " ".join(parser.format_help().split())
    assert "--create-tenant" in text
    assert "refused, nothing written, unless it is 'default' or --create-tenant is given" in text
