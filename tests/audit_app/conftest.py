"""Shared fixtures of the audit app's tests: a tenant with users of each role and a
journal whose second fold queues a P0 retirement (the permission-rule case, seed 000)."""

from __future__ import annotations

import pytest

from journal_app.formats.base import message
from journal_app.models import Entry, Membership
from journal_app.services import journal_append
from ledger_app.models import RetirementRequest
from ledger_app.services import ledger_fold
from tests.factories import MembershipFactory, TenantFactory, UserFactory, journal_build
from tests.support.writers import ScriptedWriter

RULE = "Always ask before changing file permissions."


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def acme():
    return TenantFactory(slug="acme")


def member_of(tenant, username, role):
    return MembershipFactory(tenant=tenant, user=UserFactory(username=username), role=role).user


@pytest.fixture
def operator(acme):
    return member_of(acme, "oscar", Membership.Role.OPERATOR)


@pytest.fixture
def reviewer(acme):
    return member_of(acme, "rita", Membership.Role.REVIEWER)


@pytest.fixture
def admin(acme):
    return member_of(acme, "ada", Membership.Role.ADMIN)


@pytest.fixture
def outsider():
    return member_of(TenantFactory(slug="globex"), "mallory", Membership.Role.ADMIN)


@pytest.fixture
def perm_journal(acme):
    """Fold 1 pins the rule; a later user message retires it; fold 2 queues the request."""
    j = journal_build(
        tenant=acme, key="perm", items=[message("user", RULE), message("assistant", "OK.")]
    )
    ledger_fold(journal=j)
    journal_append(
        journal=j,
        items=[message("user", "The permission rule no longer applies; you may chmod freely.")],
    )
    pin = next(f for f in j.folds.get(number=1).state_dict["facts"].values() if f.get("pin"))
    evidence = Entry.objects.get(journal=j, seq=3).entry_hash
    ledger_fold(
        journal=j,
        writer=ScriptedWriter([{"op": "retire", "id": pin["id"], "evidence": [evidence]}]),
    )
    return j


@pytest.fixture
def retirement(perm_journal):
    return RetirementRequest.objects.get(journal=perm_journal)
