"""Operator UI pages of the ledger: facts at a fold, fold list, fold detail (docs/design.md 8)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from journal_app.formats.base import message, tool_result
from journal_app.hashing import display
from journal_app.models import Entry, Journal, Membership
from journal_app.services import journal_append
from ledger_app.models import Fold
from ledger_app.services import ledger_fold
from tests.factories import MembershipFactory, TenantFactory, UserFactory, journal_build
from tests.support.writers import ScriptedWriter


def mechanical_fold(journal, upto=None):
    """A mechanical fold without the recovery scan: the pages are checked against its facts."""
    result = ledger_fold(journal=journal, upto=upto, writer="mechanical", recover=False)
    assert result.fold is not None, result.reason
    return result.fold


pytestmark = pytest.mark.django_db

SCOPE = ["acme", "refunds", "main", "main"]
FACTS_URL = "/ledger/acme/refunds/main/main/"


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def acme():
    return TenantFactory(slug="acme")


@pytest.fixture
def member(acme):
    return MembershipFactory(tenant=acme, user=UserFactory(username="alice")).user


@pytest.fixture
def outsider():
    return MembershipFactory(
        tenant=TenantFactory(slug="globex"), user=UserFactory(username="mallory")
    ).user


@pytest.fixture
def journal(acme):
    return journal_build(tenant=acme, key="refunds")


@pytest.fixture
def folded(journal):
    mechanical_fold(journal)
    return journal


def _writer_fold(journal: Journal, ops: list[dict]) -> Fold:
    """Answer the interrupted call, then fold seq 11-12 with a scripted writer's ``ops``."""
    journal_append(journal=journal, items=[tool_result("t2", "14 passed")])
    result = ledger_fold(journal=journal, writer=ScriptedWriter(ops, "test-writer"), recover=False)
    assert result.fold is not None, result.reason
    return result.fold


def _entry(journal, seq):
    return Entry.objects.get(journal=journal, seq=seq)


def _ops(journal):
    goal = _entry(journal, 2)
    return [
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
                "id": "d2",
                "category": "verified_state",
                "priority": "P1",
                "confidence": "verified",
                "text": "All tests pass.",
                "support": [{"entry": goal.entry_hash}],
                "author": "writer",
            },
        },
    ]


# Login and tenant isolation ---------------------------------------------------------------


def test_it_redirects_anonymous_users_to_login(client, folded):
    for url in [FACTS_URL, FACTS_URL + "folds/", FACTS_URL + "folds/1/"]:
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


def test_it_answers_404_for_another_tenants_ledger(client, outsider, folded):
    client.force_login(outsider)
    for url in [
        reverse("ledger:facts", args=SCOPE),
        reverse("ledger:folds", args=SCOPE),
        reverse("ledger:fold", args=[*SCOPE, 1]),
    ]:
        assert client.get(url).status_code == 404, url


# Facts ------------------------------------------------------------------------------------


def test_it_shows_facts_with_pins_verbatim_and_support_links(client, member, folded):
    client.force_login(member)
    response = client.get(FACTS_URL)
    body = response.content.decode()
    assert response.status_code == 200
    assert "pin, verbatim" in body
    assert (
        '<pre class="pin" tabindex="0">Never modify the payments tables without asking the user first.</pre>'
        in body
    )
    system = _entry(folded, 1)
    # a support item naming no chunk or quote opens the entry marked as cited whole
    entry_url = reverse("journal:entry", args=[display(system.entry_hash)])
    assert 'href="' + entry_url + '?cited=entry"' in body
    assert "FAILED:" in body  # the failed pytest run is a blocker
    assert "did not complete" not in body  # the trailing interrupted round is not folded yet
    assert "Category · priority · lifecycle · confidence</th>" in body
    assert "Permalink" in body and "?fold=1" in body


def test_it_says_when_the_fold_is_a_mechanical_fallback(client, member, folded):
    client.force_login(member)
    body = client.get(FACTS_URL).content.decode()
    assert (
        "mechanical facts only: retrieve raw journal evidence before relying on omitted state"
        in body
    )


def test_it_filters_facts(client, member, folded):
    client.force_login(member)
    body = client.get(FACTS_URL, {"priority": "P0"}).content.decode()
    assert "3 of 6 facts after fold 1 matching priority = P0." in body
    # each pin with its kind: the system rule and the user's correction govern, the task
    # ("Fix the refund rounding ...") is a request
    assert body.count("pin, verbatim · governing</span>") == 2
    assert body.count("pin, verbatim · request</span>") == 1
    assert "FAILED:" not in body
    body = client.get(FACTS_URL, {"category": "blocker", "lifecycle": "active"}).content.decode()
    assert "1 of 6 facts" in body
    assert "FAILED:" in body and "pin, verbatim" not in body


def test_it_returns_only_the_fact_table_to_htmx(client, member, folded):
    client.force_login(member)
    response = client.get(FACTS_URL, {"priority": "P0"}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="fact-table"')
    assert "<html" not in body and 'id="fact-filters"' not in body
    assert "3 of 6 facts" in body


def test_it_keeps_a_no_js_filter_form(client, member, folded):
    client.force_login(member)
    body = client.get(FACTS_URL).content.decode()
    assert f'method="get" action="{FACTS_URL}"' in body
    assert 'hx-target="#fact-table"' in body
    assert '<label for="filter-priority">Priority</label>' in body


def test_it_selects_the_state_after_a_given_fold(client, member, folded):
    _writer_fold(folded, _ops(folded))
    client.force_login(member)
    latest = client.get(FACTS_URL).content.decode()
    assert "7 of 7 facts after fold 2" in latest
    assert "The fix is limited to the refund rounding." in latest
    assert "mechanical facts only" not in latest  # fold 2 was accepted, not a fallback
    first = client.get(FACTS_URL, {"fold": 1}).content.decode()
    assert "6 of 6 facts after fold 1" in first
    assert "The fix is limited" not in first
    assert client.get(FACTS_URL, {"fold": 9}).status_code == 404
    assert client.get(FACTS_URL, {"fold": "x"}).status_code == 404


def test_it_links_quoted_support_to_the_highlighted_entry(client, member, folded):
    _writer_fold(folded, _ops(folded))
    goal = _entry(folded, 2)
    client.force_login(member)
    body = client.get(FACTS_URL, {"category": "decision"}).content.decode()
    link = reverse("journal:entry", args=[display(goal.entry_hash)]) + "?quote=refund+rounding"
    assert f'href="{link}#quote"' in body
    entry_page = client.get(link).content.decode()
    assert '<mark id="quote" class="cited">refund rounding</mark>' in entry_page
    assert "hash verified" in entry_page


def test_it_explains_how_to_fold_when_there_is_no_fold(client, member, journal):
    client.force_login(member)
    body = client.get(FACTS_URL).content.decode()
    assert "No fold yet" in body
    assert "manage.py fold acme/refunds/main/main" in body
    assert "manage.py fold SCOPE" in body


def test_it_renders_the_facts_page_with_bounded_queries(
    client, member, folded, django_assert_max_num_queries
):
    _writer_fold(folded, _ops(folded))
    client.force_login(member)
    # the first view of a ledger state verifies it for the warning and caches the
    # verdict under the journal's head and last fold; the page itself is bounded
    assert client.get(FACTS_URL).status_code == 200
    # fact rows: one COUNT and one page of rows instead of one parsed state; the
    # cached verification verdict costs one query for its key
    with django_assert_max_num_queries(9):
        response = client.get(FACTS_URL)
    assert response.status_code == 200


# Folds ------------------------------------------------------------------------------------


def test_it_lists_folds(client, member, folded):
    _writer_fold(folded, _ops(folded))
    client.force_login(member)
    body = client.get(reverse("ledger:folds", args=SCOPE)).content.decode()
    assert reverse("ledger:fold", args=[*SCOPE, 1]) in body
    assert reverse("ledger:fold", args=[*SCOPE, 2]) in body
    assert "fallback" in body and "accepted" in body
    assert "mechanical" in body and "test-writer" in body
    assert '<strong class="bad">1</strong>' in body  # fold 2 rejected one op
    assert "1–10" in body  # fold 1's seq range: the trailing interrupted call is left out


def test_it_shows_fold_ops_with_verdicts_and_rejections_highlighted(client, member, folded):
    _writer_fold(folded, _ops(folded))
    client.force_login(member)
    response = client.get(reverse("ledger:fold", args=[*SCOPE, 2]))
    body = response.content.decode()
    assert response.status_code == 200
    assert '<tr id="op-1" class="verdict-rejected">' in body
    assert "needs a tool result that demonstrates it" in body
    assert '<tr id="op-0" class="verdict-accepted">' in body
    assert "1 rejected" in body
    assert "Manifest" in body and "&quot;id&quot;: &quot;test-writer&quot;" in body
    assert reverse("ledger:fold", args=[*SCOPE, 1]) in body  # previous fold link


def test_it_shows_the_mechanical_fold_manifest(client, member, folded):
    client.force_login(member)
    body = client.get(reverse("ledger:fold", args=[*SCOPE, 1])).content.decode()
    assert "mechanical (no model)" in body
    assert "&quot;entry_hashes&quot;" in body
    assert "mechanical facts only" in body
    assert client.get(reverse("ledger:fold", args=[*SCOPE, 5])).status_code == 404


# Filter expression, pagination, comments on facts -----------------------------------------


def test_it_filters_facts_with_an_expression_and_the_selects(client, member, folded):
    client.force_login(member)
    body = client.get(FACTS_URL, {"q": "pin:true text:payments"}).content.decode()
    assert "1 of 6 facts after fold 1 matching <code>pin:true text:payments</code>." in body
    assert "Never modify the payments tables" in body
    body = client.get(FACTS_URL, {"q": "-pin:true", "priority": "P3"}).content.decode()
    assert "matching priority = P3, <code>-pin:true</code>" in body
    assert "pin, verbatim" not in body
    assert "Permalink" in body and "q=-pin%3Atrue" in body


def test_it_shows_a_bad_fact_expression_with_its_position(client, member, folded):
    client.force_login(member)
    body = client.get(FACTS_URL, {"q": 'priority:P9 text:"x'}).content.decode()
    assert "at position 1, token <code>priority:P9</code>" in body
    assert "&#x27;P9&#x27; is not a priority (allowed: P0, P1, P2, P3)" in body
    assert "0 of 6 facts" in body
    assert "No fact matches these filters" not in body  # the error says why, not "no match"
    body = client.get(FACTS_URL, {"q": 'priority:P0 text:"x'}).content.decode()
    assert "at position 13" in body and "unterminated quote" in body


def test_it_paginates_facts(client, acme, member):
    from journal_app.formats.base import tool_call

    items = [message("user", "go")]
    for i in range(130):
        items += [tool_call(f"c{i}", "exec", {"i": i}), tool_result(f"c{i}", f"ok {i}")]
    j = journal_build(tenant=acme, key="big", items=items)
    mechanical_fold(j)
    client.force_login(member)
    url = reverse("ledger:facts", args=["acme", "big", "main", "main"])
    first = client.get(url).content.decode()
    assert "100 of 131 facts" not in first
    assert "131 of 131 facts after fold 1; 1–100 shown." in first
    assert first.count('<tr id="fact-') == 100
    assert "Page 1 of 2" in first
    second = client.get(url, {"page": 2}).content.decode()
    assert second.count('<tr id="fact-') == 31


def test_it_adds_a_comment_to_a_fact(client, member, folded):
    from audit_app.models import Comment
    from ledger_app.views import fact_dom_id

    pin = next(f for f in folded.folds.get().state_dict["facts"].values() if f.get("pin"))
    fact_url = reverse("ledger:fact", args=[*SCOPE, pin["id"]])
    client.force_login(member)
    listing = client.get(FACTS_URL, {"priority": "P0"}).content.decode()
    assert f'href="{fact_url}#comments">comment</a>' in listing
    url = reverse("journal:fact_comment", args=SCOPE)
    response = client.post(url, {"fact_id": pin["id"], "text": "verbatim, good", "next": fact_url})
    assert response.status_code == 302
    assert response["Location"] == fact_url + "#" + fact_dom_id(pin["id"])
    page = client.get(fact_url).content.decode()
    assert "1 comment</summary>" in page and "verbatim, good" in page
    assert Comment.objects.get().fact_id == pin["id"]
    listing = client.get(FACTS_URL, {"priority": "P0"}).content.decode()
    assert f'href="{fact_url}#comments">1 comment</a>' in listing
    # htmx gets the fact's comment fragment; a foreign "next" is ignored
    response = client.post(
        url,
        {"fact_id": pin["id"], "text": "second", "next": "https://evil.test/"},
        HTTP_HX_REQUEST="true",
    )
    body = response.content.decode()
    assert body.lstrip().startswith(f'<details id="comments-{fact_dom_id(pin["id"])}"')
    assert "2 comments</summary>" in body and "evil.test" not in body
    response = client.post(url, {"fact_id": "nope", "text": "x"})
    assert response.status_code == 302
    assert "no fact &#x27;nope&#x27;" in client.get(response["Location"]).content.decode()


def test_the_fact_page_shows_the_fact_and_its_history(client, member, folded):
    _writer_fold(folded, _ops(folded))
    client.force_login(member)
    body = client.get(reverse("ledger:fact", args=[*SCOPE, "d1"])).content.decode()
    assert "The fix is limited to the refund rounding." in body
    assert '<tr class="verdict-accepted"><th scope="row" class="num"><a href="' in body
    assert reverse("ledger:fold", args=[*SCOPE, 2]) in body
    rejected = client.get(reverse("ledger:fact", args=[*SCOPE, "d2"])).content.decode()
    assert "not in the ledger after fold 2" in rejected  # d2 was rejected: history only
    assert "needs a tool result that demonstrates it" in rejected
    before = client.get(reverse("ledger:fact", args=[*SCOPE, "d1"]), {"fold": 1}).content.decode()
    assert "not in the ledger after fold 1" in before
    assert client.get(reverse("ledger:fact", args=[*SCOPE, "nope"])).status_code == 404


# Fold detail, diff ------------------------------------------------------------------------


def test_the_fold_page_lists_rejections_first(client, member, folded):
    _writer_fold(folded, _ops(folded))
    client.force_login(member)
    body = client.get(reverse("ledger:fold", args=[*SCOPE, 2])).content.decode()
    summary = body[body.index('id="rejected-h"') : body.index('id="summary-h"')]
    assert "Rejected: 1 op" in summary
    assert '<a href="#op-1">op 1</a> <code>add</code> <code>d2</code>' in summary
    assert "needs a tool result that demonstrates it" in summary


def test_the_fold_page_prints_twenty_covered_hashes_of_many(client, acme, member):
    j = journal_build(tenant=acme, key="long", items=[message("user", f"m{i}") for i in range(30)])
    mechanical_fold(j)
    client.force_login(member)
    body = client.get(
        reverse("ledger:fold", args=["acme", "long", "main", "main", 1])
    ).content.decode()
    assert "30 covered entry hashes, the first 20 shown" in body
    assert "... 10 more (all in the session export)" in body
    last = Entry.objects.get(journal=j, seq=30).entry_hash
    assert last not in body.split('id="manifest-h"')[1]


def test_it_diffs_the_ledger_between_two_folds(client, member, folded):
    _writer_fold(folded, _ops(folded))
    client.force_login(member)
    url = reverse("ledger:fold_diff", args=[*SCOPE, 1, 2])
    body = client.get(url).content.decode()
    assert "1 added</span>" in body and "0 changed</span>" in body and "0 removed</span>" in body
    assert "6 unchanged" in body
    assert "The fix is limited to the refund rounding." in body
    assert 'class="diff-added"' in body
    goal = _entry(folded, 2)
    assert (
        reverse("journal:entry", args=[display(goal.entry_hash)]) + "?quote=refund+rounding" in body
    )
    swapped = client.get(reverse("ledger:fold_diff", args=[*SCOPE, 2, 1])).content.decode()
    assert "1 removed</span>" in swapped
    empty = client.get(reverse("ledger:fold_diff", args=[*SCOPE, 0, 1])).content.decode()
    assert "6 added</span>" in empty
    same = client.get(reverse("ledger:fold_diff", args=[*SCOPE, 1, 1])).content.decode()
    assert "The ledger is the same after fold 1 and after fold 1" in same
    assert client.get(reverse("ledger:fold_diff", args=[*SCOPE, 1, 7])).status_code == 404


def test_the_diff_shows_changed_fields(client, member, folded):
    ops = _ops(folded)[:1]
    _writer_fold(folded, ops)
    journal_append(journal=folded, items=[message("assistant", "Superseding the decision.")])
    said = _entry(folded, 13)
    result = ledger_fold(
        journal=folded,
        recover=False,
        writer=ScriptedWriter(
            [
                {
                    "op": "supersede",
                    "id": "d1",
                    "fact": {
                        "id": "d1b",
                        "category": "decision",
                        "priority": "P1",
                        "confidence": "reported",
                        "text": "The fix also covers the tests.",
                        "support": [{"entry": said.entry_hash}],
                        "author": "writer",
                    },
                }
            ]
        ),
    )
    assert result.fold is not None
    client.force_login(member)
    body = client.get(reverse("ledger:fold_diff", args=[*SCOPE, 2, 3])).content.decode()
    assert "1 added</span>" in body and "1 changed</span>" in body
    assert (
        "<dt><code>lifecycle</code></dt><dd><del>active</del> → <ins>superseded</ins></dd>" in body
    )


def test_the_compare_form_redirects_to_the_diff_permalink(client, member, folded):
    client.force_login(member)
    response = client.get(reverse("ledger:fold_compare", args=SCOPE), {"a": 0, "b": 1})
    assert response.status_code == 302
    assert response["Location"] == reverse("ledger:fold_diff", args=[*SCOPE, 0, 1])
    bad = client.get(reverse("ledger:fold_compare", args=SCOPE), {"a": "x"})
    assert bad.status_code == 302 and bad["Location"] == reverse("ledger:folds", args=SCOPE)
    assert "Pick two folds to compare." in client.get(bad["Location"]).content.decode()
    folds_page = client.get(reverse("ledger:folds", args=SCOPE)).content.decode()
    assert f'action="{reverse("ledger:fold_compare", args=SCOPE)}"' in folds_page


# Review queue -----------------------------------------------------------------------------


@pytest.fixture
def pending(acme):
    """A journal whose P0 pin has a pending retirement (later user evidence, fold 2)."""
    from ledger_app.models import RetirementRequest

    j = journal_build(
        tenant=acme,
        key="perm",
        items=[
            message("user", "Always ask before changing file permissions."),
            message("assistant", "OK."),
        ],
    )
    mechanical_fold(j)
    journal_append(journal=j, items=[message("user", "The permission rule no longer applies.")])
    pin = next(f for f in j.folds.get(number=1).state_dict["facts"].values() if f.get("pin"))
    ledger_fold(
        journal=j,
        writer=ScriptedWriter(
            [{"op": "retire", "id": pin["id"], "evidence": [_entry(j, 3).entry_hash]}]
        ),
    )
    return RetirementRequest.objects.get(journal=j)


def _member(tenant, name, role):
    return MembershipFactory(tenant=tenant, user=UserFactory(username=name), role=role).user


def test_operators_see_the_queue_but_no_buttons_and_who_can_decide(client, acme, pending):
    oscar = _member(acme, "oscar", "operator")
    rose = _member(acme, "rose", "reviewer")
    client.force_login(oscar)
    body = client.get(reverse("ledger:reviews")).content.decode()
    assert f'href="{reverse("ledger:review", args=[pending.pk])}"' in body
    assert "Always ask before changing file permissions." in body
    detail = client.get(reverse("ledger:review", args=[pending.pk])).content.decode()
    assert 'value="approve"' not in detail and 'value="refuse"' not in detail
    assert "Your role in acme is <strong>operator</strong>" in detail
    assert "(here: <strong>rose</strong>" in detail
    client.force_login(rose)
    reviewer = client.get(reverse("ledger:review", args=[pending.pk])).content.decode()
    assert '<button type="submit" name="decision" value="approve">' in reviewer
    third = _entry(pending.journal, 3)
    assert reverse("journal:entry", args=[display(third.entry_hash)]) in detail


def test_an_operator_gets_403_and_nothing_changes(client, acme, pending):
    from audit_app.models import AuditEvent

    client.force_login(_member(acme, "oscar", "operator"))
    url = reverse("ledger:review", args=[pending.pk])
    response = client.post(url, {"decision": "approve", "comment": "looks fine"})
    assert response.status_code == 403
    assert "oscar is not a reviewer of tenant acme" in response.content.decode()
    htmx = client.post(url, {"decision": "approve", "comment": "x"}, HTTP_HX_REQUEST="true")
    assert htmx.status_code == 403  # a fragment request is refused the same way
    assert htmx.content.decode().lstrip().startswith('<section id="review-decision"')
    assert "Refused (403): oscar is not a reviewer" in htmx.content.decode()
    pending.refresh_from_db()
    assert pending.status == "pending"
    assert (
        list(AuditEvent.objects.exclude(action="fold.store").values_list("action", flat=True))
        == ["review.denied"] * 2
    )


def test_a_reviewer_approves_and_the_decision_is_recorded(client, acme, pending):
    rita = _member(acme, "rita", "reviewer")
    client.force_login(rita)
    url = reverse("ledger:review", args=[pending.pk])
    response = client.post(url, {"decision": "approve", "comment": "confirmed with the user"})
    assert response.status_code == 302 and response["Location"] == url
    pending.refresh_from_db()
    assert (pending.status, pending.reviewer, pending.comment) == (
        "approved",
        rita,
        "confirmed with the user",
    )
    body = client.get(url).content.decode()
    assert "approved</span>" in body and "<strong>rita</strong>" in body
    assert (
        "review fold 3" in body and "<code>review.approve</code> by <strong>rita</strong>" in body
    )
    assert "Retirement of" in body and "approved; review fold 3 recorded." in body
    facts = client.get(
        reverse("ledger:facts", args=["acme", "perm", "main", "main"]),
        {"q": "pin:true lifecycle:retired"},
    )
    assert "Always ask before changing file permissions." in facts.content.decode()
    assert (
        client.get(reverse("ledger:reviews"))
        .content.decode()
        .count("/ledger/reviews/" + str(pending.pk))
        == 0
    )
    assert (
        str(pending.pk)
        in client.get(reverse("ledger:reviews"), {"status": "approved"}).content.decode()
    )


def test_a_reviewer_refuses_over_htmx_and_needs_a_comment(client, acme, pending):
    client.force_login(_member(acme, "rita", "reviewer"))
    url = reverse("ledger:review", args=[pending.pk])
    response = client.post(url, {"decision": "refuse", "comment": ""})
    assert response.status_code == 400
    assert "a decision needs a comment saying why" in response.content.decode()
    response = client.post(
        url, {"decision": "refuse", "comment": "still applies"}, HTTP_HX_REQUEST="true"
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<section id="review-decision"')
    assert "refused</span>" in body and "still applies" in body
    again = client.post(url, {"decision": "approve", "comment": "changed my mind"})
    assert again.status_code == 409 and "already refused" in again.content.decode()  # as the API


def test_review_posts_need_a_csrf_token(acme, pending):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(_member(acme, "rita", "reviewer"))
    url = reverse("ledger:review", args=[pending.pk])
    assert client.post(url, {"decision": "approve", "comment": "x"}).status_code == 403
    pending.refresh_from_db()
    assert pending.status == "pending"
    page = client.get(url).content.decode()
    token = page.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
    response = client.post(
        url, {"decision": "approve", "comment": "x", "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302


def test_the_queue_explains_itself_when_empty(client, member):
    client.force_login(member)
    body = client.get(reverse("ledger:reviews")).content.decode()
    assert "Nothing awaits review" in body


# Export -----------------------------------------------------------------------------------


def test_an_export_needs_the_raw_read_role_and_a_refusal_is_logged(client, member, folded):
    from audit_app.models import AuditEvent

    client.force_login(member)  # an operator: bodies are the stored, unfiltered bytes
    response = client.get(reverse("ledger:export", args=["acme", "refunds"]))
    assert response.status_code == 403
    assert AuditEvent.objects.filter(action="session.export_raw.denied").count() == 1
    assert not AuditEvent.objects.filter(action="session.export").exists()


def test_it_exports_the_session_and_logs_the_digest(client, acme, folded):
    import hashlib

    from audit_app.models import AuditEvent

    member = MembershipFactory(
        tenant=acme, user=UserFactory(username="ada"), role=Membership.Role.ADMIN
    ).user
    client.force_login(member)
    response = client.get(reverse("ledger:export", args=["acme", "refunds"]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    assert 'attachment; filename="refunds.jsonl"' in response["Content-Disposition"]
    data = b"".join(response.streaming_content)
    event = AuditEvent.objects.get(action="session.export")
    assert event.actor == member and event.object_id == "acme/refunds"
    head = data[: data.rstrip(b"\n").rfind(b"\n") + 1]
    assert event.details["sha256"] == hashlib.sha256(head).hexdigest()
    assert event.details["entries"] == 11 and event.details["folds"] == 1
