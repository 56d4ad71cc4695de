"""Issue 17 on the ledger's pages: the folds filter and failures, the diff (word diff, support
hashes, birth fold, status filter), fact and fold side panels, tables that fit."""

from __future__ import annotations

import pytest
from django.urls import reverse

from journal_app.formats.base import message, tool_result
from journal_app.models import Entry
from journal_app.services import journal_append
from ledger_app.fact_changes import FieldChange
from ledger_app.models import FoldAttempt
from ledger_app.selectors.ui import field_rows, text_diff
from ledger_app.services import ledger_fold
from tests.factories import MembershipFactory, TenantFactory, UserFactory, journal_build
from tests.support.writers import ScriptedWriter

pytestmark = pytest.mark.django_db

SCOPE = ["acme", "refunds", "main", "main"]
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def member():
    acme = TenantFactory(slug="acme")
    return MembershipFactory(tenant=acme, user=UserFactory(username="alice")).user


@pytest.fixture
def folded(member):
    journal = journal_build(tenant=member.tenants.get(slug="acme"), key="refunds")
    assert ledger_fold(journal=journal, recover=False).fold is not None
    journal_append(journal=journal, items=[tool_result("t2", "14 passed")])
    goal = Entry.objects.get(journal=journal, seq=2)
    ops = [
        {
            "op": "add",
            "fact": {
                "id": "d1",
                "category": "decision",
                "priority": "P1",
                "confidence": "reported",
                "text": "The fix is limited to the refund rounding.",
                "support": [{"entry": goal.entry_hash, "quote": "refund rounding"}],
                "author": "writer",
            },
        },
        {
            "op": "add",
            "fact": {
                "id": "claim",
                "category": "verified_state",
                "priority": "P1",
                "confidence": "verified",
                "text": "All deployed.",
                "support": [{"entry": goal.entry_hash}],
                "author": "writer",
            },
        },
    ]
    fold = ledger_fold(journal=journal, writer=ScriptedWriter(ops, "w"), recover=False).fold
    assert fold is not None and fold.ops_rejected >= 1
    journal_append(journal=journal, items=[message("user", "And one more thing.")])
    FoldAttempt.objects.create(
        journal=journal,
        number=fold.number + 1,
        seq_start=13,
        seq_end=13,
        revision=13,
        range_hash="0" * 64,
        writer="openai:gpt-5",
        outcome=FoldAttempt.Outcome.FAILED,
        error="model endpoint unreachable: timed out",
    )
    return journal


def test_the_folds_page_filters_rejections_fallbacks_and_failures(client, member, folded):
    client.force_login(member)
    url = reverse("ledger:folds", args=SCOPE)
    every = client.get(url).content.decode()
    assert every.count('<tr id="fold-') == folded.folds.count()
    assert "model endpoint unreachable: timed out" in every  # failures listed with the reason
    rejections = client.get(url, {"show": "rejections"}, **HTMX).content.decode()
    assert rejections.lstrip().startswith('<section id="fold-list"')  # the fragment only
    assert rejections.count('<tr id="fold-') == 1 and '<tr id="fold-2"' in rejections
    assert "proposal</small>" in rejections  # reducer and proposal counts apart
    failures = client.get(url, {"show": "failures"}).content.decode()
    assert '<tr id="fold-' not in failures and "timed out" in failures
    assert "No stored fold failed: the failed attempts above stored none." in failures
    bogus = client.get(url, {"show": "nonsense"}).content.decode()
    assert bogus.count('<tr id="fold-') == folded.folds.count()


def test_the_overview_lists_failures_with_their_reason(client, member, folded):
    client.force_login(member)
    body = client.get(reverse("journal:session", args=SCOPE[:2])).content.decode()
    assert 'id="failed-attempts"' in body and "timed out" in body
    assert "1 failed attempt</a>" in body and "1 with rejections</a>" in body


def test_the_diff_says_where_each_fact_was_born_and_filters_by_status(client, member, folded):
    client.force_login(member)
    url = reverse("ledger:fold_diff", args=[*SCOPE, 0, 2])
    body = client.get(url).content.decode()
    assert "born in <a" in body and ">fold 2</a>" in body and ">fold 1</a>" in body
    assert "new in fold" not in body
    added = client.get(url, {"status": "added"}, **HTMX).content.decode()
    assert added.lstrip().startswith('<section id="diff-view"')
    assert "showing added only" in added
    removed = client.get(url, {"status": "removed"}).content.decode()
    assert "No removed fact between fold 0 and fold 2." in removed


def test_fact_and_fold_open_in_the_side_panel(client, member, folded):
    client.force_login(member)
    fact = reverse("ledger:fact", args=[*SCOPE, "d1"])
    body = client.get(
        fact, **HTMX, HTTP_HX_TARGET="side-panel", HTTP_HX_CURRENT_URL="http://testserver/"
    ).content.decode()
    assert body.lstrip().startswith('<aside id="side-panel"') and "The fix is limited" in body
    assert 'href="/e/sha256:' in body and "Born in" in body
    fold = reverse("ledger:fold", args=[*SCOPE, 2])
    panel = client.get(
        fold, **HTMX, HTTP_HX_TARGET="side-panel", HTTP_HX_CURRENT_URL="http://testserver/"
    ).content.decode()
    assert "Rejected on the way" in panel and "<html" not in panel
    assert "<html" in client.get(fold).content.decode()  # without htmx: the page


def test_the_facts_table_fits_four_columns_and_keeps_the_filters_in_the_url(client, member, folded):
    client.force_login(member)
    body = client.get(
        reverse("ledger:facts", args=SCOPE), {"category": "decision"}
    ).content.decode()
    assert '<table class="facts fit">' in body
    table = body.index('class="facts fit"')
    assert body.count('<th scope="col"', table, body.index("</thead>", table)) == 4
    assert "data-url-state" in body and 'data-permalink="http://testserver/ledger/' in body
    assert 'data-label="Support"' in body  # stacked cards on a phone keep every label


def test_text_diff_marks_words_removed_and_inserted():
    parts = text_diff("The fix covers rounding.", "The fix covers rounding and tests.")
    assert parts == [
        ("equal", "The fix covers "),
        ("del", "rounding."),
        ("ins", "rounding and tests."),
    ]
    assert "".join(t for op, t in parts if op != "ins") == "The fix covers rounding."
    assert "".join(t for op, t in parts if op != "del") == "The fix covers rounding and tests."


def test_field_rows_diff_text_and_support_by_hash():
    rows = field_rows(
        [
            FieldChange("text", "a b c", "a x c"),
            FieldChange(
                "support", [{"entry": "aa"}, {"entry": "bb"}], [{"entry": "bb"}, {"entry": "cc"}]
            ),
            FieldChange("lifecycle", "active", "closed"),
        ]
    )
    assert rows[0].segments == [("equal", "a "), ("del", "b"), ("ins", "x"), ("equal", " c")]
    assert (rows[1].added, rows[1].removed) == (["cc"], ["aa"])
    assert (rows[2].before, rows[2].after) == ("active", "closed")
