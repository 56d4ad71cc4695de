"""Pages without the broker: a broker configured (tasks not eager) but unreachable, a closed
port. Every page answers 200, the ledger pages say the check could not be queued, and a
fold request is 503 in the error shape with its task run marked not queued (README
"REST API")."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse

from config.celery import app
from journal_app.auth import api_key_create
from ledger_app.background import run_in_background
from ledger_app.models import Fold, StoredCheck, TaskRun
from ledger_app.runs import BROKER_DOWN
from ledger_app.services import ledger_fold
from ledger_app.services.checks import NOT_QUEUED, NOT_QUEUED_RETRY_SECONDS
from tests.api.conftest import Api
from tests.factories import MembershipFactory, TenantFactory, UserFactory, journal_build

# on_commit callbacks run as they do in production: the check is really sent
pytestmark = pytest.mark.django_db(transaction=True)

CLOSED = "redis://127.0.0.1:1/0"


@pytest.fixture
def broker_down(settings, monkeypatch):
    settings.CELERY_BROKER_URL = CLOSED
    settings.CELERY_TASK_ALWAYS_EAGER = False
    # celery's conf reads Django's settings unless a value is set on it: set here, and
    # taken off again after (monkeypatch's undo would leave the value set)
    keys = ("broker_url", "task_always_eager")
    kept = {k: app.conf.changes[k] for k in keys if k in app.conf.changes}
    app.conf.update(broker_url=CLOSED, task_always_eager=False)
    monkeypatch.setattr(app, "_pool", None)  # producers connect to the closed port
    monkeypatch.setattr(app.amqp, "_producer_pool", None)
    yield
    for k in keys:
        app.conf.changes.pop(k, None)
    app.conf.changes.update(kept)


@pytest.fixture
def world():
    acme = TenantFactory(slug="acme")
    user = MembershipFactory(tenant=acme, user=UserFactory(username="alice"), role="admin").user
    journal = journal_build(tenant=acme, key="refunds")
    fold = ledger_fold(journal=journal, writer="mechanical", recover=False).fold
    return acme, user, journal, fold


def test_every_page_answers_without_the_broker_and_says_the_check_was_not_queued(
    client, world, broker_down
):
    acme, user, journal, fold = world
    client.force_login(user)
    scope = "/ledger/acme/refunds/main/main/"
    fact_id = next(iter(fold.state_dict["facts"]))
    pages = [
        reverse("journal:session_list"),
        reverse("journal:session", args=["acme", "refunds"]),
        reverse("journal:timeline", args=["acme", "refunds", "main", "main"]),
        scope,
        scope + "folds/",
        scope + f"folds/{fold.number}/",
        scope + f"facts/{fact_id}/",
        scope + "context/",
        reverse("ledger:reviews"),
        reverse("journal:audit_log", args=["acme"]),
    ]
    for url in pages:
        r = client.get(url)
        assert r.status_code == 200, (url, r.status_code)

    idle()  # the check's message was sent off the request, and refused
    claim = StoredCheck.objects.get(journal=journal)
    assert claim.queued_state.startswith(NOT_QUEUED + "Error 111 connecting to 127.0.0.1:1")

    page = client.get(scope).content.decode()
    assert "could not be queued: the task broker is unreachable" in page
    assert "It runs in the background" not in page
    idle()
    assert StoredCheck.objects.get(journal=journal).queued_at == claim.queued_at  # not yet again

    # a minute later the next view asks again (and says so until it is queued)
    earlier = claim.queued_at - timedelta(seconds=NOT_QUEUED_RETRY_SECONDS + 1)
    StoredCheck.objects.filter(journal=journal).update(queued_at=earlier)
    assert "could not be queued" in client.get(scope).content.decode()
    idle()
    assert StoredCheck.objects.get(journal=journal).queued_at > earlier


def idle() -> None:
    """Wait until the background thread has done what was handed to it."""
    run_in_background(lambda: None).result(timeout=120)


def test_a_fold_request_with_an_unreachable_broker_is_503_and_never_queued(world, broker_down):
    acme, _, journal, _ = world
    _, raw = api_key_create(tenant=acme, name="runtime")
    api = Api(Client(), raw)
    folds = Fold.objects.filter(journal=journal).count()

    r = api.post("/sessions/refunds/main/main/folds", {})

    assert r.status_code == 503, r.content
    assert set(r.json()) == {"code", "message", "field", "entry"}
    assert r.json()["code"] == "broker_unavailable"
    run = TaskRun.objects.filter(journal=journal).latest("pk")
    assert run.status == "failed" and run.error.startswith(BROKER_DOWN)
    assert not TaskRun.objects.filter(status="queued").exists()
    assert Fold.objects.filter(journal=journal).count() == folds
