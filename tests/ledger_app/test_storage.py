"""Deltas, checkpoints, fact rows, the term index and their verification."""

import importlib
import json

import pytest
from django.apps import apps
from django.db import connection

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Entry, EntryIdentifiers
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app import reducer, selectors
from ledger_app.models import Fold, LedgerFact, LedgerTerm
from ledger_app.selectors import presenters
from ledger_app.services import ledger_fold, ledger_state, ledger_verify

pytestmark = pytest.mark.django_db


def _journal():
    t = tenant_ensure(slug="acme")
    return journal_ensure(session=session_ensure(tenant=t, key="s1"))


def _round(n):
    return [
        message("user", f"Step {n}: run the tests in billing/step_{n}.py please."),
        tool_call(f"c{n}", "exec", {"command": f"pytest billing/step_{n}.py"}),
        tool_result(f"c{n}", f"{n} passed in 0.5s", exit_code=0),
    ]


def _folds(j, n, settings, every=2):
    settings.LEDGER_CHECKPOINT_EVERY_FOLDS = every
    settings.LEDGER_CHECKPOINT_DELTA_RATIO = 1000.0
    for i in range(1, n + 1):
        journal_append(journal=j, items=_round(i))
        assert ledger_fold(journal=j, recover=False).created


def test_only_checkpoints_store_the_state_and_any_state_is_rebuilt(settings):
    j = _journal()
    _folds(j, 5, settings)
    folds = list(Fold.objects.filter(journal=j).order_by("number"))
    assert [f.state is not None for f in folds] == [True, False, True, False, True]
    deltas = []
    for f in folds:
        delta = f.delta_dict
        delta.pop("verdicts")
        deltas.append(delta)
        replayed = reducer.reduce(None, deltas)
        assert reducer.state_bytes(Fold.objects.state_after(f)) == reducer.state_bytes(replayed)
        assert reducer.state_hash(replayed) == f.state_hash
    report = ledger_verify(journal=j)
    assert report.ok, report.mismatch
    assert report.folds == 5 and report.checkpoints == 3 and "fact rows" in report.checks


def test_fact_rows_hold_the_current_facts_and_each_facts_history(settings):
    j = _journal()
    _folds(j, 2, settings)
    state = ledger_state(j)
    current = dict(
        LedgerFact.objects.filter(journal=j, until__isnull=True).values_list("fact_id", "data")
    )
    assert current == {k: reducer.state_bytes(v).decode() for k, v in state["facts"].items()}
    pins = [f for f in state["facts"].values() if f.get("pin")]
    assert len(pins) == 2
    history = selectors.fact_history(j, pins[0]["id"])
    assert [(h.since, h.until, h.change) for h in history] == [(1, None, "born")]


def test_selectors_read_facts_at_any_fold_like_the_whole_state(settings):
    j = _journal()
    _folds(j, 3, settings)
    for fold in Fold.objects.filter(journal=j):
        state = Fold.objects.state_after(fold)
        for chosen, q in (({}, ""), ({"priority": "P0"}, ""), ({}, "pin:true")):
            want = presenters.facts_select(state, chosen=chosen, q=q)
            got = selectors.facts_at(j, fold, chosen=chosen, q=q)
            assert got.total == want.total == len(state["facts"])
            assert list(got.shown) == want.shown and len(got.shown) == len(want.shown)
        some = next(iter(state["facts"]))
        assert selectors.fact_at(j, fold, some) == state["facts"][some]
    first = Fold.objects.get(journal=j, number=1)
    assert selectors.facts_at(j, first, chosen={}).total < ledger_verify(journal=j).folds + 10
    assert selectors.fact_at(j, first, f"pin:{'0' * 16}") is None


def test_verify_finds_a_changed_delta_fact_row_or_checkpoint(settings):
    j = _journal()
    _folds(j, 3, settings)
    assert ledger_verify(journal=j).ok
    row = LedgerFact.objects.filter(journal=j, until__isnull=True).first()
    LedgerFact.objects.filter(pk=row.pk).update(data=row.data.replace('"P', '"Q', 1))
    report = ledger_verify(journal=j)
    assert not report.ok and report.mismatch["check"] == "fact rows"
    LedgerFact.objects.filter(pk=row.pk).update(data=row.data)
    third = Fold.objects.get(journal=j, number=3)
    Fold.objects.filter(pk=third.pk).update(state=third.state.replace("passed", "failed", 1))
    report = ledger_verify(journal=j)
    assert not report.ok and report.mismatch == {
        **report.mismatch,
        "fold": 3,
        "check": "checkpoint",
    }


def test_identifiers_are_stored_at_append_and_read_by_the_loss_report(
    settings, django_capture_on_commit_callbacks
):
    j = _journal()
    with django_capture_on_commit_callbacks(execute=True):  # derived after commit
        journal_append(journal=j, items=_round(1))
    call = Entry.objects.get(journal=j, seq=2)
    stored = EntryIdentifiers.objects.get(entry=call).values
    assert ["command", "pytest billing/step_1.py"] in stored
    assert ["path", "billing/step_1.py"] in stored
    # the fold reads the stored row, the writer's "mentions" and the loss report alike: a
    # row naming something else is what the fact lists and what the report counts
    with connection.cursor() as cur:  # the row is insert-only: tamper below the model
        cur.execute(
            'UPDATE journal_app_entryidentifiers SET "values" = %s WHERE entry_id = %s',
            ['[["path", "nowhere/else.py"]]', call.pk],
        )
    fold = ledger_fold(journal=j, recover=False).fold
    texts = LedgerFact.objects.filter(journal=j, until__isnull=True).values_list("text", flat=True)
    assert any("mentions: nowhere/else.py" in t for t in texts), list(texts)
    lost = {i["value"] for i in fold.manifest["loss"]["lost"]}
    assert "nowhere/else.py" not in lost and "pytest billing/step_1.py" not in lost


def test_the_term_index_counts_identifiers_of_active_facts(settings):
    j = _journal()
    _folds(j, 2, settings)
    terms = {t.term: t.facts for t in LedgerTerm.objects.filter(journal=j)}
    assert terms and all(n > 0 for n in terms.values())
    # an identifier of fold 1 that an active fact still holds counts as kept in fold 2
    loss = Fold.objects.get(journal=j, number=2).manifest["loss"]
    assert loss["kept"] >= 1


def test_the_data_migration_turns_full_states_into_deltas_checkpoints_and_rows(settings):
    """Migration 0008 on ledgers written the old way (a full state at every fold)."""
    j = _journal()
    _folds(j, 4, settings)
    old = {}
    for f in Fold.objects.filter(journal=j):
        text = reducer.state_bytes(Fold.objects.state_after(f)).decode()
        old[f.pk] = text
        Fold.objects.filter(pk=f.pk).update(state=text, state_hash="0" * 64, state_acc="")
    LedgerFact.objects.filter(journal=j).delete()
    LedgerTerm.objects.filter(journal=j).delete()
    settings.LEDGER_CHECKPOINT_EVERY_FOLDS = 3
    migration = importlib.import_module("ledger_app.migrations.0008_fill_fact_rows")
    migration._journal(apps, j.pk)
    # then 0015 (h26) seals the rewritten folds, as the migration chain runs it
    importlib.import_module("ledger_app.migrations.0015_fill_fold_record_hash_h26").forwards(
        apps, None
    )
    folds = list(Fold.objects.filter(journal=j).order_by("number"))
    assert [f.state is not None for f in folds] == [True, False, False, True]
    for f in folds:
        assert f.state_hash == reducer.state_hash(json.loads(old[f.pk]))
    report = ledger_verify(journal=j)
    assert report.ok, report.mismatch
    assert LedgerTerm.objects.filter(journal=j).exists()


def test_a_fold_reads_no_whole_state(settings, django_assert_max_num_queries):
    """The fold's queries do not read Fold.state (only the checkpoint policy's length)."""
    j = _journal()
    _folds(j, 2, settings, every=100)
    journal_append(journal=j, items=_round(3))
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        ledger_fold(journal=j, recover=False)
    reads = [q["sql"] for q in ctx.captured_queries if q["sql"].startswith("SELECT")]
    whole = [s for s in reads if '"ledger_app_fold"."state",' in s or '"state" FROM' in s]
    assert not whole, whole
