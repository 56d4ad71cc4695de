"""context_build end to end: journal, ledger, artifacts, checkpoints; and its API."""

from __future__ import annotations

import json

import pytest
from django.core.files.storage import default_storage
from ninja.testing import TestClient

from config.api import api
from journal_app.auth import api_key_create
from journal_app.errors import DomainError
from journal_app.formats.base import message, tool_call, tool_result
from journal_app.harness import harness_kind
from journal_app.models import Artifact
from journal_app.services import journal_append, journal_import, tenant_ensure
from ledger_app.models import Fold
from ledger_app.pin_facts import pin_fact
from ledger_app.pins import pin_shown_text
from ledger_app.services import entry_view, ledger_state
from ledger_app.services.context import context_build, context_preview, fold_invariants
from ledger_app.services.context_reads import end_status
from ledger_app.services.context_records import (
    ContextError,
    ValidateRequestInvalid,
    context_budgets,
)
from ledger_app.validation import TASK_STATE_MARK, message_texts, validate_request
from tests.factories import fold_build, journal_build
from tests.ledger_app.test_context import BUDGETS, CORPUS_FILES, padded_items
from tests.ledger_app.test_context_frontend import AWS_SECRET, DB_PASSWORD, PIN_SECRET, planted

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def tenant():
    return tenant_ensure(slug="acme")


def texts(view):
    out = [t for m in view["messages"] for t in message_texts(m)]
    return out + [b["text"] for b in view.get("system", [])]


def test_the_sample_session_ends_on_its_last_complete_round_and_states_the_interrupted_call(tenant):
    journal = journal_build(tenant=tenant)
    result = context_build(journal=journal, working_budget=10_000, hard_limit=10_000)
    assert result.status == "ok" and result.revision == journal.head_seq
    messages = result.model_view["messages"]
    assert messages[-2]["content"] == "Correction: only change billing/refunds.py."
    assert messages[-1]["content"].startswith(TASK_STATE_MARK)
    assert "interrupted call t2" in messages[-1]["content"]
    assert not any(c["id"] == "t2" for m in messages for c in m.get("tool_calls") or [])
    assert result.validation["model"]["ok"] and result.validation["frontend"]["ok"]
    assert Fold.objects.count() == 0  # within budget: nothing folded


def test_a_tight_budget_folds_once_and_the_second_build_reuses_the_fold(tenant):
    journal = journal_build(tenant=tenant, items=padded_items())
    first = context_build(journal=journal, working_budget=350, hard_limit=350, tail_tokens=10)
    assert first.status == "ok", first.failure
    assert Fold.objects.filter(journal=journal).count() == 1
    fold = Fold.objects.get(journal=journal)
    assert fold.seq_end == 9  # up to the protected tail (the correction at seq 10)
    assert first.debug_trace["rounds"]["folded_out"]
    assert first.model_view["messages"][0]["content"].startswith("Never modify the payments")
    second = context_build(journal=journal, working_budget=350, hard_limit=350, tail_tokens=10)
    assert Fold.objects.filter(journal=journal).count() == 1
    assert second.model_view == first.model_view


def test_read_only_builds_write_nothing(tenant):
    journal = journal_build(tenant=tenant)
    result = context_preview(journal=journal, working_budget=215, hard_limit=215, tail_tokens=10)
    assert Fold.objects.count() == 0
    assert [a["outcome"] for a in result.debug_trace["ledger"]["folds_asked"]] == [
        "no fold callback: the ledger cannot grow here"
    ]


def test_an_earlier_revision_sees_only_its_entries(tenant):
    journal = journal_build(tenant=tenant)
    result = context_build(journal=journal, revision=2, working_budget=10_000, hard_limit=10_000)
    assert result.revision == 2
    assert [m["role"] for m in result.model_view["messages"]] == ["system", "user"]
    with pytest.raises(ContextError, match="revision 99"):
        context_build(journal=journal, revision=99, working_budget=10_000, hard_limit=10_000)
    with pytest.raises(ContextError, match="target_format"):
        context_build(journal=journal, working_budget=100, hard_limit=100, target_format="x")


def big_output(n=3000):
    return "\n".join(f"row {i}: amount {i * 7} EUR" for i in range(n))


def test_an_artifact_reloaded_five_times_leaves_one_artifact_and_one_reference(tenant):
    content = big_output()
    items = [
        message("user", "Load the ledger export."),
        tool_call("load", "export", {}),
        tool_result("load", content),
    ]
    for n in range(5):
        items += [tool_call(f"re{n}", "read_artifact", {"n": n}), tool_result(f"re{n}", content)]
    items.append(message("assistant", "Loaded it six times."))
    journal = journal_build(tenant=tenant, items=items)
    assert Artifact.objects.filter(tenant=tenant).count() == 1
    artifact = Artifact.objects.get(tenant=tenant)
    assert journal.entries.filter(artifact=artifact).count() == 6
    result = context_build(journal=journal, working_budget=4_000, hard_limit=4_000)
    assert result.status == "ok", result.failure
    blob = json.dumps(result.model_view)
    assert result.debug_trace["artifacts"] == [artifact.reference]
    assert set(__import__("re").findall(r"artifact://[^\s\"\\]+", blob)) == {artifact.reference}
    assert blob.count("preview:") == 1
    # reloading again through the store returns the same artifact, not a new one
    journal_append(
        journal=journal, items=[tool_call("re9", "read_artifact", {}), tool_result("re9", content)]
    )
    assert Artifact.objects.filter(tenant=tenant).count() == 1


def test_a_receipt_whose_artifact_is_gone_falls_back_to_the_journal_text(tenant):
    content = big_output()
    items = [
        message("user", "Load it."),
        tool_call("load", "export", {}),
        tool_result("load", content),
        message("assistant", "Done."),
    ]
    journal = journal_build(tenant=tenant, items=items)
    artifact = Artifact.objects.get(tenant=tenant)
    default_storage.delete(artifact.storage_name)
    result = context_build(journal=journal, working_budget=3_000, hard_limit=3_000)
    assert result.status == "ok", result.failure
    first, second = result.validation["model"], result.debug_trace["validation"][0]
    assert first["ok"]
    assert [p["check"] for p in second["problems"]] == ["artifact_reference"] or second["problems"][
        0
    ]["check"] == "artifact_hash"
    tool = next(m for m in result.model_view["messages"] if m["role"] == "tool")
    assert tool["content"].startswith("[shrunk by the context builder")
    assert artifact.reference not in json.dumps(result.model_view)


def test_an_impossible_budget_returns_the_failure_state_and_evicts_nothing(tenant):
    # the user's own words (prose, not pasted material a receipt could stand for), 280,000
    # characters: no context of 20,000 tokens can hold them verbatim (docs/design.md 5.4)
    words = ("Follow this rule exactly as it is written here. " * 5_834)[:280_000]
    items = [message("user", words)]
    for n in range(4):
        items += [
            tool_call(f"c{n}", "exec", {"command": f"make step{n}"}),
            tool_result(f"c{n}", f"step {n} ok"),
        ]
    items.append(message("assistant", "All steps ran."))
    journal = journal_build(tenant=tenant, items=items)
    fold_build(journal)
    before = Fold.objects.filter(journal=journal).order_by("-number").first()
    facts_before = len(before.state_dict["facts"])
    result = context_build(journal=journal, working_budget=20_000, hard_limit=20_000)
    assert result.status == "failed" and result.model_view is None
    assert result.debug_trace["request"] is None
    checkpoint = result.failure["checkpoint"]
    # issue 15, "a read destroys state": a failed read never consolidates
    assert not checkpoint["consolidated"] and checkpoint["kind"] == "fold"
    assert not Fold.objects.filter(journal=journal, kind=Fold.Kind.CONSOLIDATION).exists()
    stored = Fold.objects.get(journal=journal, number=checkpoint["fold"])
    assert len(stored.state_dict["facts"]) == facts_before
    pin = next(f for f in stored.state_dict["facts"].values() if f.get("pin"))
    assert pin["text"] == words
    again = context_build(journal=journal, working_budget=20_000, hard_limit=20_000)
    assert again.status == "failed" and again.failure["checkpoint"]["fold"] == checkpoint["fold"]


def test_a_failed_read_at_a_small_budget_leaves_later_contexts_as_rich(tenant):
    items = [message("user", "Run the steps.")]
    for n in range(12):
        items += [
            tool_call(f"c{n}", "exec", {"command": f"make step{n}"}),
            tool_result(f"c{n}", f"step {n} ok " + "detail " * 40),
        ]
    items.append(message("assistant", "All steps ran."))
    journal = journal_build(tenant=tenant, items=items)
    fold_build(journal)
    large = context_build(journal=journal, working_budget=50_000, hard_limit=50_000)
    small = context_build(journal=journal, working_budget=5, hard_limit=5)
    assert small.status == "failed"
    after = context_build(journal=journal, working_budget=50_000, hard_limit=50_000)
    assert after.model_view == large.model_view
    assert not Fold.objects.filter(journal=journal, kind=Fold.Kind.CONSOLIDATION).exists()


def test_the_frontend_view_is_user_safe(tenant):
    secret = "sk-PLACEHOLDER-not-a-real-key-000000000000"
    items = [
        message("system", "Internal operator prompt."),
        message("user", "Show the environment."),
        tool_call("env", "terminal", {"cmd": "printenv"}),
        tool_result("env", f"OPENAI_API_KEY={secret}\nEDITOR=vim"),
        message("assistant", "The key is set."),
    ]
    journal = journal_build(tenant=tenant, items=items)
    result = context_build(journal=journal, working_budget=10_000, hard_limit=10_000)
    front = json.dumps(result.frontend_view)
    assert secret not in front and "Internal operator prompt" not in front and "EDITOR=vim" in front
    assert secret not in json.dumps(result.model_view) and secret not in json.dumps(
        result.debug_trace
    )
    assert result.validation["frontend"]["ok"]


def test_the_fold_page_invariants_panel(tenant):
    journal = journal_build(tenant=tenant)
    fold = fold_build(journal)
    panel = fold_invariants(fold=fold)
    assert panel["status"] == "ok" and panel["model"]["ok"]
    assert "pin_verbatim" in panel["model"]["checks"]
    assert Fold.objects.count() == 1


def test_the_default_budgets_come_from_settings(tenant, settings):
    settings.LEDGER_WINDOW_TOKENS = 100_000
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 40_000
    budgets = context_budgets()
    assert (budgets.working_budget, budgets.hard_limit, budgets.window) == (
        40_000,
        100_000,
        100_000,
    )
    assert budgets.as_kwargs() == {
        "working_budget": 40_000,
        "hard_limit": 100_000,
        "output_reserve": 0,
    }
    journal = journal_build(tenant=tenant)
    trace = context_preview(journal=journal).debug_trace
    assert (
        trace["budgets"]["working_budget"] == 40_000 and trace["budgets"]["hard_limit"] == 100_000
    )
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 500_000  # never above the window
    assert context_budgets().working_budget == 100_000


def test_the_frontend_view_filters_what_the_model_view_keeps_for_the_model(tenant, client):
    journal_build(tenant=tenant, items=planted())
    for result in (
        context_build(
            journal=journal_build(tenant=tenant, items=planted(), key="s2"),
            working_budget=10_000,
            hard_limit=10_000,
        ).to_dict(),
        client.post(
            "/sessions/s1/context", json={"working_budget": 10_000, "hard_limit": 10_000}
        ).json(),
    ):
        front = json.dumps(result["frontend_view"])
        for private in (AWS_SECRET, DB_PASSWORD, PIN_SECRET, "<thinking>"):
            assert private not in front
        labels = result["frontend_view"]["filtered"]["labels"]
        assert {"secret: aws-secret-key", "secret: secret-keyword", "reasoning"} <= set(labels)
        assert result["validation"]["frontend"]["ok"], result["validation"]["frontend"]
        assert not any("withheld" in i["text"] for i in result["frontend_view"]["items"])
        model = json.dumps(result["model_view"])
        assert PIN_SECRET in model and AWS_SECRET not in model and DB_PASSWORD not in model


def test_a_run_the_source_ended_submitted_is_stated_as_ended(transactional_db):
    path = next(p for p in CORPUS_FILES if p.parent.name == "swe-agent-traj")
    journal = journal_import(path=path, tenant="corpus").journal
    assert end_status(journal) == (
        "exit_status submitted (a submission of "
        f"{len(journal.session.meta_dict['info']['submission'])} characters)"
    )
    result = context_build(journal=journal, working_budget=32_000, hard_limit=32_000)
    state = result.model_view["messages"][-1]["content"]
    assert state.startswith(TASK_STATE_MARK)
    assert "the run has ended: the source recorded exit_status submitted" in state
    assert "did not complete" not in json.dumps(result.model_view)


@pytest.mark.parametrize("path", CORPUS_FILES, ids=[p.name for p in CORPUS_FILES])
def test_every_corpus_transcript_through_the_service(path):
    journal = journal_import(path=path, tenant="corpus").journal
    for budget in BUDGETS:
        result = context_build(journal=journal, working_budget=budget, hard_limit=budget)
        if result.status == "failed":
            assert result.model_view is None and result.failure["checkpoint"]
            continue
        view = result.model_view
        fmt = "anthropic" if view["format"].startswith("anthropic") else "openai"
        report = validate_request(
            {k: v for k, v in view.items() if k != "format"},
            fmt=fmt,
            working_budget=budget,
            hard_limit=budget,
        )
        assert report.ok, [p.message for p in report.problems]
        found = texts(view)
        pins = {
            f["support"][0]["entry"]: f
            for f in ledger_state(journal)["facts"].values()
            if f.get("pin")
        }
        for e in journal.entries.filter(
            kind="message", role__in=["system", "developer", "user"], derived=False
        ):
            harness = harness_kind(kind=e.kind, role=e.role, text=e.text, meta=e.meta_dict)
            if not e.text or harness:
                continue
            pin = pins.get(e.entry_hash)
            if pin is not None and pin.get("lifecycle") == "closed":
                # a request that is done: one "done at seq N" line, never shown as current
                assert not any(e.text == t for t in found), f"done request seq {e.seq} current"
                continue
            # the pin as the context shows it (harness blocks out, attachments as receipts)
            # (a pin not folded yet: as its fold will record it)
            shown = pin_shown_text(pin if pin is not None else pin_fact(entry_view(e)))
            # an older open request is one line of the record (its first words), docs/design.md 5.5
            head = next((ln.strip() for ln in shown.splitlines() if ln.strip()), "")[:60]
            assert any(e.text in t or shown in t or head in t for t in found), (
                f"pin seq {e.seq} missing at {budget}"
            )


# ------------------------------------------------------------------------------------ API

# the project's API: its errors are mapped once, in config/api.py


@pytest.fixture
def client(tenant):
    _, raw = api_key_create(tenant=tenant, name="runtime")
    return TestClient(api, headers={"Authorization": f"Bearer {raw}"})


def test_api_builds_the_three_views(client, tenant):
    journal_build(tenant=tenant)
    response = client.post(
        "/sessions/s1/context",
        json={"working_budget": 10_000, "hard_limit": 10_000, "target_format": "anthropic"},
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ok"
    assert body["model_view"]["format"] == "anthropic-messages"
    assert body["frontend_view"]["items"] and body["debug_trace"]["decisions"]
    only = client.post(
        "/sessions/s1/context",
        json={"working_budget": 10_000, "hard_limit": 10_000, "views": ["model"]},
    ).json()
    assert only["frontend_view"] is None and only["debug_trace"] is None


def test_api_context_is_tenant_scoped_and_strict(client, tenant):
    other = tenant_ensure(slug="globex")
    journal_build(tenant=other, key="theirs")
    assert (
        client.post(
            "/sessions/theirs/context", json={"working_budget": 10, "hard_limit": 10}
        ).status_code
        == 404
    )
    journal_build(tenant=tenant)
    bad = client.post("/sessions/s1/context", json={"working_budget": 0, "hard_limit": 10})
    assert bad.status_code == 422
    unknown = client.post(
        "/sessions/s1/context", json={"working_budget": 10, "hard_limit": 10, "budget": 3}
    )
    assert unknown.status_code == 422
    anonymous = TestClient(api)
    assert (
        anonymous.post(
            "/sessions/s1/context", json={"working_budget": 10, "hard_limit": 10}
        ).status_code
        == 401
    )


def test_api_validate_reports_every_broken_invariant(client):
    body = {
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                    {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": "ok"},
            {"role": "user", "content": ""},
            {"role": "tool", "tool_call_id": "zzz", "content": "?"},
        ],
        "working_budget": 10,
    }
    response = client.post("/validate", json=body)
    assert response.status_code == 200
    report = response.json()
    assert not report["ok"]
    assert {p["check"] for p in report["problems"]} == {
        "orphan_tool_call",
        "empty_message",
        "orphan_tool_result",
        "within_working_budget",
    }
    assert client.post("/validate", json={"messages": body["messages"][:1]}).json()["ok"]


def test_api_validate_reports_a_lone_surrogate_instead_of_refusing_the_body(client):
    raw = '{"messages": [{"role": "user", "content": "bad \\ud800"}]}'
    response = client.post("/validate", data=raw, content_type="application/json")
    assert response.status_code == 200
    assert [p["check"] for p in response.json()["problems"]] == ["lone_surrogate"]


def test_api_validate_refuses_malformed_bodies_in_the_error_shape(client):
    response = client.post("/validate", data="{not json", content_type="application/json")
    assert response.status_code == 400 and response.json()["code"] == "malformed_json"
    assert response.json()["message"].startswith("malformed JSON")
    response = client.post("/validate", data=b"\xff", content_type="application/json")
    assert response.status_code == 400 and response.json()["code"] == "malformed_json"
    response = client.post("/validate", json={"messages": [], "extra": 1})
    assert response.status_code == 422 and response.json() == {
        "code": "validation_error",
        "message": "extra: unknown field",
        "field": "extra",
        "entry": None,
    }
    assert client.post("/validate", json=[1, 2]).status_code == 422


def test_api_context_errors_are_domain_errors_in_the_one_shape(client, tenant):
    journal_build(tenant=tenant)
    response = client.post(
        "/sessions/s1/context",
        json={"working_budget": 10, "hard_limit": 10, "revision": 999},
    )
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_context_request"
    assert response.json()["field"] == "revision"
    assert issubclass(ValidateRequestInvalid, ContextError)
    assert issubclass(ContextError, DomainError)


def test_revision_zero_has_nothing_to_send_and_says_so(tenant):
    journal = journal_build(tenant=tenant)
    result = context_build(journal=journal, revision=0, working_budget=100, hard_limit=100)
    assert result.status == "failed" and result.model_view is None
    assert [p["check"] for p in result.failure["problems"]] == ["empty_message"]


def test_validate_with_a_session_requires_every_pin_verbatim(client, tenant):
    journal_build(tenant=tenant)
    built = client.post(
        "/sessions/s1/context", json={"working_budget": 10_000, "hard_limit": 10_000}
    ).json()
    messages = built["model_view"]["messages"]
    body = {"messages": messages, "session": "s1"}
    answer = client.post("/validate", json=body).json()
    assert answer["ok"], answer["problems"]
    assert "pin_verbatim" in answer["checks"]
    first_user = next(i for i, m in enumerate(messages) if m["role"] == "user")
    altered = [dict(m) for m in messages]
    altered[first_user]["content"] = altered[first_user]["content"][:-1] + "\u2026"
    answer = client.post("/validate", json={**body, "messages": altered}).json()
    assert not answer["ok"]
    assert [p["check"] for p in answer["problems"]] == ["pin_verbatim"]
    # without a session the same list breaks nothing this check can see
    assert client.post("/validate", json={"messages": altered}).json()["ok"]
    assert client.post("/validate", json={**body, "session": "nope"}).status_code == 404


def test_an_output_reserve_over_the_window_is_a_422_naming_the_field(client, tenant):
    journal_build(tenant=tenant)
    response = client.post(
        "/validate", json={"messages": [], "hard_limit": 1_000, "output_reserve": 1_000}
    )
    assert response.status_code == 422
    assert response.json()["field"] == "output_reserve"
    response = client.post(
        "/sessions/s1/context",
        json={"working_budget": 1_000, "hard_limit": 1_000, "output_reserve": 4_000},
    )
    assert response.status_code == 422
    assert response.json()["field"] == "output_reserve"


def test_the_tools_schema_of_a_context_request_counts_against_its_budget(client, tenant):
    journal_build(tenant=tenant)
    tools = [{"type": "function", "function": {"name": "exec", "description": "run " * 200}}]
    plain = client.post(
        "/sessions/s1/context", json={"working_budget": 10_000, "hard_limit": 10_000}
    ).json()
    with_tools = client.post(
        "/sessions/s1/context",
        json={"working_budget": 10_000, "hard_limit": 10_000, "tools": tools},
    ).json()
    schema = with_tools["debug_trace"]["tokens"]["tools"]
    assert schema > 200
    assert with_tools["validation"]["model"]["tokens"] == (
        plain["validation"]["model"]["tokens"] + schema
    )
