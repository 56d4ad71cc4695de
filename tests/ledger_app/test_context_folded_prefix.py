"""A build over a folded journal (docs/design.md 6, "What a build reads"): the rounds the fold
left out cost no shrinking, the rows are parsed only as far as the build reads them, and
the result is the one the eager read gave (every view parsed whole)."""

from __future__ import annotations

import pytest

from journal_app.models import Entry
from journal_app.services import tenant_ensure
from ledger_app.context import build_context
from ledger_app.context.build_state import Builder
from ledger_app.context.compaction import cut, restore, shrink
from ledger_app.entry_view import EntryView, RowView
from ledger_app.services import context as context_service
from ledger_app.services import context_reads, entry_view
from ledger_app.services.context import context_preview
from ledger_app.validation import Meter
from tests.ledger_app.test_context import views
from tests.ledger_app.test_context_metadata_prefix import folded_journal
from tests.ledger_app.test_context_prefix import _items
from tests.support.offline_fold import offline_fold


def _folded(rounds: int, share: float) -> tuple[list[EntryView], dict, int]:
    entries = views(_items(rounds, 0))
    ledger, covered = offline_fold(entries, upto=int(entries[-1].seq * share))
    return entries, ledger, covered


def _in_rounds(seq: int, ranges: list[list[int]]) -> bool:
    return any(a <= seq <= b for a, b in ranges)


def test_a_round_the_fold_left_out_is_not_shrunk():
    """Step 3 shrank the results of rounds step 4 had already left out (no effect on the
    request, one decision each): at 40 rounds, 30 such decisions beside the 6 real ones."""
    entries, ledger, covered = _folded(40, 0.8)
    result = build_context(
        entries=entries,
        ledger=ledger,
        covered_upto=covered,
        working_budget=3_000,
        hard_limit=200_000,
        tail_tokens=500,
    )
    assert result.status == "ok", result.failure
    folded = result.debug_trace["rounds"]["folded_out"]
    assert len(folded) == 30
    shrunk = [d for d in result.debug_trace["decisions"] if d["action"] == "shrink"]
    assert len(shrunk) == 6
    assert all(d["effect"] < 0 for d in shrunk)
    assert not any(_in_rounds(d["seqs"][0], folded) for d in shrunk)


def test_a_left_out_round_that_comes_back_shows_its_old_results_shrunk():
    """:func:`restore` brings a left-out round back as step 3 would have shown it: its
    results the model answered after are shrunk (step 3 skipped it while it was out)."""
    entries, ledger, covered = _folded(40, 0.8)
    meter = Meter()
    b = Builder(
        entries=entries,
        ledger=ledger,
        covered_upto=covered,
        receipts={},
        resolve=None,
        working=3_000,
        hard=200_000,
        reserve=0,
        tail_tokens=500,
        fmt="openai",
        fold=None,
        meter=meter,
    )
    cut(b, 4, b.limit, covered)
    assert b.n_dropped == 30
    shrink(b, [p for p in b.plans if not p.protected], 3, b.limit, consumed_only=True)
    left_out = b.droppable[b.n_dropped - 1]
    assert {part.form for part in left_out.parts if part.kind == "result"} == {"verbatim"}
    restore(b, 6, 10**9)  # room for every round
    assert b.n_dropped == 0
    forms = {part.form for part in left_out.parts if part.kind == "result"}
    assert forms == {"shrunk"}
    assert not any(p.dropped for p in b.plans)


def _journal(tenant, key: str, rounds: int):
    """A system prompt, a goal and ``rounds`` rounds of reads, all but the last five folded."""
    return folded_journal(tenant, key, rounds, early=False)


def _eager(journal, revision):
    """The read before views were lazy: every row parsed whole (the service's own
    :func:`ledger_app.services.entry_view`), counts and receipts as the build reads them."""
    _, stored, receipts = context_reads.read_entries(journal, revision)
    rows = Entry.objects.filter(journal=journal, seq__lte=revision).order_by("seq")
    eager = [entry_view(e) for e in rows.select_related("journal")]
    assert all(type(v) is EntryView for v in eager)
    return eager, stored, receipts


def _whole(read):
    """A :func:`read_for_build` stand-in that reads every entry whole (no folded prefix)."""

    def whole(journal, revision, **_):
        return context_reads.BuildReads(*read(journal, revision))

    return whole


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_a_partly_folded_journal_builds_as_with_every_entry_parsed(
    monkeypatch, settings, tmp_path, fmt
):
    settings.MEDIA_ROOT = tmp_path / "media"
    journal = _journal(tenant_ensure(slug="prefix"), "s1", 40)
    budgets = {"working_budget": 3_000, "hard_limit": 3_000, "target_format": fmt}
    monkeypatch.setattr(context_service, "read_for_build", _whole(context_reads.read_entries))
    lazy = context_preview(journal=journal, views=("model", "debug"), **budgets)
    assert lazy.status == "ok", lazy.failure
    assert lazy.debug_trace["rounds"]["folded_out"]  # the fold's rounds are left out
    assert lazy.debug_trace["reads"]["metadata_only"] == 0
    monkeypatch.setattr(context_service, "read_for_build", _whole(_eager))
    eager = context_preview(journal=journal, views=("model", "debug"), **budgets)
    assert lazy.model_view == eager.model_view
    assert lazy.debug_trace == eager.debug_trace
    assert lazy.validation == eager.validation


@pytest.mark.django_db
@pytest.mark.parametrize(
    "fmt, working, hard",
    [
        ("openai", 3_000, 3_000),
        ("anthropic", 3_000, 3_000),
        # with the prefix out the request is under the limit: the cut still runs (cut_due)
        ("openai", 6_000, 8_000),
    ],
)
def test_the_folded_prefix_read_as_metadata_sends_the_request_of_a_whole_read(
    monkeypatch, settings, tmp_path, fmt, working, hard
):
    """docs/design.md 6, "The folded prefix": the rounds the fold covers before its window,
    read as metadata only, leave as one decision; the request sent is the one a whole read
    makes (step 4 left those rounds out there too, one decision each)."""
    settings.MEDIA_ROOT = tmp_path / "media"
    journal = _journal(tenant_ensure(slug="prefix"), "s1", 40)
    budgets = {"working_budget": working, "hard_limit": hard, "target_format": fmt}
    prefix = context_preview(journal=journal, views=("model", "debug"), **budgets)
    assert prefix.status == "ok", prefix.failure
    reads = prefix.debug_trace["reads"]
    assert reads["metadata_only"] > 0 and reads["loaded_after"] == 0
    monkeypatch.setattr(context_service, "read_for_build", _whole(context_reads.read_entries))
    whole = context_preview(journal=journal, views=("model", "debug"), **budgets)
    assert whole.debug_trace["reads"]["metadata_only"] == 0
    assert prefix.model_view == whole.model_view
    assert prefix.debug_trace["rounds"] == whole.debug_trace["rounds"]
    one = [d for d in prefix.debug_trace["decisions"] if d.get("rounds")]
    assert len(one) == 1
    first, last = one[0]["seqs"]
    per_round = [
        d
        for d in whole.debug_trace["decisions"]
        if d["action"] == "fold" and d.get("seqs") and first <= d["seqs"][0] <= last
    ]
    assert len(per_round) == one[0]["rounds"] > 1
    # the prefix is costed by its entries' stored counts, within 1% of the rounds' own costs
    exact = sum(d["effect"] for d in per_round)
    assert abs(one[0]["effect"] - exact) <= abs(exact) // 100
    # every other decision is the same, in the same order, from the same planned total on
    rest = [d for d in prefix.debug_trace["decisions"] if d is not one[0]]
    assert rest[1:] == [d for d in whole.debug_trace["decisions"] if d not in per_round][1:]
    assert rest[0]["action"] == "protect"


@pytest.mark.django_db
def test_the_rows_parsed_do_not_grow_with_the_folded_results(monkeypatch, settings, tmp_path):
    """Scaling shape: a build parses the meta of no tool result and renders the text of no
    call, at 20 rounds as at 80 (the results' bodies are read: their text is costed)."""
    settings.MEDIA_ROOT = tmp_path / "media"
    tenant = tenant_ensure(slug="prefix")
    real = context_reads.read_for_build
    seen: list[list[RowView]] = []

    def spy(journal, revision, **kwargs):
        out = real(journal, revision, **kwargs)
        seen.append(out.views)  # type: ignore[arg-type]
        return out

    monkeypatch.setattr(context_service, "read_for_build", spy)
    parsed = {}
    for rounds in (20, 80):
        journal = _journal(tenant, f"s{rounds}", rounds)
        result = context_preview(
            journal=journal, views=("model", "debug"), working_budget=3_000, hard_limit=3_000
        )
        assert result.status == "ok", result.failure
        made = seen[-1]
        assert all(isinstance(v, RowView) for v in made)
        results = [v for v in made if v.kind == "tool_result"]
        calls = [v for v in made if v.kind == "tool_call"]
        assert len(results) == rounds
        parsed[rounds] = (
            sum(1 for v in results if v._meta is not None),
            sum(1 for v in calls if v._text is not None),
        )
    assert parsed == {20: (0, 0), 80: (0, 0)}
