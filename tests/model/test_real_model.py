"""The model path against a real model (opt-in: ``make test-model``; marker ``model``).

Runs two seed fixtures (docs/design.md seeds: "All tests pass" citing one test file; "deployed and
browser acceptance passed" citing a failed deploy) and one corpus transcript through
``compact --writer model`` against the server named by ``OPENAI_BASE_URL`` and
``WRITER_MODEL`` (README "Use a local model"), with ``WRITER_WINDOW_TOKENS`` (default 8000),
and prints the time and tokens of every model call. It asserts what must hold whatever the
model's quality: no fold fails (no context overflow, no timeout), every writer answer is
either parsed or rejected with its cause, every verifier verdict has a reason, every
fallback is labelled, and a slice that did not fit was split.

Skipped when no server is named. CI never selects the ``model`` marker (pyproject addopts).
"""

from __future__ import annotations

import os
import time
from io import StringIO

import pytest
from django.core.management import call_command

from journal_app.services import (
    journal_append,
    journal_ensure,
    journal_import,
    session_ensure,
    tenant_ensure,
)
from ledger_app.models import Fold, FoldAttempt, Proposal, Verdict
from tests.conftest import CORPUS
from tests.ledger_app.test_model_writer import _deploy_items, _tests_items

pytestmark = [
    pytest.mark.model,
    pytest.mark.django_db,
    pytest.mark.skipif(
        not (os.environ.get("OPENAI_BASE_URL") and os.environ.get("WRITER_MODEL")),
        reason="no model server: set OPENAI_BASE_URL and WRITER_MODEL (README: Use a local model)",
    ),
]


@pytest.fixture
def real_model(settings):
    settings.OPENAI_BASE_URL = os.environ["OPENAI_BASE_URL"]
    settings.OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "local")
    settings.WRITER_MODEL = os.environ["WRITER_MODEL"]
    settings.VERIFIER_MODEL = os.environ.get("VERIFIER_MODEL", "")
    settings.WRITER_WINDOW_TOKENS = int(os.environ.get("WRITER_WINDOW_TOKENS", "8000"))
    settings.MODEL_MAX_OUTPUT_TOKENS = int(os.environ.get("MODEL_MAX_OUTPUT_TOKENS", "1024"))
    settings.MODEL_TIMEOUT_SECONDS = float(os.environ.get("MODEL_TIMEOUT_SECONDS", "1800"))
    settings.MODEL_STALL_SECONDS = float(os.environ.get("MODEL_STALL_SECONDS", "120"))
    settings.MODEL_RESPONSE_FORMAT = os.environ.get("MODEL_RESPONSE_FORMAT", "json_schema")
    settings.RECOVERY_ANALYST_MODEL = ""
    return settings


def _compact(journal) -> str:
    out = StringIO()
    started = time.monotonic()
    try:
        call_command("compact", journal.scope_label, "--writer", "model", stdout=out)
    finally:
        print(f"\n== {journal.scope_label}: compact took {time.monotonic() - started:.1f} s")
        print(out.getvalue())
        for a in FoldAttempt.objects.filter(journal=journal, outcome=FoldAttempt.Outcome.FAILED):
            print(f"fold {a.number} failed: {a.error}")
            for c in a.record.get("model_calls", []):
                print(
                    f"  {c['role']} round {c['round']} {c['status']}: {'; '.join(c['errors'])[:300]}"
                )
    return out.getvalue()


def _check(journal) -> None:
    attempts = list(FoldAttempt.objects.filter(journal=journal).order_by("pk"))
    assert attempts, "nothing was folded"
    for a in attempts:
        for c in a.record.get("model_calls", []):
            print(
                f"fold {a.number} {c['role']:8} round {c['round']} {c['status']:10} "
                f"{c.get('finish_reason') or '-':7} {c['input_tokens']:>6} in {c['output_tokens']:>5} "
                f"out {c['total_s']:>8.1f} s {c['response_format']}"
                + (f"  [{'; '.join(c['errors'])[:160]}]" if c["errors"] else "")
            )
        assert a.outcome != FoldAttempt.Outcome.FAILED, a.error
        for p in Proposal.objects.filter(attempt=a):
            assert p.parsed is not None or p.error or p.kind == "fallback", p.raw[:200]
        if a.outcome == "fallback":
            assert "retrieve raw journal evidence" in (a.record.get("note") or "")
    for v in Verdict.objects.filter(proposal__attempt__journal=journal, judge="verifier"):
        assert v.entailment_reason.strip(), "a verifier verdict without a reason"
    folds = Fold.objects.filter(journal=journal, kind="fold")
    assert folds.exists() and max(f.seq_end for f in folds) == journal.head_seq


def _journal(items, key):
    tenant = tenant_ensure(slug="model")
    journal = journal_ensure(session=session_ensure(tenant=tenant, key=key))
    journal_append(journal=journal, items=items)
    journal.refresh_from_db()
    return journal


def test_seed_all_tests_pass(real_model):
    journal = _journal(_tests_items(), "seed-tests")
    _compact(journal)
    _check(journal)
    texts = [
        f["text"] for f in Fold.objects.filter(journal=journal).last().state_dict["facts"].values()
    ]
    assert "All tests pass" not in texts  # the over-claim never enters as a fact


def test_seed_deployed_and_accepted(real_model):
    journal = _journal(_deploy_items(), "seed-deploy")
    _compact(journal)
    _check(journal)
    facts = Fold.objects.filter(journal=journal).last().state_dict["facts"].values()
    assert not [
        f
        for f in facts
        if f.get("author") == "writer"
        and "deployed" in f["text"]
        and f["category"] == "verified_state"
    ]


def test_corpus_transcript_with_a_small_window(real_model):
    path = CORPUS / "openai-chat-tool-calls" / "taubench-gpt4o-airline-task3.json"
    journal = journal_import(path=path, tenant="model").journal
    _compact(journal)
    _check(journal)
    notes = [f.manifest.get("note", "") for f in Fold.objects.filter(journal=journal, kind="fold")]
    print("slices:", notes)
