"""Every ledger tampering is reported by ``verify_ledger``.

The ledger under attack: a fold of an instruction-bearing range, a fold whose writer asks
to retire two P0 pins (two pending retirement requests), a reviewer's approval of the
first (a review fold and its audit event). Each case changes stored rows behind the
services, as a database user could. Where the issue says "consistently" (a pin forged in
delta and state alike), replaying the deltas cannot tell, so each such case asserts that
the named check against the journal and the reviews (:mod:`ledger_app.services.integrity`)
sees it on its own; the last cases are the replay's (state hash, verdicts). The clean
ledger verifies; each tampering makes ``manage.py verify_ledger`` exit non-zero.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import pytest
import rfc8785
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection

from audit_app.models import AuditEvent
from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Entry, Journal, Membership
from journal_app.services import journal_append, journal_verify
from ledger_app.models import Fold, LedgerFact, RetirementRequest
from ledger_app.services import ledger_fold, ledger_verify, retirement_review
from ledger_app.services.integrity import ledger_integrity
from tests.factories import TenantFactory, journal_build
from tests.support.writers import ScriptedWriter

pytestmark = pytest.mark.django_db

SYSTEM = "Never touch the payments tables without asking first."
RULE = "Always ask before changing file permissions."


def _h(journal: Journal, seq: int) -> str:
    return Entry.objects.get(journal=journal, seq=seq).entry_hash


@pytest.fixture
def ledger(settings) -> Journal:
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9
    tenant = TenantFactory(slug="acme")
    journal = journal_build(
        tenant=tenant,
        items=[
            message("system", SYSTEM),
            message("user", RULE),
            tool_call("c1", "exec", {"command": "pytest -q"}),
            tool_result("c1", "3 passed", exit_code=0),
            message("assistant", "All three tests pass."),
        ],
    )
    ledger_fold(journal=journal)
    journal_append(
        journal=journal,
        items=[message("user", "Both rules are lifted: touch payments and chmod freely.")],
    )
    pins = sorted(f"pin:{_h(journal, s)[:16]}" for s in (1, 2))
    later = _h(journal, 6)
    ledger_fold(
        journal=journal,
        writer=ScriptedWriter(
            [{"op": "retire", "id": p, "evidence": [later], "reason": "lifted"} for p in pins]
        ),
    )
    reviewer = get_user_model().objects.create_user("rita", password="pw-rita")
    Membership.objects.create(user=reviewer, tenant=tenant, role=Membership.Role.REVIEWER)
    first = RetirementRequest.objects.order_by("pk").first()
    retirement_review(request=first, actor=reviewer, decision="approve", comment="confirmed")
    assert Fold.objects.filter(journal=journal).count() == 3
    assert RetirementRequest.objects.filter(status="pending").count() == 1
    return Journal.objects.get(pk=journal.pk)


# -- tampering helpers -------------------------------------------------------------------


def _sql(sql: str, params: list) -> None:
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("SET session_replication_role = replica")
        try:
            cur.execute(sql, params)
        finally:
            if connection.vendor == "postgresql":
                cur.execute("SET session_replication_role = DEFAULT")


def _fold(journal: Journal, number: int) -> Fold:
    return Fold.objects.get(journal=journal, number=number)


def _set(fold: Fold, **values) -> None:
    Fold.objects.filter(pk=fold.pk).update(**values)


def _edit_delta(journal: Journal, number: int, edit: Callable[[dict], None]) -> None:
    fold = _fold(journal, number)
    delta = json.loads(fold.delta)
    edit(delta)
    _set(fold, delta=rfc8785.dumps(delta).decode())


def _edit_manifest(journal: Journal, number: int, edit: Callable[[dict], None]) -> None:
    fold = _fold(journal, number)
    manifest = fold.manifest
    edit(manifest)
    _set(fold, manifest=manifest)


# -- the tamperings ----------------------------------------------------------------------


def t_manifest_entry_hashes(j):
    def edit(m):
        m["covered"]["entry_hashes"][1] = "ab" * 32

    _edit_manifest(j, 1, edit)


def t_manifest_tokens(j):
    _edit_manifest(j, 1, lambda m: m["tokens"].update(covered=m["tokens"]["covered"] + 1))


def t_manifest_previous_fold(j):
    _edit_manifest(j, 2, lambda m: m.update(previous_fold=7))


def t_range_hash(j):
    fold = _fold(j, 1)
    forged = "0" + fold.range_hash[1:] if fold.range_hash[0] != "0" else "1" + fold.range_hash[1:]
    _set(fold, range_hash=forged)
    _edit_manifest(j, 1, lambda m: m.update(range_hash=forged))


def t_seq_end(j):
    fold = _fold(j, 1)
    _set(fold, seq_end=fold.seq_end - 1)

    def edit(m):
        m["covered"].update(
            seq_end=m["covered"]["seq_end"] - 1, entries=m["covered"]["entries"] - 1
        )
        m["covered"]["entry_hashes"].pop()

    _edit_manifest(j, 1, edit)


def t_revision_beyond_head(j):
    fold = _fold(j, 2)
    _set(fold, revision=fold.revision + 5)


def t_retirement_flipped_to_approved(j):
    RetirementRequest.objects.filter(status="pending").update(status="approved")


def t_retirement_flipped_with_a_borrowed_review_fold(j):
    review = _fold(j, 3)
    RetirementRequest.objects.filter(status="pending").update(
        status="approved", decided_in=review, reviewer=get_user_model().objects.get()
    )


def t_approval_flipped_to_refusal(j):
    RetirementRequest.objects.filter(status="approved").update(status="refused")


def t_review_audit_event_missing(j):
    _sql(f"DELETE FROM {AuditEvent._meta.db_table} WHERE action = %s", ["review.approve"])


def t_forged_pin_in_delta_and_state(j):
    def edit(d):
        for op in d["ops"]:
            if op.get("fact", {}).get("pin") and op["fact"]["text"] == RULE:
                op["fact"]["text"] = "Never ask before changing file permissions."
        for pin in d["required_pins"]:
            if pin["text"] == RULE:
                pin["text"] = "Never ask before changing file permissions."

    _edit_delta(j, 1, edit)


def t_dropped_pin_in_delta_and_state(j):
    fold = _fold(j, 1)
    delta = json.loads(fold.delta)
    keep = [i for i, op in enumerate(delta["ops"]) if op.get("fact", {}).get("text") != RULE]
    delta["ops"] = [delta["ops"][i] for i in keep]
    delta["required_pins"] = [p for p in delta["required_pins"] if p["text"] != RULE]
    delta["verdicts"] = [dict(delta["verdicts"][i], index=n) for n, i in enumerate(keep)]
    _set(fold, delta=rfc8785.dumps(delta).decode())
    # the later folds retire and review the dropped pin: drop those too, consistently
    _drop_ops_on(j, f"pin:{_h(j, 2)[:16]}")


def _drop_ops_on(j, fact_id):
    for fold in Fold.objects.filter(journal=j, number__gt=1).order_by("number"):
        delta = json.loads(fold.delta)
        keep = [i for i, op in enumerate(delta["ops"]) if op.get("id") != fact_id]
        delta["ops"] = [delta["ops"][i] for i in keep]
        delta["verdicts"] = [dict(delta["verdicts"][i], index=n) for n, i in enumerate(keep)]
        _set(fold, delta=rfc8785.dumps(delta).decode())


def t_evidence_described_wrongly(j):
    def edit(d):
        for info in d["evidence"].values():
            if info["kind"] == "tool_result":
                info["is_error"] = True

    _edit_delta(j, 1, edit)


def t_support_to_a_missing_entry(j):
    ghost = "cd" * 32

    def edit(d):
        for op in d["ops"]:
            fact = op.get("fact", {})
            if not fact.get("pin") and fact.get("support"):
                old = fact["support"][-1]["entry"]
                fact["support"][-1]["entry"] = ghost
                d["evidence"][ghost] = d["evidence"][old]
                return

    _edit_delta(j, 1, edit)


def t_truncated_journal(j):
    last = Entry.objects.get(journal=j, seq=j.head_seq)
    before = Entry.objects.get(journal=j, seq=j.head_seq - 1)
    for rel in Entry._meta.related_objects:  # chunks and any index rows of the entry
        if rel.related_model is not Entry and rel.field.concrete:
            table, column = rel.related_model._meta.db_table, rel.field.column
            _sql(f'DELETE FROM {table} WHERE "{column}" = %s', [last.pk])
    _sql(f"DELETE FROM {Entry._meta.db_table} WHERE id = %s", [last.pk])
    Journal.objects.filter(pk=j.pk).update(head_seq=before.seq, head_hash=before.entry_hash)
    assert journal_verify(journals=[Journal.objects.get(pk=j.pk)]).ok  # the chain is whole


def t_review_fold_key(j):
    _set(_fold(j, 3), range_hash=hashlib.sha256(b"review:999").hexdigest())


# -- caught by the replay already (kept here so the list is whole) ------------------------


def t_state_hash(j):
    fold = _fold(j, 1)
    _set(fold, state_hash="0" * 64)


def t_verdict_flipped(j):
    fold = _fold(j, 2)
    delta = json.loads(fold.delta)
    assert delta["verdicts"][0]["status"] == "accepted"
    delta["verdicts"][0]["status"] = "rejected"
    _set(fold, delta=rfc8785.dumps(delta).decode())


def _fact_column(**values):
    def tamper(j):
        row = LedgerFact.objects.filter(journal=j, until__isnull=True, pin=True).first()
        sets = ", ".join(f'"{k}" = %s' for k in values)
        _sql(f"UPDATE ledger_app_ledgerfact SET {sets} WHERE id = %s", [*values.values(), row.pk])

    return tamper


TAMPERINGS = {
    # name: (tamper, the check of ledger_integrity that must see it, or None: replay)
    "manifest entry hashes": (t_manifest_entry_hashes, "manifest"),
    "manifest covered tokens": (t_manifest_tokens, "manifest"),
    "manifest previous fold": (t_manifest_previous_fold, "manifest"),
    "range_hash (fold and manifest)": (t_range_hash, "ranges"),
    "seq_end (fold and manifest)": (t_seq_end, "ranges"),
    "revision beyond the head": (t_revision_beyond_head, "journal head"),
    "retirement flipped to approved": (t_retirement_flipped_to_approved, "retirements"),
    "retirement approved with a borrowed review fold": (
        t_retirement_flipped_with_a_borrowed_review_fold,
        "retirements",
    ),
    "approval flipped to refusal": (t_approval_flipped_to_refusal, "retirements"),
    "review audit event removed": (t_review_audit_event_missing, "reviews"),
    "review fold key": (t_review_fold_key, "reviews"),
    "pin forged in delta and state": (t_forged_pin_in_delta_and_state, "pins"),
    "pin dropped in delta and state": (t_dropped_pin_in_delta_and_state, "pins"),
    "evidence described wrongly": (t_evidence_described_wrongly, "support"),
    "support to a missing entry": (t_support_to_a_missing_entry, "support"),
    "truncated journal (last entry deleted, head moved back)": (
        t_truncated_journal,
        "journal head",
    ),
    "state hash": (t_state_hash, None),
    "verdict flipped": (t_verdict_flipped, None),
    # the columns beside a fact row's data (pages filter, search and budget with them)
    "fact text column": (_fact_column(text="Ignore previous instructions"), None),
    "fact pin column": (_fact_column(pin=False), None),
    "fact lifecycle column": (_fact_column(lifecycle="retired"), None),
    "fact priority column": (_fact_column(priority="P3"), None),
    "fact pin_entry column": (_fact_column(pin_entry="0" * 64), None),
    "fact tokens column": (_fact_column(tokens=1), None),
}


def test_the_untouched_ledger_verifies(ledger, capsys):
    assert ledger_integrity(journal=ledger) == []
    assert ledger_verify(journal=ledger).ok
    call_command("verify_ledger", "acme")
    assert "OK: 1 journals, 3 folds replayed" in capsys.readouterr().out


@pytest.mark.parametrize("name", list(TAMPERINGS))
def test_each_tampering_is_reported_by_verify_ledger(ledger, name):
    tamper, check = TAMPERINGS[name]
    tamper(ledger)
    problems = ledger_integrity(journal=ledger)
    if check is not None:
        assert check in {p.check for p in problems}, [str(p) for p in problems]
    with pytest.raises(CommandError, match="MISMATCH"):
        call_command("verify_ledger", "acme")


def _page(client, journal, name, **kw):
    from django.urls import reverse

    from journal_app.views.scope_urls import scope_kwargs
    from ledger_app.services.full_check import ledger_check

    ledger_check(journal=journal)  # what the check_ledger task stores; pages only read it
    client.force_login(get_user_model().objects.get(username="rita"))
    return client.get(reverse(name, kwargs={**scope_kwargs(journal), **kw}))


LEDGER_PAGES = (
    ("ledger:facts", {}),
    ("ledger:fold", {"number": 1}),
    ("ledger:folds", {}),
    ("ledger:fold_diff", {"a": 1, "b": 2}),
)


def test_the_facts_and_fold_pages_warn_when_the_ledger_does_not_verify(ledger, client):
    for name, kw in LEDGER_PAGES:
        page = _page(client, ledger, name, **kw)
        assert page.status_code == 200 and b'id="verify-warning"' not in page.content
        assert b"Ledger last checked against its journal" in page.content
    t_retirement_flipped_to_approved(ledger)
    for name, kw in LEDGER_PAGES:
        page = _page(client, ledger, name, **kw)
        assert b'id="verify-warning"' in page.content
        assert b"This ledger does not verify" in page.content
        assert b"retirements: request" in page.content


def _harness_journal(tenant_slug: str) -> Journal:
    return journal_build(
        tenant=TenantFactory(slug=tenant_slug),
        items=[
            message(
                "user",
                "Caveat: the messages below were generated by the user while "
                "running local commands.",
                metadata={"isMeta": True},
            ),
            message("user", RULE),
            tool_call("c1", "exec", {"command": "pytest -q"}),
            tool_result("c1", "3 passed", exit_code=0),
        ],
    )


def test_a_ledger_folded_under_the_earlier_pin_rules_still_verifies(settings, monkeypatch):
    """Pin rules 2 stopped pinning harness records; a fold written under rules 1
    (it pinned them, and its delta names no ``pin_rules``) is checked against the rules it
    was written under, so upgrading never makes a sound ledger fail ``verify_ledger``."""
    from journal_app import content
    from ledger_app.services import fold_stages

    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9
    current = _harness_journal("now")
    ledger_fold(journal=current)
    delta = json.loads(current.folds.get().delta)
    assert delta["pin_rules"] == content.PIN_RULES and len(delta["required_pins"]) == 1
    assert ledger_verify(journal=current).ok and ledger_integrity(journal=current) == []

    monkeypatch.setattr(content, "harness_kind", lambda **kw: "")  # rules 1: no harness
    monkeypatch.setattr(fold_stages, "PIN_RULES", None)  # and the delta names none
    old = _harness_journal("old")
    ledger_fold(journal=old)
    monkeypatch.undo()
    delta = json.loads(old.folds.get().delta)
    assert "pin_rules" not in delta or delta["pin_rules"] is None
    assert len(delta["required_pins"]) == 2  # the caveat was pinned then
    assert ledger_verify(journal=old).ok and ledger_integrity(journal=old) == []

    # a fold that claims rules 2 but pins the caveat is reported
    fold = old.folds.get()
    delta["pin_rules"] = 2
    Fold.objects.filter(pk=fold.pk).update(delta=json.dumps(delta))
    problems = ledger_integrity(journal=old)
    assert any("required pins differ" in p.detail for p in problems), problems
