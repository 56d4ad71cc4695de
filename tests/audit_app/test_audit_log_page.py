"""The audit log page: filters by actor, action, session and time; the nav entry for admins;
logins and imports recorded."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from audit_app.models import AuditEvent
from audit_app.services import audit_record
from recovery_app.session_transfer import transcript_import

pytestmark = pytest.mark.django_db


def _event(tenant, actor, action, object_id, days_ago=0):
    real_now = timezone.now
    when = real_now() - timedelta(days=days_ago)
    with pytest.MonkeyPatch.context() as mp:  # created_at is auto_now_add: set the clock
        mp.setattr(timezone, "now", lambda: when)
        return audit_record(
            actor=actor, tenant=tenant, action=action, object_type="session", object_id=object_id
        )


def test_filters_by_actor_action_session_and_time(client, acme, admin, operator):
    a = _event(acme, admin, "session.export", "acme/refunds")
    b = _event(acme, operator, "comment.add", "acme/billing", days_ago=10)
    c = _event(acme, None, "journal.import", "acme/refunds", days_ago=3)
    client.force_login(admin)
    url = reverse("journal:audit_log", args=["acme"])

    def shown(**params):
        body = client.get(url, params).content.decode()
        return {e.pk for e in (a, b, c) if f'id="event-{e.pk}"' in body}

    assert shown() == {a.pk, b.pk, c.pk}
    assert shown(actor="osc") == {b.pk}
    assert shown(actor="system") == {c.pk}
    assert shown(action="session") == {a.pk}
    assert shown(session="refunds") == {a.pk, c.pk}
    since = (timezone.now() - timedelta(days=5)).date().isoformat()
    assert shown(since=since) == {a.pk, c.pk}
    until = (timezone.now() - timedelta(days=5)).date().isoformat()
    assert shown(until=until) == {b.pk}
    bad = client.get(url, {"since": "yesterday"})
    assert (
        bad.status_code == 400
        and "since: &#x27;yesterday&#x27; is not a date" in bad.content.decode()
    )


def _sign_in(client, user):
    user.set_password("pw-long-enough-1")
    user.save()
    client.post(reverse("login"), {"username": user.username, "password": "pw-long-enough-1"})


def test_the_nav_offers_the_audit_log_to_admins_only(client, acme, admin, operator):
    link = f'href="{reverse("journal:audit_log", args=["acme"])}"'
    _sign_in(client, admin)
    assert link in client.get(reverse("journal:session_list")).content.decode()
    _sign_in(client, operator)
    assert link not in client.get(reverse("journal:session_list")).content.decode()


def test_a_login_through_the_page_is_recorded(client, acme, admin):
    admin.set_password("pw-ada-long-1")
    admin.save()
    response = client.post(reverse("login"), {"username": "ada", "password": "pw-ada-long-1"})
    assert response.status_code == 302
    event = AuditEvent.objects.get(action="account.login")
    assert (event.tenant, event.actor) == (acme, admin)


def test_an_import_is_recorded_in_its_transaction(acme, tmp_path, corpus):
    source = next((corpus / "openai-chat-tool-calls").glob("*.json*"), None)
    if source is None:
        pytest.skip("no openai-chat-tool-calls sample in the corpus")
    transcript_import(path=source, tenant="acme", session="imported")
    event = AuditEvent.objects.get(action="journal.import")
    assert event.object_id == "acme/imported" and event.details["appended"] > 0
