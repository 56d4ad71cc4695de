"""Every corpus transcript imports, verifies and folds, with its pins verbatim (issue 2)."""

import pytest

from journal_app.models import Entry
from journal_app.rounds import group_rounds
from journal_app.services import journal_import, journal_verify
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
def test_it_imports_verifies_and_folds(path):
    result = journal_import(path=path, tenant="corpus")
    journal = result.journal
    entries = list(Entry.objects.filter(journal=journal).order_by("seq"))
    assert len(entries) == len(result.parsed.entries) == journal.head_seq
    assert journal_verify(journals=[journal]).ok
    fold = ledger_fold(journal=journal).fold
    assert fold is not None and fold.outcome == "fallback"
    facts = fold.state_dict["facts"]
    pins = {f["support"][0]["entry"]: f["text"] for f in facts.values() if f.get("pin")}
    covered = [e for e in entries if e.seq <= fold.seq_end]
    for e in covered:
        if e.authoritative and e.text:
            assert pins[e.entry_hash] == e.text
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
def test_the_claude_file_ending_on_three_unanswered_calls_shows_exactly_those_as_interrupted():
    path = CORPUS / "claude-code-jsonl" / "claude-code-session-unanswered-tool-uses.jsonl"
    journal = journal_import(path=path, tenant="corpus").journal
    entries = list(Entry.objects.filter(journal=journal).order_by("seq"))
    rounds = group_rounds(entries)
    interrupted = [c for r in rounds for c in r.interrupted_call_ids]
    assert len(interrupted) == 3
    assert rounds[-1].at_tail and rounds[-1].interrupted_call_ids == interrupted
    fold = ledger_fold(journal=journal).fold
    assert fold.seq_end < rounds[-1].first_seq
