"""One review service: the same P0 retirement decided through the UI (with and without
htmx) and the API answers the same status, needs the same comment and writes the same audit
event (docs/design.md 5.2 and 9)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse

from audit_app.models import AuditEvent
from journal_app.auth import api_key_create
from journal_app.models import ApiKey, Membership
from ledger_app.models import Fold, RetirementRequest
from tests.api.conftest import Api, pending_retirement
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


class _Rollback(Exception):
    pass


def _isolated(run: Callable[[], Any]) -> Any:
    """Run ``run`` and undo everything it wrote, so each channel decides the same request."""
    try:
        with transaction.atomic():
            raise _Rollback(run())
    except _Rollback as done:
        return done.args[0]


def _events() -> list[tuple]:
    """The audit rows, with the acting key (present only for API decisions) set apart."""
    rows = (
        AuditEvent.objects.exclude(action="fold.store")
        .order_by("pk")
        .values_list(
            "action",
            "actor_id",
            "actor_name",
            "object_type",
            "object_id",
            "object_label",
            "details",
        )
    )
    return [(*r[:-1], {k: v for k, v in r[-1].items() if k != "key"}) for r in rows]


@pytest.fixture
def setup(tenant):
    journal, req, pin = pending_retirement(tenant)
    rita = UserFactory(username="rita")
    Membership.objects.create(user=rita, tenant=tenant, role=Membership.Role.REVIEWER)
    oscar = UserFactory(username="oscar")
    Membership.objects.create(user=oscar, tenant=tenant, role=Membership.Role.OPERATOR)
    _, rita_key = api_key_create(tenant=tenant, name="desk", role=ApiKey.Role.REVIEWER, user=rita)
    _, client_key = api_key_create(tenant=tenant, name="runtime")
    return {
        "req": req,
        "rita": rita,
        "oscar": oscar,
        "rita_key": rita_key,
        "client_key": client_key,
    }


def _ui(user, pk: int, data: dict[str, str], htmx: bool) -> Callable[[], Any]:
    def run() -> Any:
        client = Client()
        client.force_login(user)
        extra = {"HTTP_HX_REQUEST": "true"} if htmx else {}
        response = client.post(reverse("ledger:review", args=[pk]), data, **extra)
        return _outcome(response.status_code)

    return run


def _api(key: str, pk: int, data: dict[str, str]) -> Callable[[], Any]:
    def run() -> Any:
        response = Api(Client(), key).post(f"/retirements/{pk}/review", data)
        return _outcome(response.status_code, response.json())

    return run


def _outcome(status: int, body: dict | None = None) -> dict[str, Any]:
    return {
        "status": status,
        "body": body,
        "events": _events(),
        "request": RetirementRequest.objects.values_list("status", "comment").get(),
        "review_folds": Fold.objects.filter(kind=Fold.Kind.REVIEW).count(),
    }


def _three(setup, user, key, data):
    pk = setup["req"].pk
    return (
        _isolated(_ui(user, pk, data, htmx=False)),
        _isolated(_ui(user, pk, data, htmx=True)),
        _isolated(_api(key, pk, data)),
    )


def test_an_approval_writes_the_same_fold_request_and_audit_event_on_both(setup):
    data = {"decision": "approve", "comment": "confirmed with the user"}
    page, htmx, api = _three(setup, setup["rita"], setup["rita_key"], data)

    assert (page["status"], htmx["status"], api["status"]) == (302, 200, 200)  # PRG for a page
    assert page["events"] == htmx["events"] == api["events"]
    [event] = api["events"]
    req = setup["req"]
    assert event == (
        "review.approve",
        setup["rita"].pk,
        "rita",
        "retirement",
        str(req.pk),
        f"{req.journal.scope_label} fact {req.fact_id}",
        {"comment": "confirmed with the user", "fold": 3, "fact_id": req.fact_id},
    )
    assert page["request"] == htmx["request"] == api["request"]
    assert api["request"] == ("approved", "confirmed with the user")
    assert page["review_folds"] == htmx["review_folds"] == api["review_folds"] == 1


@pytest.mark.parametrize("comment", ["", "   ", "x" * 10_001, "bad\x00byte"])
def test_a_decision_without_a_valid_comment_is_400_on_both_and_writes_nothing(setup, comment):
    data = {"decision": "refuse", "comment": comment}
    page, htmx, api = _three(setup, setup["rita"], setup["rita_key"], data)

    assert page["status"] == htmx["status"] == api["status"] == 400
    assert (api["body"]["code"], api["body"]["field"]) == ("invalid_comment", "comment")
    for outcome in (page, htmx, api):
        assert outcome["events"] == []
        assert outcome["request"] == ("pending", "")
        assert outcome["review_folds"] == 0


def test_an_operator_is_403_and_logged_and_a_key_whose_user_lost_the_role_is_refused(setup, tenant):
    Membership.objects.filter(user=setup["rita"], tenant=tenant).update(
        role=Membership.Role.OPERATOR
    )
    # the update bypasses the receivers: resync the role groups as a role change would
    from audit_app.roles import user_roles_sync

    user_roles_sync(setup["rita"])
    data = {"decision": "approve", "comment": "looks fine"}
    page, htmx, api = _three(setup, setup["rita"], setup["rita_key"], data)

    assert page["status"] == htmx["status"] == 403
    assert [e[:3] for e in page["events"]] == [("review.denied", setup["rita"].pk, "rita")]
    assert page["events"][0][6] == {"decision": "approve", "role": "operator"}
    # a key follows its user: a reviewer key whose user is no longer a reviewer
    # is refused like an unknown key, before any operation runs
    assert api["status"] == 401 and api["body"]["code"] == "unauthenticated"
    assert api["events"] == []
    for outcome in (page, htmx, api):
        assert outcome["request"] == ("pending", "") and outcome["review_folds"] == 0


def test_a_client_key_is_refused_like_an_operator(setup):
    data = {"decision": "approve", "comment": "ok"}
    page = _isolated(_ui(setup["oscar"], setup["req"].pk, data, htmx=False))
    api = _isolated(_api(setup["client_key"], setup["req"].pk, data))

    assert page["status"] == api["status"] == 403
    assert "reviewer key" in api["body"]["message"]
    assert [e[0] for e in page["events"]] == [e[0] for e in api["events"]] == ["review.denied"]


def test_a_second_decision_is_409_on_both(setup):
    from ledger_app.services import retirement_review

    retirement_review(
        request=setup["req"], actor=setup["rita"], decision="refuse", comment="still applies"
    )
    before = _events()
    data = {"decision": "approve", "comment": "changed my mind"}
    page, htmx, api = _three(setup, setup["rita"], setup["rita_key"], data)

    assert page["status"] == htmx["status"] == api["status"] == 409
    assert api["body"]["code"] == "review_conflict"
    for outcome in (page, htmx, api):
        assert outcome["events"] == before
        assert outcome["request"] == ("refused", "still applies")


def test_an_unknown_decision_is_422_on_both_naming_the_field(setup):
    data = {"decision": "maybe", "comment": "x"}
    page, htmx, api = _three(setup, setup["rita"], setup["rita_key"], data)

    assert page["status"] == htmx["status"] == api["status"] == 422
    assert api["body"]["field"] == "decision"
    assert page["events"] == htmx["events"] == api["events"] == []


def test_a_reviewer_key_without_a_user_is_refused(setup, tenant):
    from ledger_app.services import ReviewForbidden, retirement_review

    key = ApiKey.objects.get(prefix=setup["rita_key"][:11])
    key.user = None
    with pytest.raises(ReviewForbidden, match="names no reviewer user"):
        retirement_review(request=setup["req"], actor=key, decision="approve", comment="ok")
    event = AuditEvent.objects.exclude(action="fold.store").get()
    assert (event.action, event.actor, event.details["key"]) == ("review.denied", None, key.prefix)
    assert RetirementRequest.objects.get().status == "pending"


def test_an_api_decision_names_the_key_that_made_it(setup):
    r = Api(Client(), setup["rita_key"]).post(
        f"/retirements/{setup['req'].pk}/review", {"decision": "approve", "comment": "confirmed"}
    )
    assert r.status_code == 200, r.content
    event = AuditEvent.objects.exclude(action="fold.store").get(action="review.approve")
    key = ApiKey.objects.get(name="desk")
    assert event.details["key"] == key.prefix and event.actor == setup["rita"]
