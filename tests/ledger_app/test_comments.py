"""Comments on ledger facts: the ledger checks the fact, the audit app writes and logs it."""

from __future__ import annotations

import pytest

from audit_app.models import AuditEvent, Comment
from audit_app.services import CommentInvalid, comment_add
from journal_app.models import Entry
from ledger_app.comments import comment_on_fact, fact_exists
from tests.factories import TenantFactory, UserFactory, fold_build, journal_build

pytestmark = pytest.mark.django_db


@pytest.fixture
def folded():
    journal = journal_build(tenant=TenantFactory(slug="acme"), key="s1")
    fold = fold_build(journal)
    return journal, next(iter(fold.state_dict["facts"]))


def test_it_comments_on_a_fact_of_the_ledger_and_logs_it(folded):
    journal, fact_id = folded
    author = UserFactory(username="oscar")

    comment = comment_on_fact(journal=journal, fact_id=f"  {fact_id} ", author=author, text="why?")

    assert (comment.fact_id, comment.entry, comment.text) == (fact_id, None, "why?")
    event = AuditEvent.objects.exclude(action="fold.store").get()
    assert (event.action, event.object_type, event.object_id) == ("comment.add", "fact", fact_id)
    assert event.details == {"comment": comment.pk, "text": "why?"}


def test_it_refuses_a_fact_no_fold_holds_and_writes_nothing(folded):
    journal, _ = folded

    with pytest.raises(CommentInvalid, match="no fact 'nope' in the ledger of"):
        comment_on_fact(journal=journal, fact_id="nope", author=UserFactory(), text="x")

    assert (
        not Comment.objects.exists()
        and not AuditEvent.objects.exclude(action="fold.store").exists()
    )


def test_empty_text_is_refused_before_the_fact_is_looked_up(folded):
    journal, _ = folded

    with pytest.raises(CommentInvalid, match="needs text"):
        comment_on_fact(journal=journal, fact_id="nope", author=UserFactory(), text="  ")


def test_fact_exists_reads_the_latest_fold_that_mentions_the_id(folded):
    journal, fact_id = folded

    assert fact_exists(journal, fact_id) is True
    assert fact_exists(journal, fact_id + "x") is False


def test_comment_add_takes_exactly_one_target(folded):
    journal, fact_id = folded
    entry = Entry.objects.filter(journal=journal).first()

    with pytest.raises(CommentInvalid, match="one entry or on one fact"):
        comment_add(journal=journal, author=UserFactory(), text="x")
    with pytest.raises(CommentInvalid, match="one entry or on one fact"):
        comment_add(journal=journal, author=UserFactory(), text="x", entry=entry, fact_id=fact_id)


def test_comment_add_refuses_an_entry_of_another_journal(folded):
    journal, _ = folded
    other = journal_build(tenant=journal.session.tenant, key="s2")
    entry = Entry.objects.filter(journal=other).first()

    with pytest.raises(CommentInvalid, match="is not in"):
        comment_add(journal=journal, author=UserFactory(), text="x", entry=entry)
    assert not Comment.objects.exists()
