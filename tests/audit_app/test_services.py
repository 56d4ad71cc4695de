"""Comments, annotations, reviews with their audit events; roles as groups."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from audit_app.models import AuditEvent, Comment
from audit_app.roles import REVIEW_PERMISSION, ROLE_PERMISSIONS, roles_ensure, tenant_role
from audit_app.services import (
    AccountError,
    CommentInvalid,
    account_ensure,
    annotation_add,
    comment_on_entry,
)
from journal_app.models import AppendOnlyError, Entry, Membership
from ledger_app.comments import comment_on_fact
from ledger_app.models import Fold, RetirementRequest
from ledger_app.services import ReviewError, ReviewForbidden, retirement_review
from tests.audit_app.conftest import member_of
from tests.factories import TenantFactory, fold_build, journal_build

pytestmark = pytest.mark.django_db


def test_the_role_groups_exist_after_migrate_with_their_permissions():
    groups = {g.name: g for g in Group.objects.prefetch_related("permissions__content_type")}
    assert {"operator", "reviewer", "admin"} <= groups.keys()

    def perms(name):
        return {f"{p.content_type.app_label}.{p.codename}" for p in groups[name].permissions.all()}

    assert REVIEW_PERMISSION not in perms("operator")
    assert REVIEW_PERMISSION in perms("reviewer")
    assert "audit_app.view_audit_log" in perms("admin")
    assert "audit_app.view_audit_log" not in perms("reviewer")
    assert perms("admin") == set(ROLE_PERMISSIONS["admin"])


def test_memberships_keep_the_user_in_step_with_role_groups(acme):
    user = member_of(acme, "ulla", Membership.Role.OPERATOR)
    assert list(user.groups.values_list("name", flat=True)) == ["operator"]
    assert not user.has_perm(REVIEW_PERMISSION)
    other = TenantFactory(slug="other")
    Membership.objects.create(user=user, tenant=other, role=Membership.Role.REVIEWER)
    assert sorted(user.groups.values_list("name", flat=True)) == ["operator", "reviewer"]
    m = Membership.objects.get(user=user, tenant=other)
    m.delete()
    assert list(user.groups.values_list("name", flat=True)) == ["operator"]
    assert tenant_role(user, acme.pk) == "operator" and tenant_role(user, other.pk) is None


def test_roles_ensure_is_idempotent():
    roles_ensure()
    roles_ensure()
    assert Group.objects.filter(name__in=["operator", "reviewer", "admin"]).count() == 3


def test_a_comment_on_an_entry_is_stored_and_logged(acme, operator):
    j = journal_build(tenant=acme, key="s1")
    entry = Entry.objects.get(journal=j, seq=2)
    c = comment_on_entry(entry=entry, author=operator, text="  the goal, verbatim  ")
    assert (c.text, c.entry, c.fact_id, c.tenant) == ("the goal, verbatim", entry, "", acme)
    event = AuditEvent.objects.exclude(action="fold.store").get()
    assert (event.action, event.actor, event.object_type) == ("comment.add", operator, "entry")
    assert event.object_id == "sha256:" + entry.entry_hash
    assert event.details["text"] == "the goal, verbatim"
    with pytest.raises(AppendOnlyError):
        c.save()


def test_a_comment_needs_text_and_writes_nothing_without(acme, operator):
    j = journal_build(tenant=acme, key="s1")
    entry = Entry.objects.get(journal=j, seq=2)
    with pytest.raises(CommentInvalid, match="needs text"):
        comment_on_entry(entry=entry, author=operator, text="   ")
    with pytest.raises(CommentInvalid, match="at most 10,000"):
        comment_on_entry(entry=entry, author=operator, text="x" * 10_001)
    assert (
        not Comment.objects.exists()
        and not AuditEvent.objects.exclude(action="fold.store").exists()
    )


def test_a_comment_on_a_fact_needs_a_fact_of_that_ledger(acme, operator):
    j = journal_build(tenant=acme, key="s1")
    fold = fold_build(j)
    fact_id = next(iter(fold.state_dict["facts"]))
    c = comment_on_fact(journal=j, fact_id=fact_id, author=operator, text="is this right?")
    assert c.fact_id == fact_id and c.entry is None
    with pytest.raises(CommentInvalid, match="no fact 'nope'"):
        comment_on_fact(journal=j, fact_id="nope", author=operator, text="x")
    assert Comment.objects.count() == 1


def test_an_annotation_labels_the_session(acme, operator):
    j = journal_build(tenant=acme, key="s1")
    a = annotation_add(session=j.session, author=operator, verdict="bad", note="lost the goal")
    assert a.get_verdict_display() == "bad compaction example"
    assert AuditEvent.objects.exclude(action="fold.store").get().details == {
        "annotation": a.pk,
        "verdict": "bad",
        "note": "lost the goal",
    }
    with pytest.raises(CommentInvalid, match="good' or 'bad"):
        annotation_add(session=j.session, author=operator, verdict="meh")


def test_a_reviewer_approves_with_a_comment_and_it_is_logged(retirement, reviewer):
    fold = retirement_review(
        request=retirement, actor=reviewer, decision="approve", comment="confirmed with the user"
    )
    retirement.refresh_from_db()
    assert (retirement.status, retirement.reviewer, retirement.decided_in) == (
        "approved",
        reviewer,
        fold,
    )
    assert fold.kind == Fold.Kind.REVIEW
    event = AuditEvent.objects.exclude(action="fold.store").get()
    assert (event.action, event.actor_name, event.object_id) == (
        "review.approve",
        "rita",
        str(retirement.pk),
    )
    assert event.details["comment"] == "confirmed with the user"
    assert event.details["fold"] == fold.number


def test_an_operator_is_refused_and_the_attempt_is_logged(retirement, operator):
    with pytest.raises(ReviewForbidden, match="oscar is not a reviewer of tenant acme"):
        retirement_review(request=retirement, actor=operator, decision="approve", comment="ok")
    assert RetirementRequest.objects.get().status == "pending"
    assert Fold.objects.filter(kind=Fold.Kind.REVIEW).count() == 0
    event = AuditEvent.objects.exclude(action="fold.store").get()
    assert (event.action, event.details["role"]) == ("review.denied", "operator")


def test_a_reviewer_of_another_tenant_is_refused(retirement):
    stranger = member_of(TenantFactory(slug="globex"), "gus", Membership.Role.REVIEWER)
    assert stranger.has_perm(REVIEW_PERMISSION)  # the role may review, but not here
    with pytest.raises(ReviewForbidden):
        retirement_review(request=retirement, actor=stranger, decision="refuse", comment="no")
    assert RetirementRequest.objects.get().status == "pending"


def test_a_decision_needs_a_comment_and_a_known_decision(retirement, reviewer):
    with pytest.raises(ReviewError, match="needs a comment"):
        retirement_review(request=retirement, actor=reviewer, decision="approve", comment=" ")
    with pytest.raises(ReviewError, match="'approve' or 'refuse'"):
        retirement_review(request=retirement, actor=reviewer, decision="maybe", comment="x")
    assert not AuditEvent.objects.exclude(action="fold.store").exists()
    assert RetirementRequest.objects.get().status == "pending"


def test_account_ensure_creates_a_user_with_memberships_and_groups(acme):
    user, created, generated = account_ensure(
        username="nia", memberships=[(acme, "reviewer")], email="nia@example.test"
    )
    assert created and generated and user.check_password(generated)
    assert Membership.objects.get(user=user).role == "reviewer"
    assert list(user.groups.values_list("name", flat=True)) == ["reviewer"]
    user, created, generated = account_ensure(
        username="nia", password="new-secret", memberships=[(acme, "operator")]
    )
    assert not created and generated is None and user.check_password("new-secret")
    assert list(user.groups.values_list("name", flat=True)) == ["operator"]
    assert list(
        AuditEvent.objects.exclude(action="fold.store")
        .order_by("pk")
        .values_list("action", flat=True)
    ) == [
        "account.create",
        "account.update",
    ]


def test_account_ensure_refuses_an_unknown_role_and_writes_nothing(acme):
    with pytest.raises(AccountError, match="unknown role 'boss'"):
        account_ensure(username="x", memberships=[(acme, "boss")])
    with pytest.raises(AccountError, match="needs a username"):
        account_ensure(username=" ")
    from django.contrib.auth import get_user_model

    assert not get_user_model().objects.filter(username="x").exists()
