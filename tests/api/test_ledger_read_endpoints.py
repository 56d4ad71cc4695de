"""Everything an operator's page shows has an endpoint: the writer's
proposals with both verdicts, failed fold attempts, a fold's invariants and loss report,
recovery receipts; and ``ops_rejected`` counts the verifier's rejections on both sides."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.hashing import display
from journal_app.models import Entry
from journal_app.services import journal_append, journal_ensure, session_ensure
from ledger_app.model_writer import ModelWriter
from ledger_app.models import Fold
from ledger_app.services import FoldFailed, ledger_fold
from recovery_app.models import Receipt
from tests.factories import MembershipFactory, UserFactory
from tests.support import ScriptedServer
from tests.support.writers import ScriptedWriter

pytestmark = pytest.mark.django_db

SCOPE = "/sessions/deploy/main/main"
RULE = "Never deploy to production outside the release pipeline."
CLAIM = "The production service was deployed and browser acceptance passed"


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def scripted():
    with ScriptedServer() as server:
        yield server


@pytest.fixture
def journal(tenant):
    j = journal_ensure(session=session_ensure(tenant=tenant, key="deploy"))
    journal_append(
        journal=j,
        items=[
            message("system", RULE),
            message("user", "Deploy the billing service to production and run browser acceptance."),
            tool_call("c1", "read_file", {"path": "deploy/production.yaml"}),
            tool_result("c1", "service: billing\nreplicas: 3\nacceptance: browser\n"),
            tool_call("d1", "exec", {"command": "./deploy.sh production --canary"}),
            tool_result(
                "d1",
                "Deploying billing to production...\nError: health check failed on 2/3 replicas",
                is_error=True,
                exit_code=1,
            ),
            message("assistant", CLAIM + "."),
        ],
    )
    j.refresh_from_db()
    return j


def _fact(key, text, support):
    return {
        "key": key,
        "category": "verified_state",
        "priority": "P1",
        "confidence": "verified",
        "text": text,
        "support": support,
    }


def _verdict(key, reason):
    return {
        "key": key,
        "seq": 4,
        "quote": "replicas: 3",
        "entailment": "not_entailed",
        "entailment_reason": reason,
        "temporal": "valid",
        "temporal_reason": "nothing is closed",
    }


@pytest.fixture
def fallback_fold(journal, scripted):
    """The proposal and the one repair both rejected by the verifier: a fallback fold."""
    scripted.push_json({"facts": [_fact("f1", CLAIM, [4, 7])]})
    scripted.push_json({"verdicts": [_verdict("f1", "seq 4 is a config file")]})
    scripted.push_json({"facts": [_fact("f1", "The production service was deployed", [4, 7])]})
    scripted.push_json({"verdicts": [_verdict("f1", "seq 7 is the assistant's claim")]})
    fold = ledger_fold(journal=journal, writer=ModelWriter(scripted.config()), recover=False).fold
    assert fold.outcome == "fallback"
    return fold


def test_ops_rejected_counts_the_rejected_proposal_and_repair_on_both_sides(
    api, fallback_fold, journal
):
    verdicts = fallback_fold.delta_dict["verdicts"]
    assert [v for v in verdicts if v["status"] == "rejected"] == []  # the reducer refused none

    [row] = api.get(SCOPE + "/folds").json()
    detail = api.get(SCOPE + "/folds/1").json()
    user = MembershipFactory(tenant=journal.session.tenant, user=UserFactory()).user
    client = Client()
    client.force_login(user)
    page = client.get(reverse("ledger:folds", args=["acme", "deploy", "main", "main"]))

    assert (row["ops_rejected"], row["reducer_rejected"], row["proposals_rejected"]) == (2, 0, 2)
    assert detail["ops_rejected"] == 2
    assert '<strong class="bad">2</strong>' in page.content.decode()
    fold_page = client.get(reverse("ledger:fold", args=["acme", "deploy", "main", "main", 1]))
    assert "2</strong>: 0 by the reducer, 2 in the writer" in fold_page.content.decode()


def test_the_proposals_endpoint_gives_each_round_with_both_verdicts(api, fallback_fold, journal):
    attempts = api.get(SCOPE + "/folds/1/proposals").json()

    [attempt] = attempts
    assert (attempt["fold"], attempt["outcome"]) == (1, "fallback")
    assert "repair was rejected" in attempt["fallback_reason"]
    rounds = [(p["round"], p["label"], p["rejected"]) for p in attempt["proposals"]]
    assert rounds[:2] == [(0, "proposal", 1), (1, "repair (the one repair, told why)", 1)]
    proposal = attempt["proposals"][0]
    [item] = proposal["items"]
    assert (item["key"], item["claim"], item["accepted"]) == ("f1", CLAIM, False)
    verifier = next(v for v in item["verdicts"] if v["judge"] == "verifier")
    assert (verifier["entailment"], verifier["entailment_reason"]) == (
        "not_entailed",
        "seq 4 is a config file [seq 4: 'replicas: 3']",
    )
    assert verifier["temporal"] == "valid"
    config = Entry.objects.get(journal=journal, seq=4)
    assert item["support"][0]["entry"] == display(config.entry_hash)
    assert item["support"][0]["resolved"] is True
    assert "seq 7 is the assistant" in str(attempt["proposals"][1]["items"])


def test_failed_attempts_are_listed_with_their_error(api, journal, scripted):
    for _ in range(3):
        scripted.push_error(503)
    with pytest.raises(FoldFailed):
        ledger_fold(journal=journal, writer=ModelWriter(scripted.config()), recover=False)

    [failed] = api.get(SCOPE + "/fold-attempts").json()

    assert (failed["outcome"], failed["fold"], failed["number"]) == ("failed", None, 1)
    assert "gave no answer after 3 attempt(s)" in failed["error"]
    assert failed["model_calls"][0]["status"] == "unavailable"
    assert (failed["seq_start"], failed["seq_end"]) == (1, 7)
    assert Fold.objects.count() == 0


def test_the_invariants_endpoint_matches_the_panel(api, journal, fallback_fold):
    body = api.get(SCOPE + "/folds/1/invariants").json()

    assert (body["fold"], body["status"], body["revision"]) == (1, "ok", fallback_fold.revision)
    model = next(r for r in body["reports"] if r["name"] == "model")
    checks = {c["check"]: c["ok"] for c in model["checks"]}
    assert checks["pin_verbatim"] is True and checks["orphan_tool_call"] is True
    assert api.get(SCOPE + "/folds/9/invariants").status_code == 404


@pytest.fixture
def lossy_fold(tenant):
    """A fold whose ledger (pins only) drops the path and flag an assistant message named."""
    j = journal_ensure(session=session_ensure(tenant=tenant, key="deploy"))
    journal_append(
        journal=j,
        items=[
            message("user", "Fix the refund rounding."),
            message("assistant", "I will edit src/billing/refunds.py and run with --dry-run."),
        ],
    )
    fold = ledger_fold(journal=j, writer=ScriptedWriter([]), recover=False).fold
    assert fold.manifest["loss"]["lost_count"] == 2
    return fold


def test_the_loss_endpoint_reads_the_manifest_report(api, lossy_fold):
    body = api.get(SCOPE + "/folds/1/loss").json()

    said = Entry.objects.get(journal=lossy_fold.journal, seq=2)
    assert body["recorded"] is True
    assert (body["total"], body["kept"], body["lost_count"]) == (2, 0, 2)
    assert {(i["kind"], i["value"]) for i in body["lost"]} == {
        ("path", "src/billing/refunds.py"),
        ("flag", "--dry-run"),
    }
    assert {(i["entry"], i["seq"]) for i in body["lost"]} == {(display(said.entry_hash), 2)}


def test_the_fold_page_shows_the_loss_report(lossy_fold):
    user = MembershipFactory(tenant=lossy_fold.journal.session.tenant, user=UserFactory()).user
    client = Client()
    client.force_login(user)
    fold_url = reverse("ledger:fold", args=["acme", "deploy", "main", "main", 1])

    body = client.get(fold_url).content.decode()

    assert "2 lost</strong>" in body and "<code>src/billing/refunds.py</code>" in body


def test_receipts_list_and_detail_per_scope(api, other_api, journal):
    fold = ledger_fold(journal=journal, writer="mechanical").fold  # runs the recovery scan
    receipts = api.get(SCOPE + "/recovery/receipts").json()

    stored = Receipt.objects.filter(journal=journal).order_by("-created_at", "-pk")
    assert [r["id"] for r in receipts] == [r.pk for r in stored]
    first = stored[0]
    assert receipts[0]["outcome"] == first.outcome
    assert receipts[0]["fold"] == (first.fold.number if first.fold_id else None)
    assert fold.manifest["recovery"]["receipt"] in [r["id"] for r in receipts]
    detail = api.get(f"{SCOPE}/recovery/receipts/{first.pk}").json()
    assert detail["id"] == first.pk and detail["outcome"] == first.outcome
    assert detail["reads"] == len(first.reads) == len(detail["reads_made"])
    assert [q["query"] for q in detail["queries_run"]] == [q["query"] for q in first.queries]
    for read in detail["reads_made"]:
        assert read["url"] == "/api/v1/entries/" + read["entry"]
        assert read["ok"] == all(c["ok"] for c in read["checks"])
    assert api.get(SCOPE + "/recovery/receipts", outcome="denied").json() == [
        r for r in receipts if r["outcome"] == "denied"
    ]
    assert other_api.get(f"{SCOPE}/recovery/receipts/{first.pk}").status_code == 404
    assert api.get(f"{SCOPE}/recovery/receipts/{first.pk + 999}").status_code == 404


def test_the_ledger_filter_expression_is_the_facts_pages(api, journal, fallback_fold):
    body = api.get(SCOPE + "/ledger", q="pin:true text:pipeline").json()
    bad = api.get(SCOPE + "/ledger", q="priority:P9")

    assert [f["text"] for f in body["facts"]] == [RULE]
    assert body["total"] == len(fallback_fold.state_dict["facts"])
    assert bad.status_code == 422
    assert (bad.json()["code"], bad.json()["field"]) == ("invalid_filter", "q")
    assert "is not a priority" in bad.json()["message"]
