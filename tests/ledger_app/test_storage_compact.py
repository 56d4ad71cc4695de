"""What the ledger stores once: a proposal's ops by reference to its fold's delta, the term
index's 64-bit keys (bench/README.md, ``storage``)."""

import hashlib
import importlib
import json

import pytest
from django.apps import apps
from django.db import connection, migrations

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app.budget import render_fact
from ledger_app.export import _attempt_records
from ledger_app.loss import ledger_terms
from ledger_app.models import Fold, LedgerFact, LedgerTerm, Proposal, Verdict
from ledger_app.ops_refs import ItemRefs, op_item, ops_refer, ops_resolve
from ledger_app.services import ledger_fold, ledger_verify
from ledger_app.services.records import fold_record
from ledger_app.services.store import term_id

MIGRATION_0018 = importlib.import_module("ledger_app.migrations.0018_compact_storage")
MIGRATION_0019 = importlib.import_module("ledger_app.migrations.0019_proposal_ops_by_reference")
MIGRATION_0021 = importlib.import_module("ledger_app.migrations.0021_verdict_item_by_reference")

A = {"op": "add", "fact": {"id": "a", "text": "one", "n": 1}}
B = {"op": "add", "fact": {"id": "b", "text": "two"}}
C = {"op": "close", "fact_id": "a", "evidence": ["x"]}


# -- pure ---------------------------------------------------------------------------------------


def test_ops_equal_to_the_delta_refer_to_all_of_it():
    assert ops_refer([A, B], [A, B]) == (0, 2)
    assert ops_resolve([], 0, 2, [A, B]) == [A, B]


def test_ops_after_the_pins_refer_to_their_run():
    assert ops_refer([B, C], [A, B, C]) == (1, 2)
    assert ops_resolve([], 1, 2, [A, B, C]) == [B, C]


def test_ops_not_in_the_delta_as_written_are_not_referred_to():
    assert ops_refer([C, B], [A, B, C]) is None  # not contiguous in this order
    assert ops_refer([], [A]) is None  # an empty list is stored as it is
    assert ops_refer([A, B, C], [A, B]) is None
    # 1.0 is not 1: a reader would get a different value back
    a_float = {"op": "add", "fact": {"id": "a", "text": "one", "n": 1.0}}
    assert ops_refer([a_float], [A]) is None
    # key order is not a difference (a JSON object has none)
    assert ops_refer([{"fact": A["fact"], "op": "add"}], [A]) == (0, 1)
    assert ops_resolve([C], None, 0, [A]) == [C]


def test_a_term_id_is_the_first_8_bytes_of_the_keys_sha256_as_migration_0018_converts_them():
    for key in ("src/app.py", "pytest billing/step_1.py", "é", ""):
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
        assert term_id(key) == MIGRATION_0018._signed(digest)
        assert -(2**63) <= term_id(key) < 2**63
    assert term_id("src/app.py") != term_id("src/app.pyc")


# -- stored -------------------------------------------------------------------------------------


def _journal():
    t = tenant_ensure(slug="acme")
    return journal_ensure(session=session_ensure(tenant=t, key="s1"))


def _round(n):
    return [
        message("user", f"Step {n}: run the tests in billing/step_{n}.py please."),
        tool_call(f"c{n}", "exec", {"command": f"pytest billing/step_{n}.py"}),
        tool_result(f"c{n}", f"{n} passed in 0.5s", exit_code=0),
    ]


def _folds(j, n):
    for i in range(1, n + 1):
        journal_append(journal=j, items=_round(i))
        assert ledger_fold(journal=j, recover=False).created


def _ops_column(proposal_id):
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT {Proposal._meta.get_field('stored_ops').column} FROM "
            f"{Proposal._meta.db_table} WHERE id = %s",
            [proposal_id],
        )
        raw = cur.fetchone()[0]
    return raw if isinstance(raw, str) else json.dumps(raw)


@pytest.mark.django_db
def test_a_proposal_whose_ops_stood_stores_no_second_copy_of_them():
    j = _journal()
    _folds(j, 2)
    for fold in Fold.objects.filter(journal=j):
        delta_ops = fold.delta_dict["ops"]
        proposals = list(Proposal.objects.filter(attempt__fold=fold))
        assert proposals
        for p in proposals:
            assert p.ops_from is not None and p.ops_count > 0
            assert json.loads(_ops_column(p.pk)) == []  # the size: no copy in the row
            assert p.ops == delta_ops[p.ops_from : p.ops_from + p.ops_count]
            assert p.ops and all(op in delta_ops for op in p.ops)
    assert ledger_verify(journal=j).ok


@pytest.mark.django_db
def test_the_migration_copies_the_ops_back_and_seals_the_folds_again():
    """Backwards: every referred ops list becomes a copy, the records lose their references
    (so the folds are sealed again) and verify; readers and the export see the same values.
    Forwards leaves existing rows copies: converting them would change sealed records."""
    j = _journal()
    _folds(j, 2)
    before = {p.pk: p.ops for p in Proposal.objects.all()}
    sealed = dict(Fold.objects.values_list("pk", "record_hash"))
    numbers = dict(Fold.objects.values_list("pk", "number"))
    export = list(_attempt_records(j, numbers))
    MIGRATION_0019.backwards(apps, None)
    copied = list(Proposal.objects.all())
    assert all(p.ops_from is None and p.stored_ops == before[p.pk] for p in copied)
    assert all(
        "ops_ref" not in p
        for f in sealed
        for a in fold_record(f)["attempts"]
        for p in a["proposals"]
    )
    resealed = dict(Fold.objects.values_list("pk", "record_hash"))
    assert resealed.keys() == sealed.keys() and all(resealed[k] != sealed[k] for k in sealed)
    assert ledger_verify(journal=j).ok
    assert MIGRATION_0019.Migration.operations[-1].code is migrations.RunPython.noop
    assert list(_attempt_records(j, numbers)) == export
    assert any(p["ops"] for a in export for p in a["proposals"])


def _set(model, pk, column, value):
    """Change one stored column below the application, as a database user could."""
    with connection.cursor() as cur:
        cur.execute(f'UPDATE {model._meta.db_table} SET "{column}" = %s WHERE id = %s', [value, pk])


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("column", "value"),
    [("ops", json.dumps(["tampered"])), ("ops_from", 0), ("ops_count", 99)],
)
def test_a_changed_reference_column_of_a_proposal_fails_verify(column, value):
    j = _journal()
    _folds(j, 2)
    p = Proposal.objects.filter(ops_from__gt=0).order_by("pk").first()
    assert p is not None
    _set(Proposal, p.pk, column, value)
    result = ledger_verify(journal=j)
    assert not result.ok
    assert "record_hash" in json.dumps(result.mismatch, default=str)


@pytest.mark.django_db
def test_a_changed_count_on_a_copy_fails_verify():
    """A copy (no reference) given a count would read the same ops: the count is recorded."""
    j = _journal()
    _folds(j, 1)
    _set(Proposal, Proposal.objects.order_by("pk").first().pk, "ops_count", 3)
    Proposal.objects.filter(ops_from__isnull=False).update(ops_from=None)  # every row a copy
    assert not ledger_verify(journal=j).ok


@pytest.mark.django_db
def test_an_unreadable_delta_is_a_mismatch_not_a_crash():
    j = _journal()
    _folds(j, 2)
    fold = Fold.objects.filter(journal=j).order_by("number").first()
    _set(Fold, fold.pk, "delta", "{not json")
    assert fold_record(fold.pk)["attempts"]  # no JSONDecodeError: the ops read as none
    assert not ledger_verify(journal=j).ok


@pytest.mark.django_db
def test_the_term_index_keys_are_64_bit_ids_of_the_active_facts_terms():
    j = _journal()
    _folds(j, 2)
    want = {}
    for data in LedgerFact.objects.filter(
        journal=j, until__isnull=True, lifecycle="active"
    ).values_list("data", flat=True):
        for key in ledger_terms(render_fact(json.loads(data))):
            want[term_id(key)] = want.get(term_id(key), 0) + 1
    stored = dict(LedgerTerm.objects.filter(journal=j).values_list("term", "facts"))
    assert stored == want and stored


@pytest.mark.django_db
def test_migration_0018_converts_hex_terms_to_the_same_ids():
    j = _journal()
    _folds(j, 1)
    stored = dict(LedgerTerm.objects.filter(journal=j).values_list("term", "facts"))
    # the former rows' first 16 hex digits are the 8 bytes the id is made of
    for term in stored:
        hex16 = f"{term & 0xFFFFFFFFFFFFFFFF:016x}"
        assert MIGRATION_0018._signed(hex16 + "0" * 48) == term


# -- verdicts -----------------------------------------------------------------------------------


def test_a_verdict_names_the_op_whose_text_and_support_it_holds():
    refs = ItemRefs(
        [
            A,
            {
                "op": "add",
                "fact": {
                    "id": "b",
                    "text": "two",
                    "support": [{"entry": "h1", "quote": "q"}, {"entry": "h2"}],
                },
            },
            C,
        ]
    )
    assert refs.find("two", ["h1", "h2"]) == 1
    assert refs.find("close ", ["x"]) == 2  # an op without a fact: "<op> <id>" and evidence
    assert op_item(C) == ("close ", ["x"])
    assert refs.find("two", ["h2", "h1"]) is None  # order is part of the value
    assert refs.find("two (edited)", ["h1", "h2"]) is None
    assert refs.find("two", None) is None


def _verdict_column(verdict_id):
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT claim, support FROM {Verdict._meta.db_table} WHERE id = %s", [verdict_id]
        )
        claim, support = cur.fetchone()
    return claim, (json.loads(support) if isinstance(support, str) else support)


@pytest.mark.django_db
def test_verdicts_on_items_that_stood_store_no_copy_and_read_the_same_after_the_migration():
    j = _journal()
    _folds(j, 2)
    referred = list(Verdict.objects.filter(op_at__isnull=False))
    assert referred
    for v in referred:
        assert _verdict_column(v.pk) == ("", [])  # the size: no copy in the row
        assert v.claim and v.support
        assert (v.claim, v.support) == op_item(v.proposal.ops[v.op_at])
    before = {v.pk: (v.claim, v.support) for v in Verdict.objects.all()}
    sealed = dict(Fold.objects.values_list("pk", "record_hash"))
    numbers = dict(Fold.objects.values_list("pk", "number"))
    export = list(_attempt_records(j, numbers))
    MIGRATION_0021.backwards(apps, None)
    assert not Verdict.objects.filter(op_at__isnull=False).exists()
    assert {v.pk: (v.stored_claim, v.stored_support) for v in Verdict.objects.all()} == before
    assert dict(Fold.objects.values_list("pk", "record_hash")) != sealed  # sealed again
    assert list(_attempt_records(j, numbers)) == export
    assert ledger_verify(journal=j).ok
    assert MIGRATION_0021.Migration.operations[-1].code is migrations.RunPython.noop


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("column", "value"), [("claim", "tampered"), ("support", json.dumps(["x"])), ("op_at", 0)]
)
def test_a_changed_reference_column_of_a_verdict_fails_verify(column, value):
    j = _journal()
    _folds(j, 2)
    v = (
        Verdict.objects.filter(op_at__gt=0).order_by("pk").first()
        or Verdict.objects.filter(op_at__isnull=False).order_by("pk").first()
    )
    assert v is not None
    if column == "op_at" and v.op_at == 0:
        value = 1
    _set(Verdict, v.pk, column, value)
    assert not ledger_verify(journal=j).ok


@pytest.mark.django_db
def test_setting_a_referred_claim_keeps_the_support_it_read():
    j = _journal()
    _folds(j, 1)
    v = Verdict.objects.filter(op_at__isnull=False).first()
    support = v.support
    v.claim = "edited"
    assert v.op_at is None and v.claim == "edited" and v.support == support
