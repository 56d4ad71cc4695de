"""Recovery attempts end to end: the migration case, not triggered, denied, tampered, budgets."""

from __future__ import annotations

import dataclasses

import pytest

from journal_app.formats.base import ParsedEntry, message
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app.models import Fold
from ledger_app.services import ledger_fold, ledger_state, ledger_verify
from recovery_app.citations import json_fragment
from recovery_app.models import Receipt
from recovery_app.services import recovery_budget, recovery_run
from tests.recovery_app.conftest import (
    DOUBT,
    MIGRATE,
    StubModel,
    build_migration_case,
    entry,
    filler,
    raw_update,
)

pytestmark = pytest.mark.django_db


def _active_texts(journal):
    return [
        f["text"] for f in ledger_state(journal)["facts"].values() if f["lifecycle"] == "active"
    ]


def test_the_migration_flag_returns_to_the_ledger_with_a_pointer_to_its_entry(no_model):
    case = build_migration_case()
    j = case.journal
    assert not any("--fake" in t for t in _active_texts(j)), "the ledger left the flag out"

    out = ledger_fold(journal=j, recovery_options={"model": None})
    r = out.receipt

    # the trigger fired on the user's message naming the migration and doubting it
    assert r.outcome == Receipt.Outcome.RECOVERED
    assert r.trigger["fired"] and r.trigger["trigger_seqs"] == [case.trigger.seq]
    assert "0042_add_refund_index" in r.trigger["terms"]
    assert {"seq": case.trigger.seq, "phrase": "may have been"} in r.trigger["phrases"]
    # the snapshot is frozen to this scope at the revision of the fold
    assert r.snapshot["frozen"] is True
    assert r.snapshot["scope"] == "acme/mig/main/main"
    assert r.snapshot["revision"] == j.head_seq
    assert r.snapshot["head_hash"] == entry(j, j.head_seq).entry_hash
    # search found the entry where the migration ran; the question itself is never a lead
    first = r.queries[0]
    assert first["query"] == '"0042 add refund index"'
    lead_seqs = [x["seq"] for x in first["leads"]]
    assert case.call.seq in lead_seqs and case.trigger.seq not in lead_seqs
    # the read verified every check
    read = next(x for x in r.reads if x["entry"] == case.call.entry_hash)
    assert read["ok"] is True and all(read["checks"].values())
    assert set(read["checks"]) >= {
        "scope",
        "seq",
        "entry_hash",
        "body_hash",
        "byte_length",
        "chunks",
    }
    assert case.call.entry_hash in [s["entry"] for s in r.sources]
    # the claim quotes the command, flag included, from a hash-verified byte range
    claim = next(c for c in r.claims if c["citations"][0]["entry"] == case.call.entry_hash)
    assert claim["status"] == "current"
    cite = claim["citations"][0]
    assert cite["quote"] == MIGRATE
    assert (
        json_fragment(cite["quote"]) in case.call.body.encode()[cite["range"][0] : cite["range"][1]]
    )

    # the rules accepted it and the flag is back, citing the raw entry
    fold = out.fold
    assert out.created and fold.number == 3
    assert r.entered_fold_id == fold.pk
    fact = ledger_state(j)["facts"][f"recovered:{case.call.entry_hash[:16]}"]
    assert "--fake" in fact["text"] and fact["author"] == "recovery"
    assert fact["support"][0] == {
        "entry": case.call.entry_hash,
        "quote": MIGRATE,
        "range": cite["range"],
    }
    assert fact["confidence"] == "verified"  # the successful tool result is cited too
    assert case.result.entry_hash in [s["entry"] for s in fact["support"]]
    verdict = next(v for v in r.verdicts if v["fact_id"] == fact["id"])
    assert verdict["status"] == "accepted"
    assert fold.delta_dict["evidence"][case.call.entry_hash]["fold"] == 1  # pointer resolves
    assert ledger_verify(journal=j).ok
    # and the receipt accounts for all of it
    assert r.usage["searches"] >= 1 and r.usage["reads"] == len(r.reads)
    assert r.tokens == sum(x["tokens"] for x in r.reads)
    assert r.model_requests == 0 and r.analyst == "lexical"


def test_a_recovered_fact_the_rules_reject_stays_out_of_the_ledger():
    case = build_migration_case()
    # an assistant message is all that can be found: a "verified" fact citing it is refused
    r = recovery_run(journal=case.journal, query="0042_add_refund_index", model=None)
    bad = dict(r.recovered[0])
    bad["fact"] = {**bad["fact"], "id": "recovered:forged", "confidence": "verified"}
    bad["fact"]["support"] = [{"entry": entry(case.journal, 3).entry_hash, "quote": "Applying"}]
    Receipt.objects.filter(pk=r.pk).update(recovered=[bad])
    out = ledger_fold(journal=case.journal, recovery_options={"model": None})
    r.refresh_from_db()
    assert r.entered_fold_id == out.fold.pk
    assert r.verdicts[0]["status"] == "rejected"
    assert "recovered:forged" not in ledger_state(case.journal)["facts"]


def test_use_the_same_method_as_last_time_is_not_triggered_and_no_model_is_asked(no_model):
    t = tenant_ensure(slug="acme")
    j = journal_ensure(session=session_ensure(tenant=t, key="same"))
    journal_append(journal=j, items=[message("user", "Tidy the module."), *filler(3)])
    ledger_fold(journal=j)
    journal_append(
        journal=j, items=[message("user", "Use the same method as last time."), *filler(1, 9)]
    )
    stub = StubModel()
    r = recovery_run(journal=j, model=stub)
    assert r.outcome == Receipt.Outcome.NOT_TRIGGERED
    assert r.trigger["fired"] is False and "no identifier" in r.reason
    assert r.snapshot == {} and r.queries == [] and r.reads == []
    assert stub.requests == 0 and r.model_requests == 0
    # the default path does not even build a model client
    r2 = recovery_run(journal=j)
    assert r2.outcome == Receipt.Outcome.NOT_TRIGGERED and no_model == []


def test_it_denies_another_lane_and_a_lower_revision_before_any_model_call(no_model):
    case = build_migration_case(lane="main")
    other = build_migration_case(lane="worker-2")
    fold = Fold.objects.filter(journal=case.journal).order_by("-number").first()
    stub = StubModel()

    cross = recovery_run(journal=other.journal, fold=fold, model=stub)
    assert cross.outcome == Receipt.Outcome.DENIED
    assert "denied (lane)" in cross.reason and "'worker-2'" in cross.reason
    assert cross.journal_id == other.journal.pk and cross.snapshot["frozen"] is False

    stale = recovery_run(journal=case.journal, fold=fold, revision=fold.revision - 1, model=stub)
    assert stale.outcome == Receipt.Outcome.DENIED and "denied (revision)" in stale.reason

    for r in (cross, stale):
        assert r.queries == [] and r.reads == [] and r.trigger == {}
        assert r.model_requests == 0
    assert stub.requests == 0 and no_model == []
    auto = recovery_run(journal=other.journal, fold=fold)
    assert auto.outcome == Receipt.Outcome.DENIED and no_model == []


def test_a_triggered_attempt_asks_the_configured_model_and_checks_its_citations():
    case = build_migration_case()
    summary = ParsedEntry(
        kind="event",
        role="runtime",
        derived=True,
        content={"type": "summary", "text": "The migration 0042_add_refund_index ran normally."},
    )
    journal_append(journal=case.journal, items=[summary])
    derived = entry(case.journal, case.journal.head_seq)
    stub = StubModel(
        [
            {
                "claim": "The migration was faked with --fake.",
                "status": "historical",
                "citations": [
                    {"entry": case.call.entry_hash, "quote": "0042_add_refund_index --fake"}
                ],
            },
            {
                "claim": "The migration ran normally.",
                "status": "current",
                "citations": [{"entry": derived.entry_hash, "quote": "ran normally"}],
            },
            {
                "claim": "The migration dropped a table.",
                "status": "current",
                "citations": [{"entry": case.result.entry_hash, "quote": "DROP TABLE refunds"}],
            },
        ]
    )
    r = recovery_run(journal=case.journal, model=stub)
    assert stub.requests == 1 and r.model_requests == 1 and r.analyst == "stub"
    assert [c["claim"] for c in r.claims] == ["The migration was faked with --fake."]
    assert r.claims[0]["citations"][0]["range"]  # the service located the quote
    reasons = {c["claim"]: c["reason"] for c in r.rejected_claims}
    assert "summary or compaction marker" in reasons["The migration ran normally."]
    assert "does not occur byte for byte" in reasons["The migration dropped a table."]
    shown = [x["entry"] for x in stub.seen[0][1]]
    assert derived.entry_hash not in shown  # summaries are never shown as evidence


def test_a_tampered_chunk_discards_the_lead_and_the_receipt_names_the_check():
    case = build_migration_case()
    raw_update(
        "UPDATE journal_app_chunk SET hash = %s WHERE entry_id = %s AND position = 0",
        ["0" * 64, case.call.pk],
    )
    r = recovery_run(journal=case.journal, query="0042_add_refund_index", model=None)
    read = next(x for x in r.reads if x["entry"] == case.call.entry_hash)
    assert read["ok"] is False and read["failed"] == ["chunks"] and read["discarded"]
    assert read["reason"].startswith("chunks: chunk 0: stored offset 0")
    assert f"hash {'0' * 64}, recomputed" in read["reason"]
    assert case.call.entry_hash not in [s["entry"] for s in r.sources]
    # the untouched result still counts; nothing cites the tampered call
    assert all(c["entry"] != case.call.entry_hash for cl in r.claims for c in cl["citations"])


def test_a_lead_whose_only_source_is_tampered_finds_nothing_and_says_why():
    case = build_migration_case()
    raw_update(
        "UPDATE journal_app_entry SET body = replace(body, '--fake', '--real') WHERE id = %s",
        [case.call.pk],
    )
    r = recovery_run(journal=case.journal, query="--fake", model=None)
    assert r.outcome == Receipt.Outcome.NOTHING_FOUND
    assert "body_hash" in r.reason and "entry_hash" in r.reason
    assert r.recovered == [] and r.claims == []


def _many(n, word="quokka"):
    t = tenant_ensure(slug="acme")
    j = journal_ensure(session=session_ensure(tenant=t, key=f"many-{word}"))
    journal_append(
        journal=j,
        items=[
            message("assistant", f"note {i}: the {word} protocol version {i} is in use")
            for i in range(n)
        ],
    )
    j.refresh_from_db()
    return j


class StepClock:
    def __init__(self, step):
        self.now, self.step = 0.0, step

    def __call__(self):
        self.now += self.step
        return self.now


@pytest.mark.parametrize(
    ("limit", "budget", "query", "clock"),
    [
        ("rounds", dataclasses.replace(recovery_budget(), rounds=1), "zzz_nomatch_123", None),
        ("searches", dataclasses.replace(recovery_budget(), searches=1), "zzz_nomatch_123", None),
        ("reads", dataclasses.replace(recovery_budget(), reads=2), "quokka", None),
        ("sources", dataclasses.replace(recovery_budget(), sources=1), "quokka", None),
        ("tokens", dataclasses.replace(recovery_budget(), tokens=5), "quokka", None),
        ("seconds", dataclasses.replace(recovery_budget(), seconds=30), "quokka", StepClock(31.0)),
    ],
)
def test_each_limit_of_the_budget_ends_the_attempt(limit, budget, query, clock):
    j = _many(5)
    r = recovery_run(journal=j, query=query, budget=budget, clock=clock, model=None)
    assert r.outcome == Receipt.Outcome.BUDGET_EXHAUSTED
    assert r.reason.startswith(f"budget exhausted: {limit} (")
    assert r.budget[limit] == getattr(budget, limit)
    used = r.usage
    if limit in ("rounds", "searches", "reads"):
        assert used[limit] == getattr(budget, limit)
    if limit == "sources":
        assert used["sources"] == 1 and r.reads[-1]["reason"].startswith("verified, not admitted")
    if limit == "tokens":
        assert used["tokens"] <= 5 and r.reads[-1]["discarded"]


def test_evidence_found_before_the_budget_ran_out_is_kept():
    j = _many(5)
    r = recovery_run(
        journal=j,
        query="quokka",
        budget=dataclasses.replace(recovery_budget(), sources=2),
        model=None,
    )
    assert r.outcome == Receipt.Outcome.BUDGET_EXHAUSTED
    assert len(r.sources) == 2 and len(r.claims) == 2
    assert all(c["status"] == "reported" for c in r.claims)


def test_a_failed_attempt_is_recorded_and_the_fold_carries_on(monkeypatch):
    case = build_migration_case()

    def broken(*args, **kwargs):
        raise RuntimeError("search backend down")

    monkeypatch.setattr("recovery_app.services.attempt.backend", broken)
    out = ledger_fold(journal=case.journal, recovery_options={"model": None})
    assert out.receipt.outcome == Receipt.Outcome.FAILED
    assert "RuntimeError: search backend down" in out.receipt.reason
    assert out.created and out.fold.number == 3
    assert out.receipt.entered_fold is None


def test_the_fold_carries_on_even_when_no_receipt_can_be_written(monkeypatch):
    case = build_migration_case()

    def broken(**kwargs):
        raise RuntimeError("database full")

    monkeypatch.setattr("recovery_app.services.recovery_run", broken)
    out = ledger_fold(journal=case.journal)
    assert out.receipt is None and out.created and out.fold.number == 3


def test_a_request_beyond_the_head_is_denied():
    case = build_migration_case()
    r = recovery_run(journal=case.journal, revision=case.journal.head_seq + 5, model=None)
    assert r.outcome == Receipt.Outcome.DENIED and "beyond the journal's head" in r.reason


def test_a_trigger_fires_once_per_message_across_folds():
    case = build_migration_case()
    first = ledger_fold(journal=case.journal, recovery_options={"model": None}).receipt
    assert first.outcome == Receipt.Outcome.RECOVERED
    journal_append(journal=case.journal, items=filler(1, 100))
    again = ledger_fold(journal=case.journal, recovery_options={"model": None})
    assert again.receipt.outcome == Receipt.Outcome.NOT_TRIGGERED
    assert "already scanned" in again.receipt.reason
    assert again.created


def test_recovered_facts_wait_for_the_next_fold_when_nothing_is_new_to_fold():
    case = build_migration_case()
    ledger_fold(journal=case.journal, recover=False)  # the new round, folded without recovery
    out = ledger_fold(journal=case.journal, recovery_options={"model": None})
    assert out.fold is None and "nothing to fold" in out.reason
    assert out.receipt.outcome == Receipt.Outcome.RECOVERED and out.receipt.entered_fold is None
    journal_append(journal=case.journal, items=filler(1, 200))
    later = ledger_fold(journal=case.journal, recovery_options={"model": None})
    out.receipt.refresh_from_db()
    assert out.receipt.entered_fold_id == later.fold.pk
    assert f"recovered:{case.call.entry_hash[:16]}" in ledger_state(case.journal)["facts"]


def test_a_manual_query_skips_the_trigger_and_is_labelled():
    case = build_migration_case()
    r = recovery_run(journal=case.journal, query="--fake", model=None)
    assert r.kind == Receipt.Kind.MANUAL and r.trigger["reason"] == "manual query '--fake'"
    assert r.outcome == Receipt.Outcome.RECOVERED
    assert DOUBT not in [c["claim"] for c in r.claims]


def test_the_model_never_sees_a_secret_from_the_question_or_the_reads():
    case = build_migration_case()
    key = "sk-proj-PLACEHOLDERnotArealKey000000000000"
    journal_append(
        journal=case.journal,
        items=[message("user", f"Was 0042_add_refund_index wrong? I used OPENAI_API_KEY={key}")],
    )
    stub = StubModel()
    r = recovery_run(journal=case.journal, model=stub)
    assert stub.requests == 1 and r.outcome == Receipt.Outcome.NOTHING_FOUND
    question, reads = stub.seen[0]
    assert key not in question and "[filtered: openai-key]" in question
    assert all(key not in x["text"] for x in reads)
