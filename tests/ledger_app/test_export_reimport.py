"""Export round trip into any tenant and session: journal, folds with
manifests, deltas and verdicts, retirements and decisions, comments and receipts."""

from __future__ import annotations

import hashlib
import io
import json

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from audit_app.models import Comment
from audit_app.services import annotation_add, comment_on_entry
from journal_app.formats.base import message
from journal_app.models import Entry, Journal, Membership
from journal_app.services import journal_append, journal_import
from ledger_app.comments import comment_on_fact
from ledger_app.models import Fold, FoldAttempt, LedgerFact, RetirementRequest, Verdict
from ledger_app.services import ledger_fold, retirement_review
from recovery_app.session_transfer import session_export
from tests.support.writers import ScriptedWriter

pytestmark = pytest.mark.django_db

SOURCE = "openai-chat-tool-calls/taubench-gpt4o-airline-task3.json"


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture(autouse=True)
def _other(db):
    """The tenant the exports are re-imported into (``import_journal`` refuses an unknown
    tenant unless ``--create-tenant`` is given)."""
    from journal_app.services import tenant_ensure

    tenant_ensure(slug="other")


def _original(corpus):
    """A corpus session with 3 folds, a decided and a pending retirement, comments, receipts."""
    j = journal_import(path=corpus / SOURCE, tenant="acme", session="air").journal
    ledger_fold(journal=j)
    pins = list(
        LedgerFact.objects.filter(journal=j, pin=True, until__isnull=True)
        .order_by("fact_id")
        .values_list("fact_id", flat=True)[:2]
    )
    assert len(pins) == 2
    journal_append(
        journal=j,
        items=[
            message("user", "Forget the first rule; it no longer applies."),
            message("user", "The second rule no longer applies either."),
        ],
    )
    evidence = list(j.entries.order_by("-seq").values_list("entry_hash", flat=True)[:2])
    ledger_fold(
        journal=j,
        writer=ScriptedWriter(
            [
                {"op": "retire", "id": pins[0], "evidence": [evidence[1]]},
                {"op": "retire", "id": pins[1], "evidence": [evidence[0]]},
            ]
        ),
    )
    rita = get_user_model().objects.create_user("rita", password="pw")
    Membership.objects.create(user=rita, tenant=j.session.tenant, role=Membership.Role.REVIEWER)
    first = RetirementRequest.objects.get(journal=j, fact_id=pins[0])
    retirement_review(request=first, actor=rita, decision="approve", comment="user said so")
    comment_on_fact(journal=j, fact_id=pins[1], author=rita, text="check with the user")
    comment_on_entry(entry=j.entries.get(seq=3), author=rita, text="the booking lookup")
    annotation_add(session=j.session, author=rita, verdict="good", note="kept the rules")
    Receipt = apps.get_model("recovery_app", "Receipt")
    Receipt.objects.create(
        journal=j,
        fold=Fold.objects.get(journal=j, number=2),
        outcome="nothing_found",
        reason="no match",
        snapshot={
            **j.scope_fields(),
            "scope": j.scope_label,
            "revision": 3,
            "head_hash": j.entries.get(seq=3).entry_hash,
        },
    )
    return Journal.objects.get(pk=j.pk), pins


def _exported(journal, tmp_path):
    out = io.BytesIO()
    session_export(session=journal.session, out=out)
    path = tmp_path / "air-export.jsonl"
    path.write_bytes(out.getvalue())
    return path


def _verdicts(journal):
    return [
        [(v["op"], v["status"]) for v in json.loads(f.delta)["verdicts"]]
        for f in Fold.objects.filter(journal=journal).order_by("number")
    ]


def _judgements(journal):
    """Every writer run's verdicts (keys left out: they carry entry hashes)."""
    return [
        (v.proposal.attempt.fold.number, v.proposal.kind, v.judge, v.op, v.claim, v.accepted)
        for v in Verdict.objects.filter(proposal__attempt__journal=journal)
        .select_related("proposal__attempt__fold")
        .order_by("proposal__attempt__pk", "proposal__round", "pk")
    ]


def _member_of_other(username: str, role: str) -> None:
    from journal_app.services import tenant_ensure

    user = get_user_model().objects.get(username=username)
    Membership.objects.create(user=user, tenant=tenant_ensure(slug="other"), role=role)


def test_it_reimports_the_ledger_into_another_tenant_and_session(corpus, tmp_path):
    original, pins = _original(corpus)
    path = _exported(original, tmp_path)
    _member_of_other("rita", Membership.Role.REVIEWER)  # the decision keeps its reviewer
    out = io.StringIO()
    call_command("import_journal", str(path), tenant="other", session="copy", stdout=out)
    assert "3 fold(s), 2 retirement request(s) (1 decided), 2 comment(s)" in out.getvalue()
    copy = Journal.objects.get(session__tenant__slug="other", session__key="copy")

    # the journal: re-hashed for the new scope, bodies byte for byte
    assert copy.head_seq == original.head_seq and copy.head_hash != original.head_hash
    old = list(original.entries.order_by("seq").values_list("entry_hash", "body_hash"))
    new = list(copy.entries.order_by("seq").values_list("entry_hash", "body_hash"))
    assert [b for _, b in old] == [b for _, b in new]
    assert not {h for h, _ in old} & {h for h, _ in new}
    remap = {o[:16]: n[:16] for (o, _), (n, _) in zip(old, new, strict=True)}

    # folds: same kinds, outcomes, verdicts; facts with the same texts, ids re-hashed
    fields = ("number", "kind", "outcome", "seq_start", "seq_end", "revision", "writer")
    assert list(Fold.objects.filter(journal=copy).values_list(*fields)) == list(
        Fold.objects.filter(journal=original).values_list(*fields)
    )
    assert _verdicts(copy) == _verdicts(original)
    assert ("retire", "pending") in _verdicts(copy)[1]
    assert FoldAttempt.objects.filter(journal=copy).count() == 2
    assert _judgements(copy) == _judgements(original) and _judgements(copy)
    hashes = {h for h, _ in new}
    cited = [h for v in Verdict.objects.filter(proposal__attempt__journal=copy) for h in v.support]
    assert cited and set(cited) <= hashes
    old_facts = sorted(
        LedgerFact.objects.filter(journal=original, until__isnull=True).values_list(
            "text", "lifecycle", "priority"
        )
    )
    assert old_facts and old_facts == sorted(
        LedgerFact.objects.filter(journal=copy, until__isnull=True).values_list(
            "text", "lifecycle", "priority"
        )
    )
    new_pins = [f"pin:{remap[p[4:]]}" for p in pins]
    assert LedgerFact.objects.get(journal=copy, fact_id=new_pins[0], until=None).lifecycle == (
        "retired"
    )

    # retirements and their decisions
    got = {
        r.fact_id: (r.status, r.comment, r.reviewer and r.reviewer.username, r.decided_in_id)
        for r in RetirementRequest.objects.filter(journal=copy)
    }
    review = Fold.objects.get(journal=copy, kind="review")
    assert got == {
        new_pins[0]: ("approved", "user said so", "rita", review.pk),
        new_pins[1]: ("pending", "", None, None),
    }

    # comments (on a fact and on an entry) and receipts
    comments = {
        (c.fact_id, c.entry and c.entry.seq, c.text) for c in Comment.objects.filter(journal=copy)
    }
    assert comments == {(new_pins[1], None, "check with the user"), ("", 3, "the booking lookup")}
    assert copy.session.annotations.get().note == "kept the rules"
    Receipt = apps.get_model("recovery_app", "Receipt")
    assert (
        Receipt.objects.filter(journal=copy).count()
        == Receipt.objects.filter(journal=original).count()
    )
    mine = Receipt.objects.get(journal=copy, reason="no match")
    assert mine.fold == Fold.objects.get(journal=copy, number=2)
    assert (mine.snapshot["tenant"], mine.snapshot["session"]) == ("other", "copy")
    assert mine.snapshot["head_hash"] == copy.entries.get(seq=3).entry_hash

    # both verify commands are clean on the copy
    call_command("verify_journal", "other/copy", stdout=io.StringIO())
    call_command("verify_ledger", "other/copy", stdout=io.StringIO())


def test_reimporting_into_the_original_scope_changes_nothing(corpus, tmp_path):
    original, _ = _original(corpus)
    path = _exported(original, tmp_path)
    before = (Fold.objects.count(), RetirementRequest.objects.count(), Comment.objects.count())
    out = io.StringIO()
    call_command("import_journal", str(path), tenant="acme", session="air", stdout=out)
    assert "the exported ledger is already here" in out.getvalue()
    assert before == (
        Fold.objects.count(),
        RetirementRequest.objects.count(),
        Comment.objects.count(),
    )


def test_importing_an_export_again_into_its_copy_changes_nothing(corpus, tmp_path):
    original, _ = _original(corpus)
    path = _exported(original, tmp_path)
    call_command("import_journal", str(path), tenant="acme", session="copy", stdout=io.StringIO())
    before = (Fold.objects.count(), RetirementRequest.objects.count(), Comment.objects.count())

    out = io.StringIO()
    call_command("import_journal", str(path), tenant="acme", session="copy", stdout=out)

    assert "the exported ledger is already here" in out.getvalue()
    assert before == (
        Fold.objects.count(),
        RetirementRequest.objects.count(),
        Comment.objects.count(),
    )


def test_an_export_into_a_session_with_another_ledger_is_a_conflict(corpus, tmp_path):
    original, _ = _original(corpus)
    path = _exported(original, tmp_path)
    call_command("import_journal", str(path), tenant="acme", session="copy", stdout=io.StringIO())
    copy = Journal.objects.get(session__key="copy")
    last = Fold.objects.filter(journal=copy).order_by("-number").first()
    Fold.objects.filter(pk=last.pk).update(state_hash="0" * 64)  # a different ledger there

    with pytest.raises(CommandError, match="already has a ledger of 3 fold"):
        call_command("import_journal", str(path), tenant="acme", session="copy")


def test_a_tampered_verdict_refuses_the_whole_import(corpus, tmp_path):
    original, _ = _original(corpus)
    path = _exported(original, tmp_path)
    lines = path.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    fold = next(r for r in records if r["type"] == "fold" and r["number"] == 2)
    delta = json.loads(fold["delta"])
    delta["verdicts"][-1]["status"] = "accepted"  # the pending retirement, forged
    fold["delta"] = json.dumps(delta, sort_keys=True, separators=(",", ":"))
    fold["delta_hash"] = hashlib.sha256(fold["delta"].encode()).hexdigest()
    body = "".join(json.dumps(r, ensure_ascii=True, sort_keys=True) + "\n" for r in records[:-1])
    end = {**records[-1], "sha256": hashlib.sha256(body.encode()).hexdigest()}
    path.write_text(body + json.dumps(end, sort_keys=True) + "\n")
    entries = Entry.objects.count()
    with pytest.raises(CommandError, match="nothing written.*fold 2.*verdicts"):
        call_command("import_journal", str(path), tenant="other", session="copy")
    assert Entry.objects.count() == entries
    assert not Journal.objects.filter(session__tenant__slug="other").exists()


@pytest.mark.parametrize(
    "source",
    [
        "claude-code-jsonl/claude-code-session-frontend-refactor.jsonl",
        "swe-agent-traj/sweagent-function-calling-marshmallow-1867.traj",
    ],
)
def test_compacted_and_consolidated_sessions_come_back(corpus, tmp_path, source):
    from ledger_app.services import ledger_compact, ledger_consolidate, ledger_refold_apply

    j = journal_import(path=corpus / source, tenant="acme", session="long").journal
    ledger_compact(journal=j, writer="mechanical", fold_tokens=4000)
    ledger_refold_apply(journal=j, fold=Fold.objects.get(journal=j, number=1), writer="offline")
    ledger_consolidate(journal=j, target_tokens=200, start_tokens=0)
    kinds = set(Fold.objects.filter(journal=j).values_list("kind", flat=True))
    assert kinds == {"fold", "refold", "consolidation"}
    assert Fold.objects.filter(journal=j).count() > 3
    path = _exported(j, tmp_path)
    call_command("import_journal", str(path), tenant="other", session="copy", stdout=io.StringIO())
    copy = Journal.objects.get(session__tenant__slug="other", session__key="copy")
    assert _verdicts(copy) == _verdicts(j)
    assert _judgements(copy) == _judgements(j)
    assert sorted(
        LedgerFact.objects.filter(journal=copy, until=None).values_list("text", "lifecycle")
    ) == sorted(LedgerFact.objects.filter(journal=j, until=None).values_list("text", "lifecycle"))
    call_command("verify_journal", "other/copy", stdout=io.StringIO())
    call_command("verify_ledger", "other/copy", stdout=io.StringIO())


def test_an_export_never_lends_a_decision_to_someone_who_is_not_a_reviewer_here(corpus, tmp_path):
    """A crafted or foreign export names a reviewer: on re-import the decision is kept (it
    is in the verified ledger) but credited to nobody unless that user is an active reviewer
    of the target tenant; the summary lists the skip."""
    original, pins = _original(corpus)
    path = _exported(original, tmp_path)
    _member_of_other("rita", Membership.Role.OPERATOR)  # a member, but not a reviewer here
    out = io.StringIO()
    call_command("import_journal", str(path), tenant="other", session="copy", stdout=out)
    copy = Journal.objects.get(session__tenant__slug="other", session__key="copy")
    decided = RetirementRequest.objects.get(journal=copy, status="approved")
    assert decided.reviewer is None
    from audit_app.models import AuditEvent

    event = AuditEvent.objects.get(action="review.approve", object_id=str(decided.pk))
    assert event.actor is None
    assert "not an active reviewer of this tenant" in out.getvalue()


def test_a_session_with_artifacts_comes_back_with_its_token_figures(corpus, tmp_path):
    j = journal_import(
        path=corpus / "codex-rollout-jsonl/codex-vscode-long-monorepo-session.jsonl",
        tenant="acme",
        session="cx",
    ).journal
    assert j.entries.filter(artifact__isnull=False).exists()
    path = _exported(j, tmp_path)
    call_command("import_journal", str(path), tenant="other", session="copy", stdout=io.StringIO())
    copy = Journal.objects.get(session__tenant__slug="other", session__key="copy")
    figures = ("seq", "token_count", "token_source")
    assert list(copy.entries.order_by("seq").values_list(*figures)) == list(
        j.entries.order_by("seq").values_list(*figures)
    )
    call_command("verify_journal", "other/copy", stdout=io.StringIO())
    call_command("verify_ledger", "other/copy", stdout=io.StringIO())
