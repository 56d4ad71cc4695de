"""One fold service: the same writer, recovery and manifest whoever asks.

With a model configured, every entry point (the service, ``compact``, the API's
``POST .../folds``, the automatic fold after an append, the context builder) folds with the
model; without one, with the offline writer. A bad writer is refused on every surface,
naming the option, before anything is written.
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from journal_app.auth import api_key_create
from journal_app.formats.base import message, tool_call, tool_result
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app.models import Fold, FoldAttempt, TaskRun
from ledger_app.services import (
    ModelNotConfigured,
    WriterUnknown,
    ledger_compact,
    ledger_fold,
    ledger_refold_fallbacks,
    ledger_verify,
)
from recovery_app.models import Receipt
from tests.support import ScriptedServer

pytestmark = pytest.mark.django_db

EMPTY = json.dumps({"facts": [], "verdicts": []})


@pytest.fixture
def scripted(settings):
    with ScriptedServer() as server:
        settings.OPENAI_BASE_URL = server.base_url
        settings.OPENAI_API_KEY = "test-key"
        settings.WRITER_MODEL = "scripted-writer"
        settings.VERIFIER_MODEL = "scripted-verifier"
        settings.MODEL_MAX_ATTEMPTS = 1
        server.answer_all(EMPTY)
        yield server


@pytest.fixture
def no_model(settings):
    settings.OPENAI_BASE_URL = ""
    settings.WRITER_MODEL = ""


def _items(n: int = 1):
    items = [message("user", "Fix the refund rounding; never touch the payments tables.")]
    for i in range(n):
        items += [
            tool_call(f"c{i}", "exec", {"command": f"pytest tests/test_refunds_{i}.py"}),
            tool_result(f"c{i}", "3 passed in 0.2s", exit_code=0),
        ]
    return items


def _journal(key: str = "s1", items=None):
    j = journal_ensure(session=session_ensure(tenant=tenant_ensure(slug="acme"), key=key))
    journal_append(journal=j, items=items or _items())
    j.refresh_from_db()
    return j


def _key(journal) -> str:
    return api_key_create(tenant=journal.session.tenant, name="runtime")[1]


def _post(path: str, key: str, body: dict) -> object:
    return Client().post(
        "/api/v1" + path,
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )


# ------------------------------------------------------------ the configured writer


def test_the_service_folds_with_the_configured_model(scripted):
    j = _journal()
    result = ledger_fold(journal=j)
    assert result.fold.writer == "model:scripted-writer"
    assert scripted.request_count >= 1
    assert result.fold.manifest["writer"]["model"] == "scripted-writer"


def test_compact_folds_with_the_configured_model(scripted):
    _journal()
    out = io.StringIO()
    call_command("compact", "acme/s1", stdout=out)
    assert "writer model writer scripted-writer" in out.getvalue()
    assert Fold.objects.get(kind="fold").writer == "model:scripted-writer"
    assert scripted.request_count >= 1


def test_the_api_fold_uses_the_configured_model(scripted, django_capture_on_commit_callbacks):
    j = _journal()
    with django_capture_on_commit_callbacks(execute=True):
        r = _post("/sessions/s1/main/main/folds", _key(j), {})
    assert r.status_code == 202, r.content
    assert Fold.objects.get(journal=j, kind="fold").writer == "model:scripted-writer"
    assert scripted.request_count >= 1


def test_the_automatic_fold_after_an_append_uses_the_configured_model(
    scripted, settings, django_capture_on_commit_callbacks
):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10
    j = journal_ensure(session=session_ensure(tenant=tenant_ensure(slug="acme"), key="auto"))
    with django_capture_on_commit_callbacks(execute=True):
        journal_append(journal=j, items=_items())
    folds = Fold.objects.filter(journal=j, kind="fold")
    assert folds.exists() and {f.writer for f in folds} == {"model:scripted-writer"}
    assert scripted.request_count >= 1


def test_the_context_builders_fold_uses_the_configured_model(scripted):
    j = _journal(items=_items(30))
    r = _post("/sessions/s1/context", _key(j), {"working_budget": 400, "hard_limit": 800})
    assert r.status_code in (200, 422), r.content
    folds = Fold.objects.filter(journal=j, kind="fold")
    assert folds.exists(), "the builder folded nothing at a budget this small"
    assert {f.writer for f in folds} == {"model:scripted-writer"}
    assert scripted.request_count >= 1


def test_without_a_model_every_fold_is_offline(no_model, django_capture_on_commit_callbacks):
    j = _journal()
    assert ledger_fold(journal=j).fold.writer == "offline"
    k = _journal("s2")
    with django_capture_on_commit_callbacks(execute=True):
        assert _post("/sessions/s2/main/main/folds", _key(k), {}).status_code == 202
    assert Fold.objects.get(journal=k, kind="fold").writer == "offline"


# ------------------------------------------------------------------- bad input


def _nothing_written(j) -> bool:
    return not (
        Fold.objects.filter(journal=j).exists()
        or FoldAttempt.objects.filter(journal=j).exists()
        or Receipt.objects.filter(journal=j).exists()
    )


def test_an_unknown_writer_is_refused_naming_the_option(no_model):
    j = _journal()
    with pytest.raises(WriterUnknown) as exc:
        ledger_fold(journal=j, writer="gpt-summary")
    assert exc.value.field == "writer" and "known: offline, model, mechanical" in str(exc.value)
    assert exc.value.status == 422 and exc.value.code == "unknown_writer"
    assert _nothing_written(j)


def test_a_model_writer_without_a_model_is_refused_everywhere(no_model):
    j = _journal()
    with pytest.raises(ModelNotConfigured) as exc:
        ledger_compact(journal=j, writer="model")
    assert "OPENAI_BASE_URL" in str(exc.value) and exc.value.field == "writer"
    with pytest.raises(CommandError, match="OPENAI_BASE_URL"):
        call_command("compact", "acme/s1", "--writer", "model", stdout=io.StringIO())
    r = _post("/sessions/s1/main/main/folds", _key(j), {"writer": "model"})
    assert r.status_code == 422
    body = r.json()
    assert body["code"] == "model_not_configured" and body["field"] == "writer"
    r = _post("/sessions/s1/main/main/folds", _key(j), {"writer": "summary"})
    assert r.status_code == 422 and "writer" in (r.json()["field"] or "")
    assert _nothing_written(j) and not TaskRun.objects.exists()


# ------------------------------------------------------------------------ refold


def test_a_mechanical_range_refolded_offline_is_a_new_fold_never_an_edit(no_model):
    j = _journal(items=_items(2))
    first = ledger_fold(journal=j, writer="mechanical").fold
    assert first.outcome == "fallback"
    stored = (first.delta, first.state, first.state_hash)

    report = ledger_refold_fallbacks(journal=j)

    (refold,) = report.folds
    assert (refold.kind, refold.number, refold.writer) == ("refold", 2, "offline")
    assert (refold.seq_start, refold.seq_end) == (first.seq_start, first.seq_end)
    first.refresh_from_db()
    assert (first.delta, first.state, first.state_hash) == stored  # untouched
    facts = refold.state_dict["facts"]
    withdrawn = refold.manifest["withdrawn"]
    assert withdrawn and all(facts[i]["lifecycle"] == "superseded" for i in withdrawn)
    assert all(facts[i]["superseded_by"] == "refold:2" for i in withdrawn)
    pins = [f for f in facts.values() if f.get("pin")]
    assert pins and all(f["lifecycle"] == "active" for f in pins)
    assert any(f["origin_fold"] == 2 for f in facts.values())
    assert ledger_verify(journal=j).ok
    # again: nothing new (the same range and writer were refolded)
    assert ledger_refold_fallbacks(journal=j).folds == []


def test_compact_refold_prints_what_it_refolded(no_model):
    j = _journal(items=_items(2))
    ledger_fold(journal=j, writer="mechanical")
    out = io.StringIO()
    call_command("compact", "acme/s1", "--refold", stdout=out)
    said = out.getvalue()
    assert "1 of 1 fallback fold(s) refolded" in said and "nothing folded" not in said
    assert "1 refold(s) by writer offline: folds 1 folded again as new folds 2" in said
    assert Fold.objects.filter(journal=j, kind="refold").count() == 1


def test_a_fold_reads_each_entrys_identifiers_once_from_its_stored_row(no_model, monkeypatch):
    # issue 18: the writer's "mentions" and the loss report read the identifiers stored at
    # append (EntryIdentifiers) instead of scanning the covered text again
    from journal_app.models import EntryIdentifiers
    from journal_app.services.append import identifiers_fill
    from ledger_app import mechanical
    from ledger_app.models import LedgerFact

    journal = journal_ensure(session=session_ensure(tenant=tenant_ensure(slug="acme"), key="s"))
    journal_append(
        journal=journal,
        items=[
            message("user", "Export the report."),
            tool_call("c1", "exec", {"command": "python export.py"}),
            tool_result("c1", "wrote reports/out.csv (1200 rows) in 3 s"),
            message("assistant", "Done."),
        ],
    )
    identifiers_fill(journal=journal, first_seq=1, last_seq=journal.head_seq)
    assert EntryIdentifiers.objects.filter(entry__journal=journal).count() == 4
    monkeypatch.setattr(
        mechanical, "identifiers_of", lambda **kw: pytest.fail("identifiers extracted again")
    )

    result = ledger_fold(journal=journal)

    assert result.fold is not None, result.reason
    texts = LedgerFact.objects.filter(journal=journal, until__isnull=True).values_list(
        "text", flat=True
    )
    assert any("reports/out.csv" in t and "1200 rows" in t for t in texts), list(texts)


def test_compact_with_debug_on_keeps_one_folds_query_log_not_all(no_model, settings):
    from django.db import connection, reset_queries

    journal = journal_ensure(session=session_ensure(tenant=tenant_ensure(slug="acme"), key="s"))
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**12
    journal_append(journal=journal, items=_items(12))
    settings.DEBUG = True  # the cursor logs each query, as in a checkout
    reset_queries()
    report = ledger_compact(journal=journal, fold_tokens=60)
    logged = len(connection.queries_log)
    reset_queries()
    assert len(report.rows) >= 4
    assert logged < 120, logged  # about one fold's queries, not every fold's
