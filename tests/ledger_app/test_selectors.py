"""The ledger's read layer: a filter expression over the fact rows selects what
the Python matcher selects over the whole state, with its exact terms in SQL."""

import pytest

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Entry
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app import selectors
from ledger_app.models import Fold
from ledger_app.selectors import FactsQuery, ledger_facts, presenters
from ledger_app.services import ledger_fold

pytestmark = pytest.mark.django_db

EXPRESSIONS = [
    "pin:true",
    "-pin:true",
    "-pin:true text:pytest",
    "text:PYTEST -text:step_2",
    "text:étape",
    "-text:ÉTAPE",
    "category:open_obligation,blocker",
    "-priority:P0",
    "lifecycle:active -confidence:verified",
    "fold:>1",
    "-fold:2",
    "fold:1..2 -pin:true",
    "author:code",
    "-author:code text:step",
    "quote:pytest",
    "id:pin",
    "pending:false",
    "text:nothing-matches-this",
    "text:100%_",
]


def _journal_with_folds():
    t = tenant_ensure(slug="acme")
    j = journal_ensure(session=session_ensure(tenant=t, key="s1"))
    for n in range(1, 4):
        journal_append(
            journal=j,
            items=[
                message("user", f"Étape {n}: run the tests in billing/step_{n}.py please."),
                tool_call(f"c{n}", "exec", {"command": f"pytest billing/step_{n}.py"}),
                tool_result(f"c{n}", f"{n} passed in 0.5s, 100%_ done", exit_code=n % 2),
            ],
        )
        assert ledger_fold(journal=j, recover=False).created
    return j


def test_a_filter_expression_selects_what_the_matcher_selects_over_the_state():
    j = _journal_with_folds()
    for fold in Fold.objects.filter(journal=j):
        state = Fold.objects.state_after(fold)
        cited = Entry.objects.filter(journal=j, kind="tool_result").values_list(
            "entry_hash", flat=True
        )
        for q in [*EXPRESSIONS, f"support:{cited[0][:6]}", f"-support:{cited[1][:8]}"]:
            for chosen in ({}, {"priority": "P0"}):
                want = presenters.facts_select(state, chosen=chosen, q=q)
                got = selectors.facts_at(j, fold, chosen=chosen, q=q)
                assert got.error is None and got.total == want.total, q
                assert list(got.shown) == want.shown, (fold.number, q, chosen)
                assert len(got.shown) == len(want.shown), q
                assert list(got.shown[:2]) == want.shown[:2], q
    latest = Fold.objects.filter(journal=j).latest("number")
    assert selectors.facts_at(j, latest, chosen={}, q="text:étape").shown  # not vacuous


def test_a_bad_expression_selects_nothing_and_says_why():
    j = _journal_with_folds()
    latest = Fold.objects.filter(journal=j).latest("number")
    got = selectors.facts_at(j, latest, chosen={}, q="colour:red")
    assert got.error is not None and list(got.shown) == [] and got.total > 0


def test_exact_terms_stay_a_lazy_query_of_one_count_and_one_page(django_assert_num_queries):
    j = _journal_with_folds()
    latest = Fold.objects.filter(journal=j).latest("number")
    with django_assert_num_queries(0):  # the total is the fold's recorded figure
        got = selectors.facts_at(
            j, latest, chosen={}, q="-pin:true fold:>1 category:verified_state,history"
        )
    assert isinstance(got.shown, FactsQuery)
    with django_assert_num_queries(2):  # the matched count and one page
        len(got.shown)
        got.shown[:100]


def test_text_and_json_terms_read_the_narrowed_rows_in_one_query(django_assert_num_queries):
    j = _journal_with_folds()
    latest = Fold.objects.filter(journal=j).latest("number")
    for q in ("-pin:true text:pytest", "author:code quote:pytest"):
        with django_assert_num_queries(1):  # the rows SQL leaves (the total is recorded)
            got = selectors.facts_at(j, latest, chosen={}, q=q)
        with django_assert_num_queries(0):
            len(got.shown)
            list(got.shown[:100])


def test_a_fold_with_few_facts_is_sorted_to_the_same_order_as_the_index_walk(monkeypatch):
    # issue 18: a fold holding few of the journal's fact rows sorts them (PostgreSQL:
    # "C" on both keys, which the display-order index cannot serve); the order must be the
    # index walk's
    j = _journal_with_folds()
    for fold in Fold.objects.filter(journal=j).order_by("number"):
        monkeypatch.setattr(ledger_facts, "SORT_AT_MOST", 10**9)
        few = [f["id"] for f in selectors.facts_at(j, fold, chosen={}).shown[:100]]
        monkeypatch.setattr(ledger_facts, "SORT_AT_MOST", -1)
        walk = [f["id"] for f in selectors.facts_at(j, fold, chosen={}).shown[:100]]
        assert few == walk and few


def test_reading_a_fold_for_a_page_leaves_its_checkpoint_state_unread():
    # a checkpoint's state is the whole ledger (megabytes at 100k facts: 0.9 s to read)
    j = _journal_with_folds()
    number = Fold.objects.filter(journal=j, state__isnull=False).values_list("number", flat=True)[0]
    for fold in (selectors.fold_get(j, number), selectors.fold_at(j, None)):
        assert "state" in fold.get_deferred_fields()
