"""Every corpus transcript imports, verifies and folds, with its pins verbatim (12).

Through the README's command: ``import_journal`` then ``compact``, with no model configured,
every fold is written by the offline writer (never mechanical unless labelled as a
fallback with its reason), and ``compact`` afterwards says what it did.
"""

import io

import pytest
from django.core.management import call_command

from journal_app.content import pin_text
from journal_app.models import Entry
from journal_app.rounds import group_rounds
from journal_app.services import journal_import, journal_verify
from ledger_app.models import Fold
from ledger_app.services import ledger_fold
from tests.conftest import CORPUS

SOURCES = sorted(
    [
        p
        for p in CORPUS.glob("*/*")
        if p.is_file()
        and p.suffix in (".json", ".jsonl", ".traj")
        and p.parent.name != "opencode-export"
    ]
    + [CORPUS / "opencode-export" / "khala-sessions"]
)


@pytest.mark.django_db
@pytest.mark.parametrize("path", SOURCES, ids=[p.name for p in SOURCES])
def test_it_imports_verifies_and_folds(path, settings):
    settings.OPENAI_BASE_URL = ""  # the embedded default: no model configured
    out = io.StringIO()
    call_command(
        "import_journal",
        str(path),
        "--tenant",
        "corpus",
        "--create-tenant",
        "--no-progress",
        stdout=out,
    )
    summary = out.getvalue()
    result = journal_import(path=path, tenant="corpus")  # idempotent: the same journals
    assert result.append.appended == 0
    assert sum(j.head_seq for j in result.journals) == result.entries
    for journal in result.journals:
        assert f"folded     {journal.scope_label}: " in summary
        folded_at_import = Fold.objects.filter(journal=journal, kind="fold").count()
        if folded_at_import:
            assert "by writer offline" in summary
        compacted = io.StringIO()
        call_command("compact", journal.scope_label, stdout=compacted)
        said = compacted.getvalue()
        assert f"{journal.scope_label}: writer offline" in said
        if folded_at_import and "fold(s) by writer offline over seq" not in said:
            assert f"already folded in {folded_at_import} fold(s) by offline" in said
        _check_journal(journal)


def _check_journal(journal):
    entries = list(Entry.objects.filter(journal=journal).order_by("seq"))
    assert len(entries) == journal.head_seq
    assert journal_verify(journals=[journal]).ok
    folds = list(Fold.objects.filter(journal=journal, kind="fold").order_by("number"))
    assert folds, "compact folded nothing"
    for f in folds:
        assert f.writer == "offline", f"fold {f.number} written by {f.writer}"
        assert f.outcome != "fallback" or f.manifest.get("note"), "a fallback says why"
    fold = folds[-1]
    facts = Fold.objects.filter(journal=journal).order_by("-number").first().state_dict["facts"]
    pins = {f["support"][0]["entry"]: f["text"] for f in facts.values() if f.get("pin")}
    covered = [e for e in entries if e.seq <= fold.seq_end]
    for e in covered:
        if e.authoritative and e.text:
            # pin rules 3: verbatim minus the harness blocks inside (docs/design.md 5.2)
            assert pins[e.entry_hash] == pin_text(e.text)
            assert "# Context from my IDE setup" not in pins[e.entry_hash] or (
                pins[e.entry_hash] == e.text
            )
    # every call in the covered range is paired with its result or stated as interrupted
    results = {e.tool_call_id for e in covered if e.kind == "tool_result"}
    outcomes = {f["support"][0]["entry"]: f for f in facts.values() if f["id"].startswith("tool:")}
    for e in covered:
        if e.kind == "tool_call":
            if e.tool_call_id in results:
                continue
            assert outcomes[e.entry_hash]["outcome"] == "interrupted"
    # derived records are never support
    derived = {e.entry_hash for e in entries if e.derived}
    assert not derived & {s["entry"] for f in facts.values() for s in f["support"]}
    rounds = group_rounds(entries)
    assert sum(len(r.seqs) for r in rounds) == len(entries)


@pytest.mark.django_db
def test_an_opencode_export_of_five_sessions_becomes_five_lanes():
    result = journal_import(path=CORPUS / "opencode-export" / "khala-sessions", tenant="corpus")
    lanes = [j.lane for j in result.journals]
    assert lanes == ["brave-wizard", "gentle-tiger", "swift-falcon", "tidy-panda", "eager-knight"]
    for journal in result.journals:
        ids = {e.meta_dict.get("session_id") for e in Entry.objects.filter(journal=journal)}
        assert len(ids - {None}) == 1, "one OpenCode session per lane"


@pytest.mark.django_db
def test_harness_nags_are_not_pinned_and_the_submission_is_an_artifact():
    path = (
        CORPUS
        / "mini-swe-agent-traj"
        / "minisweagent-gemini3-requests-1142-oversized-output.traj.json"
    )
    journal = journal_import(path=path, tenant="corpus").journal
    nags = [
        e
        for e in Entry.objects.filter(journal=journal, kind="message", role="user")
        if e.meta_dict.get("format_error")
    ]
    assert len(nags) == 2 and not any(e.authoritative for e in nags)
    last = Entry.objects.get(journal=journal, seq=journal.head_seq)
    assert last.kind == "tool_result" and last.artifact is not None
    assert last.artifact.byte_size == len(last.text.encode())


@pytest.mark.django_db
def test_the_claude_file_ending_on_three_unanswered_calls_shows_exactly_those_as_interrupted():
    path = CORPUS / "claude-code-jsonl" / "claude-code-session-unanswered-tool-uses.jsonl"
    journal = journal_import(path=path, tenant="corpus").journal
    entries = list(Entry.objects.filter(journal=journal).order_by("seq"))
    rounds = group_rounds(entries)
    interrupted = [c for r in rounds for c in r.interrupted_call_ids]
    assert len(interrupted) == 3
    assert rounds[-1].at_tail and rounds[-1].interrupted_call_ids == interrupted
    # an imported transcript is a run that stopped: the tail is folded as three calls that
    # did not complete (open obligations), never as a complete round
    assert journal.ended_at is not None
    ledger_fold(journal=journal)
    fold = Fold.objects.filter(journal=journal, kind="fold").order_by("-number").first()
    assert fold.seq_end == journal.head_seq
    calls = {
        e.entry_hash for e in entries if e.tool_call_id in interrupted and e.kind == "tool_call"
    }
    open_ = [f for f in fold.state_dict["facts"].values() if f.get("outcome") == "interrupted"]
    assert {f["support"][0]["entry"] for f in open_} == calls
    assert all(f["category"] == "open_obligation" and f["lifecycle"] == "active" for f in open_)
    assert fold.manifest["interrupted_calls"] == interrupted


@pytest.mark.django_db
def test_a_live_journal_keeps_its_unanswered_tail_out_of_the_fold():
    from journal_app.formats.base import message, tool_call
    from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure

    j = journal_ensure(session=session_ensure(tenant=tenant_ensure(slug="live"), key="s"))
    journal_append(
        journal=j, items=[message("user", "go"), tool_call("c", "exec", {"command": "make"})]
    )
    fold = ledger_fold(journal=j).fold
    assert fold.seq_end == 1 and j.ended_at is None
