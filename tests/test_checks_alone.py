"""Each check held by a test of its own (a mutation of it fails here, whatever else passes):
the journal's parent link, pairing inside a parallel block, the reducer's refold ``withdraw``
rule, the auto-fold threshold's boundary, and the settings defaults production reads."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.db import connection

from journal_app.chain import figures_hash, prepare_entries
from journal_app.formats.base import message
from journal_app.models import Entry, Journal
from journal_app.services import journal_append, journal_verify
from ledger_app import reducer
from ledger_app.models import Fold
from ledger_app.validation import validate_request
from tests.factories import TenantFactory, journal_build
from tests.ledger_app.test_validation import parallel_anthropic, parallel_openai


def _sql(sql: str, params: list) -> None:
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("SET session_replication_role = replica")
        try:
            cur.execute(sql, params)
        finally:
            if connection.vendor == "postgresql":
                cur.execute("SET session_replication_role = DEFAULT")


@pytest.mark.django_db
def test_an_entry_replaced_by_another_valid_one_is_caught_by_the_parent_link_alone():
    journal = journal_build(
        tenant=TenantFactory(slug="acme"),
        items=[message("user", "one"), message("assistant", "two"), message("user", "three")],
    )
    first = Entry.objects.get(journal=journal, seq=1)
    old = Entry.objects.get(journal=journal, seq=2)
    # a different entry at seq 2, hashed and chained to seq 1 exactly as an append would
    [forged] = prepare_entries(
        scope=journal.scope_fields(),
        start_seq=2,
        parent_hash=first.entry_hash,
        items=[message("assistant", "two, but forged")],
        chunk_bytes=journal.chunk_bytes,
    )
    _sql(
        "UPDATE journal_app_entry SET body = %s, body_hash = %s, byte_length = %s, meta = %s, "
        "meta_hash = %s, entry_hash = %s, figures_hash = %s, token_count = %s WHERE id = %s",
        [
            forged.body,
            forged.body_hash,
            forged.byte_length,
            forged.meta,
            forged.meta_hash,
            forged.entry_hash,
            figures_hash(
                entry_hash=forged.entry_hash,
                token_count=forged.token_count,
                token_source=old.token_source,
                source_ref=old.source_ref,
                artifact=None,
            ),
            forged.token_count,
            old.pk,
        ],
    )
    _sql("DELETE FROM journal_app_chunk WHERE entry_id = %s", [old.pk])
    for c in forged.chunks:
        _sql(
            'INSERT INTO journal_app_chunk (entry_id, position, "offset", length, hash) '
            "VALUES (%s, %s, %s, %s, %s)",
            [old.pk, c.position, c.offset, c.length, c.hash],
        )
    report = journal_verify(journals=[Journal.objects.get(pk=journal.pk)])
    # seq 2 is a valid entry on its own; only seq 3's link to it tells
    assert report.first_failure["seq"] == 3, report.first_failure
    assert report.first_failure["problems"] == [
        f"parent_hash: stored {old.entry_hash}, previous entry is {forged.entry_hash}"
    ]


def test_a_wrong_id_result_inside_a_parallel_openai_block_is_named():
    messages = parallel_openai()
    messages[3]["tool_call_id"] = "call_9"  # call_2's result answers a call that was not made
    report = validate_request(messages)
    assert not report.ok
    found = {(p.check, p.ref) for p in report.problems}
    assert ("orphan_tool_call", "call_2") in found, report.problems
    assert any(p.ref == "call_9" for p in report.problems), report.problems


def test_a_wrong_id_result_inside_a_parallel_anthropic_block_is_named():
    request = parallel_anthropic()
    request["messages"][2]["content"][1]["tool_use_id"] = "toolu_9"
    report = validate_request(request)
    assert not report.ok
    found = {(p.check, p.ref) for p in report.problems}
    assert ("orphan_tool_call", "toolu_2") in found, report.problems
    assert any(p.ref == "toolu_9" for p in report.problems), report.problems


def _state_with_fact(origin_fold: int) -> dict:
    fact = {
        "id": "claim:x",
        "category": "verified_state",
        "priority": "P2",
        "lifecycle": "active",
        "confidence": "reported",
        "text": "tests pass",
        "support": [{"entry": "a" * 64}],
        "origin_fold": origin_fold,
    }
    return {"folds": 3, "facts": {"claim:x": fact}}


@pytest.mark.parametrize(
    ("refold_of", "status"), [(None, "rejected"), (1, "rejected"), (2, "accepted")]
)
def test_only_a_refold_of_its_origin_fold_withdraws_a_fact(refold_of, status):
    delta = {"fold": 4, "evidence": {}, "ops": [{"op": "withdraw", "id": "claim:x"}]}
    if refold_of is not None:
        delta["refold_of"] = refold_of
    reduction = reducer.apply_delta(_state_with_fact(origin_fold=2), delta)
    [result] = reduction.results
    assert result.status == status, result
    lifecycle = reduction.state["facts"]["claim:x"]["lifecycle"]
    assert lifecycle == ("superseded" if status == "accepted" else "active")


@pytest.mark.django_db
@pytest.mark.parametrize(("over", "folds"), [(-1, False), (0, True), (1, True)])
def test_the_auto_fold_runs_at_the_threshold_not_before(
    settings, django_capture_on_commit_callbacks, over, folds
):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9
    journal = journal_build(tenant=TenantFactory(slug="acme"), items=[message("user", "hello")])
    item = message("assistant", "world")
    # the unfolded count after the next append: this journal's entry plus the new one's
    total = (
        Journal.objects.get(pk=journal.pk).unfolded_tokens
        + prepare_entries(
            scope=journal.scope_fields(),
            start_seq=2,
            parent_hash="",
            items=[item],
            chunk_bytes=4096,
        )[0].token_count
    )
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = total - over
    with django_capture_on_commit_callbacks(execute=True):
        journal_append(journal=journal, items=[item])
    assert Journal.objects.get(pk=journal.pk).unfolded_tokens in (total, 0)
    assert Fold.objects.filter(journal=journal).exists() is folds


def test_the_settings_defaults_are_the_design_figures():
    # ``django.conf.settings``: the object production code reads (tests that change a
    # figure do so per test through pytest-django's ``settings`` fixture)
    assert django_settings.LEDGER_WINDOW_TOKENS == 270_000
    assert django_settings.LEDGER_CONSOLIDATE_AT_TOKENS == 67_500
    assert django_settings.LEDGER_CHECKPOINT_TARGET_TOKENS == 20_000
    assert django_settings.LEDGER_FOLD_THRESHOLD_TOKENS == 32_000
    assert django_settings.ARTIFACT_THRESHOLD_TOKENS == 2000
    assert django_settings.PIN_ATTACHMENT_TOKENS == 1000
    assert django_settings.JOURNAL_CHUNK_BYTES == 4096


def test_a_killed_workers_fold_is_redelivered_within_minutes_not_redis_hour():
    from config.celery import app

    assert app.conf.broker_transport_options["visibility_timeout"] == 300
