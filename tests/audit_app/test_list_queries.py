"""No N+1: every list page of the UI runs a fixed number of queries, whatever the size.

Issue 6: "each list page, with 1,000 entries and 200 facts, stays under a fixed number of
queries". Each page is measured on a small scope and on a large one (1,001 entries, 201
facts in four folds, comments on entries and facts); the large one must stay under the
page's bound *and* cost no more queries than the small one.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from audit_app.services import comment_on_entry
from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Entry
from ledger_app.comments import comment_on_fact
from ledger_app.services import ledger_fold
from tests.factories import journal_build

pytestmark = pytest.mark.django_db

#: page -> the most queries it may run (session, user, then the page's own reads)
BOUNDS = {
    "sessions": 10,  # issue 17: + source times, totals over every match (2)
    "overview": 17,  # + failures (5: fold attempts, folds, failed context requests and model
    # calls, their counts), audit link
    # only for admins (up to 3); the cost reads nothing without LEDGER_MODEL_PRICES
    "timeline": 9,
    "timeline_filtered": 9,  # issue 17: + the journal's first source time
    "facts": 9,  # issues 16, 18: the verify warning's cache key (1), fact rows count (1)
    "facts_filtered": 9,
    "folds": 8,  # issue 16: the verify warning (its state: the last fold), shown here too
    "fold": 8,  # issue 16: the verify warning's cache key
    "diff": 10,  # issue 17: from fact rows: fold numbers, both sides digests (2), changed rows,
    # their births, cited entries, the row count (fixed, whatever the ledger size)
    "reviews": 5,
    "audit_log": 9,
}


def _big_items():
    items = [message("user", "Run every check and fix what fails.")]
    for i in range(200):
        items += [
            message("assistant", f"Step {i}: looking."),
            message("assistant", f"Step {i}: still looking."),
            message("assistant", f"Step {i}: running it."),
            tool_call(f"c{i}", "exec", {"command": f"check {i}"}),
            tool_result(f"c{i}", f"check {i}: ok", exit_code=0),
        ]
    return items


def _scope(acme, key, items, folds, operator):
    j = journal_build(tenant=acme, key=key, items=items)
    for upto in folds:
        assert ledger_fold(journal=j, upto=upto).fold is not None
    state = j.folds.order_by("-number").first().state_dict
    for fact_id in list(state["facts"])[:20]:
        comment_on_fact(journal=j, fact_id=fact_id, author=operator, text="checked")
    for e in Entry.objects.filter(journal=j).order_by("seq")[:20]:
        comment_on_entry(entry=e, author=operator, text="seen")
    return j


def _pages(j):
    scope = [j.session.tenant.slug, j.session.key, j.lane, j.branch]
    last = j.folds.order_by("-number").first().number
    return {
        "sessions": reverse("journal:session_list"),
        "overview": reverse("journal:session", args=scope[:2]),
        "timeline": reverse("journal:timeline", args=scope),
        "timeline_filtered": reverse("journal:timeline", args=scope) + "?q=kind:tool_call",
        "facts": reverse("ledger:facts", args=scope),
        "facts_filtered": reverse("ledger:facts", args=scope)
        + "?q=-pin:true+text:check&lifecycle=active",
        "folds": reverse("ledger:folds", args=scope),
        "fold": reverse("ledger:fold", args=[*scope, last]),
        "diff": reverse("ledger:fold_diff", args=[*scope, 0, last]),
        "reviews": reverse("ledger:reviews") + "?status=all",
        "audit_log": reverse("journal:audit_log", args=scope[:1]),
    }


def _count(client, url):
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return len(ctx.captured_queries)


def test_list_pages_run_a_fixed_number_of_queries(client, acme, admin, perm_journal, retirement):
    small = _scope(acme, "small", [message("user", "hi"), *_big_items()[1:11]], [None], admin)
    big = _scope(acme, "big", _big_items(), [250, 500, 750, None], admin)
    assert big.head_seq == 1001
    assert len(big.folds.order_by("-number").first().state_dict["facts"]) == 201
    for i in range(30):
        journal_build(tenant=acme, key=f"other-{i:02d}", items=[message("user", f"task {i}")])
    client.force_login(admin)
    for journal in (small, big):  # warm the cached verification verdict behind the
        for name in ("facts", "folds"):  # pages' warning: the pages are bounded
            client.get(_pages(journal)[name])
    small_counts = {name: _count(client, url) for name, url in _pages(small).items()}
    big_counts = {name: _count(client, url) for name, url in _pages(big).items()}
    for name, bound in BOUNDS.items():
        assert big_counts[name] <= bound, (
            f"{name}: {big_counts[name]} queries (bound {bound}) {big_counts}"
        )
        assert big_counts[name] <= small_counts[name], (
            f"{name}: {big_counts[name]} queries on 1,001 entries, {small_counts[name]} on 11"
        )
    filtered = client.get(_pages(big)["facts_filtered"]).content.decode()
    assert filtered.count('<tr id="fact-') == 100  # the filtered page is full, not empty
