"""Every fold leaves one ``fold.store`` audit event naming the surface that asked (the UI,
the API, a task, a command; the proxy's is in tests/proxy_app/test_fold_audit.py) and the
person when one is known (README "Audit log")."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from audit_app.models import AuditEvent
from audit_app.origin import Origin, origin_current, origin_scope, surface_of_path
from journal_app.auth import api_key_create
from journal_app.models import ApiKey
from ledger_app.models import Fold
from ledger_app.services import ledger_fold
from ledger_app.tasks import fold_journal
from tests.factories import journal_build

pytestmark = pytest.mark.django_db


def fold_events():
    return list(AuditEvent.objects.filter(action="fold.store").order_by("pk"))


@pytest.fixture
def journal(acme):
    return journal_build(tenant=acme, key="s1")


def test_a_fold_called_directly_is_recorded_as_a_command_without_actor(journal):
    fold = ledger_fold(journal=journal).fold

    [event] = fold_events()
    assert (event.details["surface"], event.actor, event.tenant) == (
        "command",
        None,
        journal.session.tenant,
    )
    assert event.object_id == str(fold.pk)
    assert event.object_label == f"{journal.scope_label} fold 1"
    assert (event.details["number"], event.details["seq_start"], event.details["seq_end"]) == (
        1,
        fold.seq_start,
        fold.seq_end,
    )


def test_the_compact_command_records_its_folds_as_command(journal):
    call_command("compact", journal.scope_label, stdout=io.StringIO())

    events = fold_events()
    assert [e.details["surface"] for e in events] == ["command"] * Fold.objects.filter(
        kind="fold"
    ).count()
    assert events


def test_the_fold_task_records_task_and_its_id(journal):
    result = fold_journal.apply(kwargs={"journal_id": journal.pk}, task_id="t-123")

    assert result.get()["created"] is True
    [event] = fold_events()
    assert (event.details["surface"], event.details["task_id"], event.actor) == (
        "task",
        "t-123",
        None,
    )


def test_the_api_records_api_and_the_keys_user(
    journal, acme, reviewer, django_capture_on_commit_callbacks
):
    _, raw = api_key_create(tenant=acme, name="desk", role=ApiKey.Role.REVIEWER, user=reviewer)
    with django_capture_on_commit_callbacks(execute=True):
        r = Client().post(
            "/api/v1/sessions/s1/main/main/folds",
            "{}",
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {raw}",
        )

    assert r.status_code == 202
    [event] = fold_events()
    assert (event.details["surface"], event.actor, event.actor_name) == ("api", reviewer, "rita")
    assert event.details["task_id"] == r.json()["task_id"]


def test_a_client_key_fold_names_the_api_and_no_person(
    journal, acme, django_capture_on_commit_callbacks
):
    _, raw = api_key_create(tenant=acme, name="runtime")
    with django_capture_on_commit_callbacks(execute=True):
        Client().post(
            "/api/v1/sessions/s1/main/main/folds",
            "{}",
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {raw}",
        )

    [event] = fold_events()
    assert (event.details["surface"], event.actor) == ("api", None)


def test_the_ui_fold_button_records_ui_and_the_user(
    journal, reviewer, client, django_capture_on_commit_callbacks
):
    client.force_login(reviewer)
    url = reverse("ledger:fold_now", args=["acme", "s1", "main", "main"])
    page = client.get(reverse("ledger:folds", args=["acme", "s1", "main", "main"]))
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(url)

    assert b'id="fold-now"' in page.content
    assert r.status_code == 302
    [event] = fold_events()
    assert (event.details["surface"], event.actor) == ("ui", reviewer)
    assert Fold.objects.filter(journal=journal).count() == 1


def test_an_operator_is_not_offered_the_fold_and_a_post_is_refused(journal, operator, client):
    client.force_login(operator)
    page = client.get(reverse("ledger:folds", args=["acme", "s1", "main", "main"]))
    r = client.post(reverse("ledger:fold_now", args=["acme", "s1", "main", "main"]))

    assert b'id="fold-now"' not in page.content
    assert b"for the tenant's reviewers and admins" in page.content
    assert r.status_code == 403
    assert (fold_events(), Fold.objects.count()) == ([], 0)


def test_a_get_of_the_fold_button_folds_nothing(journal, reviewer, client):
    client.force_login(reviewer)
    r = client.get(reverse("ledger:fold_now", args=["acme", "s1", "main", "main"]))

    assert r.status_code == 405
    assert Fold.objects.count() == 0


def test_a_fold_refused_stores_no_event(journal):
    journal_empty = journal_build(tenant=journal.session.tenant, key="empty", items=[])

    assert ledger_fold(journal=journal_empty).fold is None
    assert fold_events() == []


def test_surfaces_of_paths_and_scopes():
    assert [surface_of_path(p) for p in ("/api/v1/x", "/proxy/openai/v1/chat", "/t/acme/")] == [
        "api",
        "proxy",
        "ui",
    ]
    assert origin_current() == Origin("command")
    with origin_scope(surface="task"):
        assert origin_current().surface == "task"
    assert origin_current().surface == "command"
    with pytest.raises(ValueError, match="unknown surface 'web'"):
        with origin_scope(surface="web"):
            pass


def test_the_audit_log_filters_fold_events_by_session(journal, admin, client):
    other = journal_build(tenant=journal.session.tenant, key="s2")
    ledger_fold(journal=journal)
    ledger_fold(journal=other)
    client.force_login(admin)

    r = client.get(
        reverse("journal:audit_log", args=["acme"]), {"action": "fold.store", "session": "s2"}
    )

    body = r.content.decode()
    assert r.status_code == 200
    assert "acme/s2/main/main fold 1" in body and "acme/s1/main/main fold 1" not in body


def test_the_middleware_sets_the_origin_for_async_views_too(rf):
    import asyncio

    from audit_app.origin import OriginMiddleware

    seen = []

    async def view(request):
        seen.append(origin_current().surface)
        return "answer"

    middleware = OriginMiddleware(view)
    answer = asyncio.run(middleware(rf.post("/proxy/openai/v1/chat/completions")))

    assert (answer, seen) == ("answer", ["proxy"])
    assert origin_current().surface == "command"  # reset after the request
