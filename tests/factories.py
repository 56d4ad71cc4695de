"""Test factories: users, tenants and memberships with factory-boy; journals through services.

Journals are never built by hand: :func:`journal_build` goes through
``journal_app.services.journal_append`` (hashing, chunking, artifacts), and
:func:`fold_build` through ``ledger_app.services.ledger_fold``, so tests see the same rows
an import and a fold would write.
"""

from __future__ import annotations

from collections.abc import Sequence

import factory
from django.contrib.auth import get_user_model

from journal_app.formats.base import ParsedEntry, message, tool_call, tool_result
from journal_app.models import Journal, Membership, Tenant
from journal_app.services import journal_append, journal_ensure, session_ensure
from ledger_app.models import Fold
from ledger_app.services import ledger_fold

PASSWORD = "correct horse battery staple"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.test")
    password = factory.django.Password(PASSWORD)


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"tenant-{n}")
    name = factory.LazyAttribute(lambda t: t.slug.title())


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    tenant = factory.SubFactory(TenantFactory)
    role = Membership.Role.OPERATOR


def sample_items() -> list[ParsedEntry]:
    """A short session: rules, a goal, a parallel read, a failed test run, an interrupted call."""
    return [
        message("system", "Never modify the payments tables without asking the user first."),
        message("user", "Fix the refund rounding in billing/refunds.py."),
        message("assistant", "Reading the two files first."),
        tool_call("r1", "read_file", {"path": "billing/refunds.py"}),
        tool_call("r2", "read_file", {"path": "tests/test_refunds.py"}),
        tool_result(
            "r1", "from decimal import Decimal\n\ndef refund(x):\n    return round(x, 2)\n"
        ),
        tool_result("r2", "def test_refund():\n    assert refund(1.005) == 1.01\n"),
        tool_call("t1", "exec", {"command": "pytest tests/test_refunds.py"}),
        tool_result(
            "t1",
            "FAILED tests/test_refunds.py::test_refund - AssertionError\n1 failed",
            is_error=True,
            exit_code=1,
        ),
        message("user", "Correction: only change billing/refunds.py."),
        tool_call("t2", "exec", {"command": "pytest"}),
    ]


def journal_build(
    *,
    tenant: Tenant,
    key: str = "s1",
    items: Sequence[ParsedEntry] | None = None,
    lane: str = "main",
    branch: str = "main",
    title: str = "",
) -> Journal:
    """A journal of scope ``tenant/key/lane/branch`` holding ``items`` (default: sample)."""
    session = session_ensure(tenant=tenant, key=key, title=title, source_format="test")
    journal = journal_ensure(session=session, lane=lane, branch=branch)
    journal_append(journal=journal, items=list(sample_items() if items is None else items))
    journal.refresh_from_db()
    return journal


def fold_build(journal: Journal, upto: int | None = None) -> Fold:
    """Fold ``journal`` with the mechanical writer and return the fold."""
    result = ledger_fold(journal=journal, upto=upto)
    assert result.fold is not None, result.reason
    return result.fold
