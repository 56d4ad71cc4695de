"""A runtime declares a tool call pending: the append API's
``metadata.pending`` field, documented in the OpenAPI schema and validated; through the one
fold service the call stays pending in the ledger and the context, and its result closes it."""

from __future__ import annotations

import pytest

from config.api import api as ninja_api
from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Entry
from journal_app.services import journal_append
from ledger_app import selectors
from ledger_app.services import latest_fold, ledger_fold
from ledger_app.services.context import context_build
from ledger_app.validation import TASK_STATE_MARK, message_texts
from tests.factories import journal_build

pytestmark = pytest.mark.django_db

APPEND = "/sessions/s1/main/main/entries"


def _call(pending: object) -> dict[str, object]:
    return {
        "kind": "tool_call",
        "role": "assistant",
        "content": {"name": "deploy", "arguments": {"target": "prod"}},
        "tool_call_id": "d1",
        "tool_name": "deploy",
        "metadata": {"pending": pending},
    }


def test_the_append_api_takes_a_pending_call_and_refuses_a_non_boolean_flag(api):
    refused = api.post(APPEND, {"start_seq": 1, "entries": [_call("yes")]})
    assert refused.status_code == 422
    body = refused.json()
    assert body["field"].startswith("entries[0].metadata") and "pending" in body["message"]
    assert Entry.objects.count() == 0  # nothing half-written
    taken = api.post(APPEND, {"start_seq": 1, "entries": [_call(True)]})
    assert taken.status_code in (200, 201), taken.json()
    assert Entry.objects.get().meta_dict.get("pending") is True


def test_the_pending_field_is_in_the_openapi_schema():
    schema = ninja_api.get_openapi_schema()
    entry = schema["components"]["schemas"]["EntryIn"]
    pending = entry["properties"]["metadata"]["properties"]["pending"]
    assert pending["type"] == "boolean" and "pending since seq N" in pending["description"]


def _texts(result) -> list[str]:
    return [t for m in result.model_view["messages"] for t in message_texts(m)]


def test_through_the_fold_service_a_pending_call_stays_pending_until_its_result(tenant):
    journal = journal_build(
        tenant=tenant,
        items=[
            message("user", "Deploy the release once it is approved."),
            tool_call("d1", "deploy", {"target": "prod"}, metadata={"pending": True}),
            message("user", "While we wait: what does the release contain?"),
            message("assistant", "It contains the refund fix."),
        ],
    )
    ledger_fold(journal=journal)
    facts = selectors.context_ledger(journal, latest_fold(journal))["facts"]
    [obligation] = [f for f in facts.values() if f.get("call_id") == "d1"]
    assert obligation["outcome"] == "pending" and obligation["lifecycle"] == "active"
    result = context_build(journal=journal, working_budget=4000, hard_limit=4000, write=False)
    state = next(t for t in _texts(result) if t.startswith(TASK_STATE_MARK))
    assert "pending since seq 2" in state and "did not complete" not in state

    journal_append(journal=journal, items=[tool_result("d1", "deployed release 4.2")])
    journal.refresh_from_db()
    ledger_fold(journal=journal)
    facts = selectors.context_ledger(journal, latest_fold(journal))["facts"]
    assert facts[obligation["id"]]["lifecycle"] == "closed"
    result = context_build(journal=journal, working_budget=4000, hard_limit=4000, write=False)
    assert not any("pending" in t or "did not complete" in t for t in _texts(result))
