"""Tenant isolation (docs/design.md section 9): a key of tenant A finds nothing of tenant B.

Every object of B (session, journal, entries by seq and by hash, artifacts, ledger, facts,
folds, verdicts, retirements, tasks) answers 404 to A's keys, client and reviewer alike;
writes aimed at B's names act in A's own tenant, never in B's.
"""

from __future__ import annotations

import pytest

from config.api import api as ninja_api
from journal_app.formats.base import tool_call, tool_result
from journal_app.hashing import display
from journal_app.models import Artifact, Entry, Journal
from ledger_app.models import Fold, RetirementRequest, TaskRun
from ledger_app.runs import task_run_enqueue
from ledger_app.tasks import fold_journal
from tests.api.conftest import pending_retirement
from tests.factories import fold_build, journal_build

pytestmark = pytest.mark.django_db

B = "/sessions/secret/main/main"


@pytest.fixture
def world_b(other_tenant, settings, django_capture_on_commit_callbacks):
    """Tenant B's objects: a folded journal with an artifact, a retirement and a task."""
    settings.ARTIFACT_THRESHOLD_TOKENS = 20
    journal = journal_build(
        tenant=other_tenant,
        key="secret",
        items=[
            tool_call("c1", "exec", {"command": "cat big.log"}),
            tool_result("c1", "\n".join(f"ERROR line {i} of the secret log" for i in range(80))),
        ],
    )
    fold_build(journal)
    _, retirement, pin = pending_retirement(other_tenant, key="perm")
    with django_capture_on_commit_callbacks(execute=True):
        run = task_run_enqueue(task=fold_journal, journal=journal, journal_id=journal.pk)
    return {
        "journal": journal,
        "entry": Entry.objects.filter(journal=journal).first(),
        "artifact": Artifact.objects.get(tenant=other_tenant),
        "fact": next(iter(Fold.objects.filter(journal=journal).last().state_dict["facts"])),
        "retirement": retirement,
        "task": run.task_id,
    }


def _b_urls(b) -> dict[tuple[str, str], str]:
    """One concrete URL of B's per operation template (method, path template)."""
    h = display(b["entry"].entry_hash)
    a = b["artifact"].content_hash
    r = b["retirement"].pk
    return {
        ("GET", "/sessions/{session}"): "/sessions/secret",
        ("GET", "/sessions/{session}/{lane}/{branch}"): B,
        ("GET", "/sessions/{session}/{lane}/{branch}/entries"): B + "/entries",
        ("GET", "/sessions/{session}/{lane}/{branch}/entries/{seq}"): B + "/entries/1",
        ("GET", "/entries/{entry_hash}"): f"/entries/{h}",
        ("GET", "/sessions/{session}/{lane}/{branch}/verify"): B + "/verify",
        ("GET", "/sessions/{session}/{lane}/{branch}/artifacts"): B + "/artifacts",
        ("GET", "/artifacts/{content_hash}"): f"/artifacts/{a}",
        ("GET", "/artifacts/{content_hash}/content"): f"/artifacts/{a}/content",
        ("GET", "/sessions/{session}/{lane}/{branch}/ledger"): B + "/ledger",
        ("GET", "/sessions/{session}/{lane}/{branch}/ledger/facts/{fact_id}"): (
            f"{B}/ledger/facts/{b['fact']}"
        ),
        ("GET", "/sessions/{session}/{lane}/{branch}/ledger/verify"): B + "/ledger/verify",
        ("GET", "/sessions/{session}/{lane}/{branch}/folds"): B + "/folds",
        ("GET", "/sessions/{session}/{lane}/{branch}/folds/{number}"): B + "/folds/1",
        ("GET", "/sessions/{session}/{lane}/{branch}/folds/{number}/verdicts"): (
            B + "/folds/1/verdicts"
        ),
        ("GET", "/sessions/{session}/{lane}/{branch}/folds/{number}/proposals"): (
            B + "/folds/1/proposals"
        ),
        ("GET", "/sessions/{session}/{lane}/{branch}/folds/{number}/invariants"): (
            B + "/folds/1/invariants"
        ),
        ("GET", "/sessions/{session}/{lane}/{branch}/folds/{number}/loss"): B + "/folds/1/loss",
        ("GET", "/sessions/{session}/{lane}/{branch}/fold-attempts"): B + "/fold-attempts",
        ("GET", "/sessions/{session}/{lane}/{branch}/retirements"): (
            "/sessions/perm/main/main/retirements"
        ),
        ("GET", "/retirements/{retirement_id}"): f"/retirements/{r}",
        ("GET", "/sessions/{session}/{lane}/{branch}/tasks"): B + "/tasks",
        ("GET", "/sessions/{session}/{lane}/{branch}/waterfall"): B + "/waterfall",
        ("GET", "/tasks/{task_id}"): f"/tasks/{b['task']}",
        ("POST", "/sessions/{session}/{lane}/{branch}/folds"): B + "/folds",
        ("POST", "/retirements/{retirement_id}/review"): f"/retirements/{r}/review",
    }


BODIES = {
    "/sessions/{session}/{lane}/{branch}/folds": {},
    "/retirements/{retirement_id}/review": {"decision": "approve"},
}
#: Writes that name a scope create it in the caller's own tenant (tested separately).
SCOPE_CREATING = {
    ("POST", "/sessions/{session}/{lane}/{branch}/entries"),
    ("POST", "/sessions/{session}/{lane}/{branch}/import"),
}


def test_every_object_of_another_tenant_is_404(world_b, api, reviewer_api, other_api):
    urls = _b_urls(world_b)
    for caller in (api, reviewer_api):
        for (method, template), url in urls.items():
            r = caller.get(url) if method == "GET" else caller.post(url, BODIES[template])
            assert r.status_code == 404, (caller.key[:11], method, url, r.content)
            assert r.json()["code"] == "not_found"
    # B's own key sees all of it: the 404s above are isolation, not broken URLs
    for (method, _), url in urls.items():
        if method == "GET":
            assert other_api.get(url).status_code == 200, url
    assert RetirementRequest.objects.get(pk=world_b["retirement"].pk).status == "pending"


def test_the_isolation_test_covers_every_journal_and_ledger_operation(world_b):
    schema = ninja_api.get_openapi_schema()
    operations = {
        (method.upper(), path.removeprefix("/api/v1"))
        for path, ops in schema["paths"].items()
        for method, op in ops.items()
        if set(op.get("tags", [])) & {"journal", "ledger"} and "{" in path
    }
    assert operations - SCOPE_CREATING == set(_b_urls(world_b))


def test_appending_to_another_tenants_session_name_writes_in_ones_own_tenant(world_b, api, tenant):
    before = list(Entry.objects.filter(journal=world_b["journal"]).values_list("entry_hash"))
    entry = {"kind": "message", "role": "user", "content": {"text": "mine"}}

    r = api.post(B + "/entries", {"start_seq": 1, "entries": [entry]})

    assert r.status_code == 200
    assert Journal.objects.get(session__tenant=tenant, session__key="secret").head_seq == 1
    assert (
        list(Entry.objects.filter(journal=world_b["journal"]).values_list("entry_hash")) == before
    )


def test_a_task_of_another_tenant_stays_invisible_in_task_lists(world_b, api, tenant):
    journal_build(tenant=tenant, key="secret")

    assert api.get(B + "/tasks").json() == []
    assert TaskRun.objects.filter(journal=world_b["journal"]).exists()
