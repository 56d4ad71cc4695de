"""The ledger over the API: state at any fold, facts with support, folds, verdicts, review
actions, and fold tasks with their status (docs/design.md section 5)."""

from __future__ import annotations

import pytest

from journal_app.formats.base import message
from journal_app.hashing import display
from journal_app.models import Entry
from journal_app.services import journal_append
from ledger_app.models import Fold, RetirementRequest, TaskRun
from ledger_app.runs import task_run_start
from ledger_app.services import ledger_fold
from tests.api.conftest import RULE, pending_retirement
from tests.factories import journal_build
from tests.support.writers import ScriptedWriter


def mechanical_fold(journal, upto=None):
    """A mechanical fold without the recovery scan: the pages are checked against its facts."""
    result = ledger_fold(journal=journal, upto=upto, writer="mechanical", recover=False)
    assert result.fold is not None, result.reason
    return result.fold


pytestmark = pytest.mark.django_db

SCOPE = "/sessions/s1/main/main"


@pytest.fixture
def journal(tenant):
    journal = journal_build(tenant=tenant)
    mechanical_fold(journal)
    return journal


def test_the_ledger_lists_facts_with_support_resolved_to_raw_entries(api, journal):
    r = api.get(SCOPE + "/ledger")

    body = r.json()
    fold = Fold.objects.get(journal=journal)
    assert r.status_code == 200
    assert (body["fold"], body["state_hash"]) == (1, display(fold.state_hash))
    assert body["total"] == len(fold.state_dict["facts"])
    assert body["note"].startswith("mechanical facts only")
    pins = [f for f in body["facts"] if f["pin"]]
    system = Entry.objects.get(journal=journal, seq=1)
    pin = next(f for f in pins if f["support"][0]["entry"] == display(system.entry_hash))
    assert pin["text"] == system.text
    assert pin["priority"] == "P0"
    assert pin["support"][0] == {
        "entry": display(system.entry_hash),
        "url": f"/api/v1/entries/{display(system.entry_hash)}",
        "resolved": True,
        "seq": 1,
        "kind": "message",
        "role": "system",
        "quote": None,
        "chunk": None,
    }


def test_a_support_url_leads_to_the_entry_it_cites(api, journal):
    fact = next(f for f in api.get(SCOPE + "/ledger").json()["facts"] if not f["pin"])

    entry = api.get(fact["support"][0]["url"].removeprefix("/api/v1")).json()

    assert entry["entry_hash"] == fact["support"][0]["entry"]
    assert entry["verification"]["ok"] is True


def test_the_ledger_filters_by_category_and_priority(api, journal):
    all_facts = api.get(SCOPE + "/ledger").json()["facts"]

    p0 = api.get(SCOPE + "/ledger", priority="P0").json()
    blockers = api.get(SCOPE + "/ledger", category="blocker").json()

    assert {f["id"] for f in p0["facts"]} == {f["id"] for f in all_facts if f["priority"] == "P0"}
    assert blockers["facts"] and all(f["category"] == "blocker" for f in blockers["facts"])
    assert p0["total"] == len(all_facts)
    assert api.get(SCOPE + "/ledger", priority="P9").status_code == 422


def test_the_ledger_is_readable_at_an_earlier_fold(api, journal):
    journal_append(journal=journal, items=[message("user", "Also update the changelog.")])
    mechanical_fold(journal)

    first = api.get(SCOPE + "/ledger", fold=1).json()
    latest = api.get(SCOPE + "/ledger").json()

    assert (first["fold"], latest["fold"]) == (1, 2)
    texts = {f["text"] for f in latest["facts"]} - {f["text"] for f in first["facts"]}
    assert "Also update the changelog." in texts
    assert api.get(SCOPE + "/ledger", fold=7).status_code == 404


def test_one_fact_is_readable_by_id(api, journal):
    fact = api.get(SCOPE + "/ledger").json()["facts"][0]

    r = api.get(f"{SCOPE}/ledger/facts/{fact['id']}")

    assert r.json() == fact
    assert api.get(SCOPE + "/ledger/facts/pin:0000").status_code == 404


def test_an_empty_ledger_before_any_fold(api, tenant):
    journal_build(tenant=tenant, key="new")

    body = api.get("/sessions/new/main/main/ledger").json()

    assert (body["fold"], body["total"], body["facts"]) == (None, 0, [])


def test_folds_list_and_detail_carry_manifest_delta_and_verdicts(api, journal):
    listed = api.get(SCOPE + "/folds").json()
    detail = api.get(SCOPE + "/folds/1").json()
    verdicts = api.get(SCOPE + "/folds/1/verdicts").json()

    fold = Fold.objects.get(journal=journal)
    assert [f["number"] for f in listed] == [1]
    assert listed[0]["outcome"] == "fallback"
    assert detail["manifest"]["covered"]["entry_hashes"] == fold.manifest["covered"]["entry_hashes"]
    assert len(detail["delta"]["ops"]) == len(fold.delta_dict["ops"])
    assert "verdicts" not in detail["delta"]
    assert detail["verdicts"] == verdicts
    assert [v["status"] for v in verdicts] == [v["status"] for v in fold.delta_dict["verdicts"]]
    assert api.get(SCOPE + "/folds/2").status_code == 404


def test_a_rejected_op_shows_its_reason_in_the_verdicts(api, tenant):
    journal = journal_build(tenant=tenant, items=[message("user", RULE)])
    mechanical_fold(journal)
    journal_append(journal=journal, items=[message("assistant", "The rule no longer matters.")])
    pin = next(f for f in Fold.objects.get(journal=journal).state_dict["facts"].values())
    said = Entry.objects.get(journal=journal, seq=2).entry_hash
    ledger_fold(
        journal=journal,
        writer=ScriptedWriter([{"op": "retire", "id": pin["id"], "evidence": [said]}]),
    )

    verdicts = api.get(SCOPE + "/folds/2/verdicts").json()

    rejected = [v for v in verdicts if v["status"] == "rejected"]
    assert [v["op"] for v in rejected] == ["retire"]
    assert "authoritative" in rejected[0]["reason"]


def test_the_ledger_verifies_over_the_api(api, journal):
    r = api.get(SCOPE + "/ledger/verify").json()

    assert (r["ok"], r["folds"], r["mismatch"]) == (True, 1, None)


def test_queueing_a_fold_returns_a_task_whose_status_is_readable(
    api, tenant, django_capture_on_commit_callbacks
):
    journal = journal_build(tenant=tenant)

    with django_capture_on_commit_callbacks(execute=True):
        r = api.post(SCOPE + "/folds", {})
    task = api.get(f"/tasks/{r.json()['task_id']}").json()

    assert r.status_code == 202
    assert r.json()["task_name"] == "ledger_app.tasks.fold_journal"
    assert task["status"] == "succeeded"
    assert (task["result"]["fold"], task["result"]["created"]) == (1, True)
    assert task["scope"] == {"session": "s1", "lane": "main", "branch": "main"}
    assert Fold.objects.filter(journal=journal).count() == 1
    listed = api.get(SCOPE + "/tasks").json()
    assert [t["task_id"] for t in listed] == [task["task_id"]]


def test_queueing_the_same_fold_twice_folds_once(api, tenant, django_capture_on_commit_callbacks):
    journal = journal_build(tenant=tenant)

    with django_capture_on_commit_callbacks(execute=True):
        api.post(SCOPE + "/folds", {"upto": 9})
    with django_capture_on_commit_callbacks(execute=True):
        again = api.post(SCOPE + "/folds", {"upto": 9}).json()

    assert api.get(f"/tasks/{again['task_id']}").json()["result"]["created"] is False
    assert Fold.objects.filter(journal=journal).count() == 1
    assert TaskRun.objects.filter(journal=journal).count() == 2


def test_an_unknown_task_is_404(api):
    assert api.get("/tasks/no-such-task").status_code == 404


def test_a_reviewer_key_approves_a_retirement(reviewer_api, api, tenant):
    journal, req, pin = pending_retirement(tenant)

    queue = api.get("/sessions/perm/main/main/retirements", status="pending").json()
    r = reviewer_api.post(
        f"/retirements/{req.pk}/review", {"decision": "approve", "comment": "asked the user"}
    )

    assert [q["fact_id"] for q in queue] == [pin]
    assert r.status_code == 200, r.content
    assert (r.json()["status"], r.json()["reviewer"]) == ("approved", "rita")
    assert r.json()["decided_in"] == 3
    facts = api.get("/sessions/perm/main/main/ledger").json()["facts"]
    assert next(f for f in facts if f["id"] == pin)["lifecycle"] == "retired"


def test_a_reviewer_key_refuses_and_a_second_decision_conflicts(reviewer_api, tenant):
    _, req, _ = pending_retirement(tenant)

    bare = reviewer_api.post(f"/retirements/{req.pk}/review", {"decision": "refuse"})
    first = reviewer_api.post(
        f"/retirements/{req.pk}/review", {"decision": "refuse", "comment": "still applies"}
    )
    second = reviewer_api.post(
        f"/retirements/{req.pk}/review", {"decision": "approve", "comment": "changed my mind"}
    )

    assert bare.status_code == 400  # a decision needs a comment, as in the UI
    assert (bare.json()["code"], bare.json()["field"]) == ("invalid_comment", "comment")
    assert first.json()["status"] == "refused"
    assert second.status_code == 409
    assert second.json()["code"] == "review_conflict"
    assert RetirementRequest.objects.get().status == "refused"


def test_a_client_key_gets_403_on_review_actions_and_nothing_changes(api, tenant):
    journal, req, pin = pending_retirement(tenant)
    folds = Fold.objects.filter(journal=journal).count()

    for decision in ("approve", "refuse"):
        r = api.post(f"/retirements/{req.pk}/review", {"decision": decision})
        assert r.status_code == 403
        assert r.json()["code"] == "forbidden"

    req.refresh_from_db()
    assert req.status == "pending"
    assert Fold.objects.filter(journal=journal).count() == folds
    assert api.get(f"/retirements/{req.pk}").json()["status"] == "pending"


def test_a_redelivered_task_reports_its_latest_run_and_the_number_of_runs(
    api, tenant, django_capture_on_commit_callbacks
):
    journal = journal_build(tenant=tenant)
    with django_capture_on_commit_callbacks(execute=True):
        task_id = api.post(SCOPE + "/folds", {}).json()["task_id"]
    task_run_start(
        task_name="ledger_app.tasks.fold_journal", task_id=task_id, journal=journal, attempt=1
    )

    one = api.get(f"/tasks/{task_id}").json()
    listed = api.get(SCOPE + "/tasks").json()

    assert (one["status"], one["executions"]) == ("running", 2)
    assert [(t["status"], t["executions"]) for t in listed] == [("running", 2), ("succeeded", 2)]


def test_a_fold_request_with_the_broker_down_is_503_and_the_run_says_not_queued(
    api, tenant, monkeypatch
):
    from kombu.exceptions import OperationalError

    from ledger_app.runs import BROKER_DOWN
    from ledger_app.tasks import fold_journal

    journal = journal_build(tenant=tenant)

    def down(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(fold_journal, "apply_async", down)
    r = api.post(SCOPE + "/folds", {})
    assert r.status_code == 503, r.content
    body = r.json()
    assert body["code"] == "broker_unavailable"
    assert "task broker is unreachable" in body["message"]
    [run] = TaskRun.objects.filter(journal=journal)
    assert run.status == "failed" and run.error.startswith(BROKER_DOWN)
    assert not Fold.objects.filter(journal=journal).exists()
