"""Issue 13 item 5: the fold page, the verifier page and the diff are
paginated (100 rows, a count, a permalink per page), the diff is read from the stored fact
versions, and none of the three runs more queries for a bigger ledger or fold."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from journal_app.formats.base import message
from journal_app.models import Entry
from journal_app.services import journal_append
from ledger_app import selectors
from ledger_app.fact_changes import state_diff
from ledger_app.selectors import fold_diff
from ledger_app.selectors.ui import ScopeLinks, value_node
from ledger_app.services import ledger_fold
from tests.factories import MembershipFactory, TenantFactory, UserFactory, journal_build
from tests.support.writers import ScriptedWriter

pytestmark = pytest.mark.django_db

SCOPE = ["acme", "refunds", "main", "main"]


@pytest.fixture
def member(settings, tmp_path):
    """Alice, a member of tenant acme (media files under the test's own directory)."""
    settings.MEDIA_ROOT = tmp_path / "media"
    return MembershipFactory(tenant=TenantFactory(slug="acme"), user=UserFactory()).user


def _decision(i: int, entry: Entry, text: str = "") -> dict:
    return {
        "id": f"d{i:04d}",
        "category": "decision",
        "priority": "P1",
        "confidence": "reported",
        "text": text or f"Decision number {i} keeps the refund rounding.",
        "support": [{"entry": entry.entry_hash}],
        "author": "writer",
    }


def _fold(journal, ops, note="next step"):
    journal_append(journal=journal, items=[message("user", note)])
    fold = ledger_fold(journal=journal, writer=ScriptedWriter(ops, "w"), recover=False).fold
    assert fold is not None
    return fold


def _grown(member, adds: int):
    """Fold 1 (mechanical), then fold 2 adding ``adds`` decisions."""
    journal = journal_build(tenant=member.tenants.get(slug="acme"), key="refunds")
    assert ledger_fold(journal=journal, recover=False).fold is not None
    goal = Entry.objects.get(journal=journal, seq=2)
    fold = _fold(journal, [{"op": "add", "fact": _decision(i, goal)} for i in range(adds)])
    assert fold.number == 2
    return journal, goal


def _queries(client, url, params=None):
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, params or {})
    assert response.status_code == 200
    return len(ctx), response.content.decode()


# The diff -----------------------------------------------------------------------------------


def test_the_diff_pages_100_facts_with_a_count_and_a_permalink(client, member):
    journal, _ = _grown(member, 130)
    total = len(fold_diff(journal, 1, 2))  # the 130 decisions and the fold's mechanical facts
    assert total >= 130
    client.force_login(member)
    url = reverse("ledger:fold_diff", args=[*SCOPE, 1, 2])
    first = client.get(url).content.decode()
    assert first.count('class="diff-added"') == 100
    assert f"Facts 1–100 of {total}" in first and "page 1 of 2" in first
    second = client.get(url, {"page": 2, "status": "added"}).content.decode()
    assert second.count('class="diff-added"') == total - 100
    assert f"Facts 101–{total} of {total}" in second
    assert f'href="{url}?page=2&amp;status=added">permalink</a>' in second
    ids = re.findall(r'<code class="fact-id">(d\d+)</code>', first + second)
    assert ids == [f"d{i:04d}" for i in range(130)]  # one order across pages, no overlap


def test_the_diff_runs_the_same_queries_for_a_small_and_a_big_ledger(client, member, settings):
    client.force_login(member)
    small, _ = _grown(member, 5)
    url = reverse("ledger:fold_diff", args=[*SCOPE, 1, 2])
    # the first view of a ledger state also queues its stored check (a few writes, once per
    # state): both measures are taken after that, so they count the diff's reads alone
    _queries(client, url)
    n_small, _ = _queries(client, url)
    # the same scope grown by 300 more facts over two more folds
    goal = Entry.objects.get(journal=small, seq=2)
    _fold(small, [{"op": "add", "fact": _decision(i, goal)} for i in range(5, 155)])
    _fold(small, [{"op": "add", "fact": _decision(i, goal)} for i in range(155, 305)])
    big_url = reverse("ledger:fold_diff", args=[*SCOPE, 1, 4])
    _queries(client, big_url)
    n_big, body = _queries(client, big_url)
    assert len(fold_diff(small, 1, 4)) >= 300 and body.count('class="diff-added"') == 100
    assert n_big == n_small, (n_small, n_big)


def test_the_diff_matches_a_diff_of_whole_states_both_ways(member):
    journal, goal = _grown(member, 3)
    _fold(
        journal,
        [
            {
                "op": "supersede",
                "id": "d0000",
                "fact": _decision(9, goal, "Rounding is half-even."),
            },
            {"op": "add", "fact": _decision(10, goal)},
        ],
    )
    _fold(journal, [{"op": "evict", "id": "d0000"}])  # superseded, so it may go
    folds = {f.number: f for f in selectors.fold_choices(journal)}
    assert len(folds) == 4
    for a in range(5):
        for b in range(5):
            oracle = state_diff(selectors.state_at(folds.get(a)), selectors.state_at(folds.get(b)))
            stored = fold_diff(journal, a, b)
            assert [(r.change.status, r.change.fact_id) for r in stored] == [
                (c.status, c.fact_id) for c in oracle.changes
            ], (a, b)
            assert [r.change.fact for r in stored] == [c.fact for c in oracle.changes]
            assert [r.change.changes for r in stored] == [c.changes for c in oracle.changes]
            assert (stored.counts, stored.unchanged) == (oracle.counts, oracle.unchanged)
    forward = {r.change.fact_id: r for r in fold_diff(journal, 2, 3)}
    assert {k: r.change.status for k, r in forward.items() if k.startswith("d")} == {
        "d0000": "changed",
        "d0009": "added",
        "d0010": "added",
    }
    superseded = forward["d0000"].change
    assert {c.name: c.after for c in superseded.changes}["superseded_by"] == "d0009"
    assert forward["d0009"].born == 3 and forward["d0000"].born == 2
    backward = {r.change.fact_id: r.change.status for r in fold_diff(journal, 3, 2)}
    assert {k: v for k, v in backward.items() if k.startswith("d")} == {
        "d0000": "changed",
        "d0009": "removed",
        "d0010": "removed",
    }
    evicted = {r.change.fact_id: r.change.status for r in fold_diff(journal, 3, 4)}
    assert evicted.get("d0000") == "removed"


def test_nested_values_read_as_fields_with_hashes_and_facts_linked(client, member):
    journal, goal = _grown(member, 2)
    _fold(journal, [{"op": "supersede", "id": "d0000", "fact": _decision(7, goal, "Half-even.")}])
    client.force_login(member)
    body = client.get(
        reverse("ledger:fold_diff", args=[*SCOPE, 2, 3]), {"status": "changed"}
    ).content.decode()
    fact_url = reverse("ledger:fact", args=[*SCOPE, "d0007"])
    assert f'href="{fact_url}"' in body  # superseded_by links the superseding fact
    assert "{&#x27;" not in body and "{'" not in body  # no raw Python dict
    assert "born in <a" in body and ">fold 2</a>" in body


# The fold page and the verifier page ----------------------------------------------------------


def _rejecting(member, key: str, adds: int, evicts: int):
    """Fold 2 adds ``adds`` decisions; fold 3 tries to evict ``evicts`` of them (active P1:
    every one rejected) and adds one more."""
    journal = journal_build(tenant=member.tenants.get(slug="acme"), key=key)
    assert ledger_fold(journal=journal, recover=False).fold is not None
    goal = Entry.objects.get(journal=journal, seq=2)
    _fold(journal, [{"op": "add", "fact": _decision(i, goal)} for i in range(adds)])
    ops = [{"op": "evict", "id": f"d{i:04d}"} for i in range(evicts)]
    fold = _fold(journal, [*ops, {"op": "add", "fact": _decision(adds, goal)}])
    assert fold.number == 3
    return journal


def test_the_fold_page_lists_100_ops_a_page_and_names_each_rejection_with_its_page(client, member):
    journal = _rejecting(member, "refunds", 130, 120)
    n = len(journal.folds.get(number=3).delta_dict["ops"])  # 121 and the fold's pins
    client.force_login(member)
    url = reverse("ledger:fold", args=[*SCOPE, 3])
    first = client.get(url).content.decode()
    ops = first[first.index('id="ops"') :]
    assert ops.count('<tr id="op-') == 100 and '<tr id="op-99"' in ops
    assert f"Ops 1–100 of {n}" in first and "page 1 of 2" in first
    assert "Rejected: 120 ops" in first and "active P0 and P1 facts are never evicted" in first
    assert 'href="#op-5"' in first  # on this page: an anchor
    assert f'href="{url}?page=2#op-100"' in first  # on the next page: that page
    assert "#op-101" not in first  # only the first 100 rejections are named
    assert "120 rejected in all; the first 100 are named here" in first
    second = client.get(url, {"page": 2}).content.decode()
    rows = second[second.index('id="ops"') :]
    assert rows.count('<tr id="op-') == n - 100 and f'<tr id="op-{n - 1}"' in rows
    assert f'href="{url}?page=1#op-5"' in second  # rejected on another page: its page


def test_the_fold_and_verifier_pages_run_the_same_queries_for_5_and_250_ops(client, member):
    _rejecting(member, "small", 5, 3)
    _rejecting(member, "big", 250, 240)
    client.force_login(member)
    for name in ("ledger:fold", "ledger:verdicts"):
        small_url = reverse(name, args=["acme", "small", "main", "main", 3])
        big_url = reverse(name, args=["acme", "big", "main", "main", 3])
        for url in (small_url, big_url):  # the verify warning's replay is cached per head
            client.get(url)
        small, _ = _queries(client, small_url)
        big, body = _queries(client, big_url)
        assert big == small, (name, small, big)
        assert "page 1 of 3" in body


def test_the_verifier_page_pages_the_reducers_verdicts(client, member):
    journal = _rejecting(member, "refunds", 130, 120)
    n = len(journal.folds.get(number=3).delta_dict["ops"])
    client.force_login(member)
    url = reverse("ledger:verdicts", args=[*SCOPE, 3])
    first = client.get(url).content.decode()
    assert first.count('<tr id="op-') == 100 and f"Ops 1–100 of {n}" in first
    assert "120 ops rejected by the reducer" in first
    second = client.get(url, {"page": 2}).content.decode()
    assert second.count('<tr id="op-') == n - 100 and f"Ops 101–{n} of {n}" in second
    assert f'href="{url}?page=2#reducer-h">permalink</a>' in second
    past = client.get(url, {"page": 99}).content.decode()  # past the end: the last page
    assert f"Ops 101–{n} of {n}" in past


def test_value_node_links_folds_entries_and_facts_and_nests_the_rest():
    links = ScopeLinks(dict(zip(("tenant", "session", "lane", "branch"), SCOPE, strict=True)))
    digest = "ab" * 32
    ended = value_node({"fold": 4, "evidence": [digest, "sha256:" + digest]}, links, "ended_by")
    assert ended.kind == "map" and [k for k, _ in ended.items] == ["fold", "evidence"]
    fold, evidence = ended.items[0][1], ended.items[1][1]
    assert (fold.kind, fold.text, fold.url) == (
        "link",
        "fold 4",
        reverse("ledger:fold", args=[*SCOPE, 4]),
    )
    assert [n.text for _, n in evidence.items] == [digest[:12]] * 2
    assert all(n.is_hash and n.url.endswith("?cited=entry") for _, n in evidence.items)
    assert value_node("d7", links, "superseded_by").url == reverse(
        "ledger:fact", args=[*SCOPE, "d7"]
    )
    assert value_node("refold:3", links, "superseded_by").text == "fold 3"
    assert value_node("x" * 400, links).text == "x" * 299 + "…"
    assert value_node(None, links).text == "(absent)" and value_node(True, links).text == "true"
    assert value_node(3, links, "count").kind == "text"  # only a "fold" key links a fold


def test_the_diff_lists_from_one_query_and_hashes_only_facts_on_both_sides(
    member, django_assert_num_queries
):
    journal, goal = _grown(member, 3)
    _fold(journal, [{"op": "add", "fact": _decision(5, goal)}])  # fold 3
    # fold 3 also stored d0001 again, byte for byte (a version that changes nothing)
    from ledger_app.models import LedgerFact

    current = LedgerFact.objects.get(journal=journal, fact_id="d0001", until__isnull=True)
    LedgerFact.objects.filter(pk=current.pk).update(until=3)
    current.pk, current.since, current.change = None, 3, "changed"
    current.save()
    with django_assert_num_queries(1):  # adds only: no digest read
        assert len(fold_diff(journal, 1, 2)) >= 3
    diff = fold_diff(journal, 2, 3)
    with django_assert_num_queries(2):  # the rows, then the digests of d0001's two versions
        assert diff.counts["changed"] == 0
    listed = [r.change.fact_id for r in diff]
    assert "d0001" not in listed and "d0005" in listed
    oracle = state_diff(
        selectors.state_at(selectors.fold_get(journal, 2)),
        selectors.state_at(selectors.fold_get(journal, 3)),
    )
    assert listed == [c.fact_id for c in oracle.changes]
    assert diff.unchanged == oracle.unchanged
