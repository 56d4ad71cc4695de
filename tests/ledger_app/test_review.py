"""The permission-rule case (seed 000) end to end, plus verify_ledger and pin integrity."""

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Entry, Membership
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app.models import Fold, RetirementRequest
from ledger_app.services import (
    FoldRefused,
    ReviewForbidden,
    ledger_fold,
    ledger_verify,
    retirement_review,
)
from tests.support.writers import ScriptedWriter

pytestmark = pytest.mark.django_db

RULE = "Always ask before changing file permissions."


def _setup():
    t = tenant_ensure(slug="acme")
    j = journal_ensure(session=session_ensure(tenant=t, key="perm"))
    journal_append(journal=j, items=[message("user", RULE), message("assistant", "OK.")])
    ledger_fold(journal=j)
    return t, j


def _user(tenant, name, role):
    u = get_user_model().objects.create_user(name, password="pw-" + name)
    Membership.objects.create(user=u, tenant=tenant, role=role)
    return u


def _pin_id(j):
    return next(
        f
        for f in Fold.objects.get(journal=j, number=1).state_dict["facts"].values()
        if f.get("pin")
    )["id"]


def _h(j, seq):
    return Entry.objects.get(journal=j, seq=seq).entry_hash


def test_the_assistant_deciding_the_rule_no_longer_matters_retires_nothing():
    t, j = _setup()
    journal_append(
        journal=j, items=[message("assistant", "I decided the permission rule no longer matters.")]
    )
    pin = _pin_id(j)
    fold = ledger_fold(
        journal=j, writer=ScriptedWriter([{"op": "retire", "id": pin, "evidence": [_h(j, 3)]}])
    ).fold
    verdict = fold.delta_dict["verdicts"][-1]
    assert verdict["status"] == "rejected" and "authoritative" in verdict["reason"]
    assert fold.state_dict["facts"][pin]["lifecycle"] == "active"
    assert not RetirementRequest.objects.exists()


def _request_retirement(j):
    journal_append(
        journal=j,
        items=[message("user", "The permission rule no longer applies; you may chmod freely.")],
    )
    pin = _pin_id(j)
    ledger_fold(
        journal=j, writer=ScriptedWriter([{"op": "retire", "id": pin, "evidence": [_h(j, 3)]}])
    )
    return pin, RetirementRequest.objects.get()


def test_a_later_user_entry_queues_the_retirement_and_approval_retires_it():
    t, j = _setup()
    pin, req = _request_retirement(j)
    assert req.status == "pending"
    assert Fold.objects.get(journal=j, number=2).state_dict["facts"][pin]["lifecycle"] == "active"
    rita = _user(t, "rita", Membership.Role.REVIEWER)
    review = retirement_review(
        request=req, actor=rita, decision="approve", comment="confirmed with the user"
    )
    req.refresh_from_db()
    assert (req.status, req.reviewer, req.comment) == ("approved", rita, "confirmed with the user")
    assert req.decided_at is not None and req.decided_in == review
    fact = review.state_dict["facts"][pin]
    assert fact["lifecycle"] == "retired" and fact["reviews"][0]["reviewer"] == "rita"
    assert ledger_verify(journal=j).ok


def test_a_refused_retirement_keeps_the_rule_active():
    t, j = _setup()
    pin, req = _request_retirement(j)
    rita = _user(t, "rita", Membership.Role.REVIEWER)
    review = retirement_review(request=req, actor=rita, decision="refuse", comment="no")
    assert review.state_dict["facts"][pin]["lifecycle"] == "active"
    assert RetirementRequest.objects.get().status == "refused"


def test_an_operator_cannot_review():
    t, j = _setup()
    _, req = _request_retirement(j)
    oscar = _user(t, "oscar", Membership.Role.OPERATOR)
    with pytest.raises(ReviewForbidden):
        retirement_review(request=req, actor=oscar, decision="approve", comment="ok")
    assert RetirementRequest.objects.get().status == "pending"
    assert Fold.objects.filter(journal=j).count() == 2


def test_obligations_close_only_on_completion_evidence():
    t = tenant_ensure(slug="acme")
    j = journal_ensure(session=session_ensure(tenant=t, key="ob"))
    journal_append(
        journal=j,
        items=[
            message("user", "Run the benchmark and write results."),
            message("assistant", "Will do."),
        ],
    )
    ob = {
        "id": "ob:bench",
        "category": "open_obligation",
        "priority": "P1",
        "confidence": "reported",
        "text": "Run the benchmark and write results.",
        "support": [{"entry": _h(j, 1)}],
    }
    ledger_fold(journal=j, writer=ScriptedWriter([{"op": "add", "fact": ob}]))
    journal_append(journal=j, items=[message("assistant", "done!")])
    f = ledger_fold(
        journal=j,
        writer=ScriptedWriter([{"op": "close", "id": "ob:bench", "evidence": [_h(j, 3)]}]),
    ).fold
    assert f.state_dict["facts"]["ob:bench"]["lifecycle"] == "active"
    journal_append(journal=j, items=[message("assistant", f"filler {i}") for i in range(10)])
    f = ledger_fold(journal=j).fold
    assert f.state_dict["facts"]["ob:bench"]["lifecycle"] == "active"
    journal_append(
        journal=j,
        items=[
            tool_call("b", "exec", {"command": "python bench.py --out r.json"}),
            tool_result("b", "wrote r.json", exit_code=0),
        ],
    )
    f = ledger_fold(
        journal=j,
        writer=ScriptedWriter([{"op": "close", "id": "ob:bench", "evidence": [_h(j, 15)]}]),
    ).fold
    assert f.state_dict["facts"]["ob:bench"]["lifecycle"] == "closed"
    assert ledger_verify(journal=j).ok


def test_verify_ledger_reports_the_first_differing_fact(capsys):
    t, j = _setup()
    out = io.StringIO()
    call_command("verify_ledger", "acme", stdout=out)
    assert "OK: 1 journals, 1 folds" in out.getvalue()
    fold = Fold.objects.get(journal=j)
    pin = _pin_id(j)
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE ledger_app_fold SET state = %s WHERE id = %s",
            [fold.state.replace("Always ask", "Never ask"), fold.pk],
        )
    with pytest.raises(CommandError) as exc:
        call_command("verify_ledger", "acme")
    assert "fold 1" in str(exc.value) and pin in str(exc.value)


def test_a_pin_whose_entry_was_tampered_refuses_the_next_fold():
    t, j = _setup()
    e = Entry.objects.get(journal=j, seq=1)
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("SET session_replication_role = replica")
        cur.execute(
            "UPDATE journal_app_entry SET body = %s WHERE id = %s",
            [e.body.replace("Always", "Rarely"), e.pk],
        )
        if connection.vendor == "postgresql":
            cur.execute("SET session_replication_role = DEFAULT")
    journal_append(journal=j, items=[message("assistant", "next")])
    with pytest.raises(FoldRefused, match="hash check"):
        ledger_fold(journal=j)
    assert Fold.objects.filter(journal=j).count() == 1


def test_a_support_hash_from_another_scope_or_after_the_revision_refuses_the_fold():
    t, j = _setup()
    other = journal_ensure(session=session_ensure(tenant=t, key="other"))
    journal_append(journal=other, items=[message("user", "elsewhere")])
    journal_append(journal=j, items=[message("assistant", "more")])
    foreign = Entry.objects.get(journal=other, seq=1).entry_hash
    fact = {
        "category": "decision",
        "priority": "P2",
        "confidence": "reported",
        "text": "x",
        "support": [{"entry": foreign}],
    }
    with pytest.raises(FoldRefused, match="fact.support"):
        ledger_fold(journal=j, writer=ScriptedWriter([{"op": "add", "fact": fact}]))
    assert Fold.objects.filter(journal=j).count() == 1
    # an entry appended after the fold's range but cited by it is beyond its revision only if
    # it does not exist yet: cite a hash that no entry has
    ghost = {**fact, "support": [{"entry": "ab" * 32}]}
    with pytest.raises(FoldRefused):
        ledger_fold(
            journal=j,
            writer=ScriptedWriter(
                [{"op": "close", "id": "x", "evidence": []}, {"op": "add", "fact": ghost}]
            ),
        )
    assert Fold.objects.filter(journal=j).count() == 1


def test_verify_ledger_reports_a_changed_state_hash():
    t, j = _setup()
    fold = Fold.objects.get(journal=j)
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE ledger_app_fold SET state_hash = %s WHERE id = %s",
            ["0" + fold.state_hash[1:], fold.pk],
        )
    report = ledger_verify(journal=j)
    assert not report.ok and report.mismatch["check"] == "state_hash"
