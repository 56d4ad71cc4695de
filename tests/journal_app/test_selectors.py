"""Tenant-filtered reads of the journal (journal_app.selectors)."""

import pytest

from journal_app.formats.base import message
from journal_app.models import Entry
from journal_app.selectors import entries_by_hash
from tests.factories import TenantFactory, journal_build

pytestmark = pytest.mark.django_db


def test_entries_by_hash_answers_the_journals_own_entries_only(django_assert_num_queries):
    acme = TenantFactory(slug="acme")
    mine = journal_build(
        tenant=acme, key="mine", items=[message("user", "one"), message("user", "two")]
    )
    other = journal_build(
        tenant=TenantFactory(slug="globex"), key="other", items=[message("user", "x")]
    )
    own = list(Entry.objects.filter(journal=mine).values_list("entry_hash", flat=True))
    foreign = Entry.objects.filter(journal=other).values_list("entry_hash", flat=True)[0]
    with django_assert_num_queries(1):
        found = entries_by_hash(mine, [*own, foreign, "0" * 64])
    assert sorted(found) == sorted(own)
    assert {e.seq for e in found.values()} == set(range(1, len(own) + 1))
    assert entries_by_hash(other, own) == {}
    with django_assert_num_queries(0):
        assert entries_by_hash(mine, []) == {}
