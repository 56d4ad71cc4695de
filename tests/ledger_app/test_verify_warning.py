"""The pages' warning that a ledger does not verify.

Pages read a stored full check (:func:`ledger_app.services.full_check.ledger_check`, run by
the ``check_ledger`` task) and never run it: a facts page costs the same queries whatever
the journal's size. The check covers the entries' token figures and source positions
(their ``figures_hash``) as well as the ledger itself.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Entry, Journal, Membership
from journal_app.views.scope_urls import scope_kwargs
from ledger_app import receivers
from ledger_app.models import StoredCheck
from ledger_app.services import full_check, ledger_fold
from ledger_app.services.checks import check_claim
from ledger_app.services.full_check import ledger_check, ledger_warnings
from ledger_app.services.integrity import ledger_integrity
from tests.factories import TenantFactory, journal_build

pytestmark = pytest.mark.django_db

WARNING = b'id="verify-warning"'


def _tamper(journal: Journal, seq: int, column: str, value) -> None:
    """Change a stored entry column behind the services, as a database user could."""
    pk = Entry.objects.get(journal=journal, seq=seq).pk
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":  # past the append-only trigger
            cur.execute("SET session_replication_role = replica")
        try:
            cur.execute(f'UPDATE journal_app_entry SET "{column}" = %s WHERE id = %s', [value, pk])
        finally:
            if connection.vendor == "postgresql":
                cur.execute("SET session_replication_role = DEFAULT")


def _items(rounds: int) -> list:
    items = [message("user", "Keep the billing tables untouched.")]
    for i in range(rounds):
        items += [
            tool_call(f"c{i}", "exec", {"command": f"pytest -q tests/test_{i}.py"}),
            tool_result(f"c{i}", f"{i} passed", exit_code=0),
            message("assistant", f"Run {i} passes."),
        ]
    return items


@pytest.fixture
def build(settings):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9
    tenant = TenantFactory(slug="acme")
    user = get_user_model().objects.create_user("rita", password="pw-rita")
    Membership.objects.create(user=user, tenant=tenant, role=Membership.Role.REVIEWER)

    def make(key: str, rounds: int) -> Journal:
        journal = journal_build(tenant=tenant, key=key, items=_items(rounds))
        ledger_fold(journal=journal)
        return Journal.objects.get(pk=journal.pk)

    return make


def _facts(client, journal: Journal):
    client.force_login(get_user_model().objects.get(username="rita"))
    return client.get(reverse("ledger:facts", kwargs=scope_kwargs(journal)))


@pytest.mark.parametrize(
    "change",
    [("token_count", 999_999), ("token_source", "estimate"), ("source_ref", "line 999")],
)
def test_a_tampered_token_figure_or_source_ref_warns_on_the_facts_page(build, client, change):
    column, value = change
    journal = build("s1", 3)
    ledger_check(journal=journal)
    assert WARNING not in _facts(client, journal).content

    _tamper(journal, 2, column, value)
    problems = ledger_integrity(journal=journal)
    assert (problems[0].check, problems[0].detail.split(":")[0]) == ("figures", "entry seq 2")
    assert {p.check for p in problems} <= {"figures", "manifest"}  # a covered token figure
    ledger_check(journal=journal)  # what the check_ledger task does after the change

    page = _facts(client, journal)
    assert WARNING in page.content
    assert b"figures: entry seq 2: figures_hash: stored" in page.content


def test_a_page_reads_the_stored_check_and_queues_a_missing_one(
    build, client, django_capture_on_commit_callbacks, monkeypatch
):
    journal = build("s1", 2)
    _tamper(journal, 3, "token_count", 1)
    background: list = []
    monkeypatch.setattr(receivers, "run_in_background", background.append)
    ran: list = []
    real_check = full_check.ledger_check
    monkeypatch.setattr(full_check, "ledger_check", lambda **kw: ran.append(1) or real_check(**kw))

    with django_capture_on_commit_callbacks(execute=True) as queued:
        first = _facts(client, journal)
    assert WARNING not in first.content  # nothing stored yet: the page did not check
    assert b"Checking the ledger" in first.content
    assert len(queued) == 1 and len(background) == 1  # handed to the background thread
    assert ran == [] and not StoredCheck.objects.filter(checked_at__isnull=False).exists()
    with django_capture_on_commit_callbacks() as again:
        _facts(client, journal)
    assert again == []  # queued once per ledger state

    background[0]()  # the background thread runs it and stores the check in the database
    assert ran == [1]
    assert StoredCheck.objects.get(journal=journal).problems[0].startswith("figures")
    assert WARNING in _facts(client, journal).content


def test_a_check_claim_is_a_compare_and_set(build):
    journal = build("s1", 1)
    assert check_claim(journal_id=journal.pk, key="a", ttl_seconds=600)
    assert not check_claim(journal_id=journal.pk, key="a", ttl_seconds=600)
    assert check_claim(journal_id=journal.pk, key="b", ttl_seconds=600)  # a new state
    assert check_claim(journal_id=journal.pk, key="b", ttl_seconds=0)  # the old claim lapsed


def test_a_new_fold_queues_a_new_check_and_shows_the_last_one_meanwhile(
    build, client, django_capture_on_commit_callbacks
):
    journal = build("s1", 2)
    _tamper(journal, 3, "source_ref", "line 1")
    ledger_check(journal=journal)
    from journal_app.services import journal_append

    journal_append(journal=journal, items=[message("user", "One more thing.")])
    ledger_fold(journal=journal)
    journal.refresh_from_db()

    with django_capture_on_commit_callbacks() as queued:
        assert ledger_warnings(journal=journal).problems[0].startswith("figures: entry seq 3")
    assert len(queued) == 1


def _page_queries(client, journal: Journal) -> int:
    ledger_check(journal=journal)
    _facts(client, journal)  # warm: sessions, caches
    with CaptureQueriesContext(connection) as ctx:
        page = _facts(client, journal)
    assert page.status_code == 200 and WARNING not in page.content
    return len(ctx.captured_queries)


def test_the_facts_page_query_count_does_not_grow_with_the_journal(build, client):
    small = build("small", 3)
    large = build("large", 60)
    assert large.head_seq > 15 * small.head_seq

    assert _page_queries(client, large) == _page_queries(client, small)


def test_the_warning_reads_one_query_whatever_the_size(build):
    journal = build("s1", 40)
    ledger_check(journal=journal)
    with CaptureQueriesContext(connection) as ctx:
        assert ledger_warnings(journal=journal).problems == []
    assert len(ctx.captured_queries) == 1  # the stored check with the ledger's state


def test_an_edit_in_place_shows_once_the_stored_check_is_older_than_its_max_age(
    build, client, settings, django_capture_on_commit_callbacks, monkeypatch
):
    """Fresh-eyes finding: the stored check is keyed by the journal head and the
    last fold, so an edit made in the database in place (no new entry or fold) was never
    seen by the pages. A check older than LEDGER_CHECK_MAX_AGE_SECONDS is queued again."""
    monkeypatch.setattr(receivers, "run_in_background", lambda fn: fn())  # no thread here
    journal = build("s1", 2)
    ledger_check(journal=journal)  # clean, stored
    _tamper(journal, 3, "source_ref", "line 999")
    with django_capture_on_commit_callbacks() as queued:
        assert WARNING not in _facts(client, journal).content
    assert queued == []  # fresh check, same state: nothing queued yet
    settings.LEDGER_CHECK_MAX_AGE_SECONDS = 0  # the stored check is now too old
    import time

    time.sleep(0.01)
    with django_capture_on_commit_callbacks() as queued:
        _facts(client, journal)
    assert len(queued) == 1
    queued[0]()
    assert WARNING in _facts(client, journal).content
