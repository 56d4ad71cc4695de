"""Fold cost flat in ledger size: what one fold reads, and the bench's seed."""

import json
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from bench import fold_scaling
from bench.generator import iter_session
from journal_app.services import (
    journal_append,
    journal_ensure,
    journal_import,
    session_ensure,
    tenant_ensure,
)
from ledger_app import reducer
from ledger_app.mechanical_writer import MechanicalWriter
from ledger_app.models import Fold, LedgerFact
from ledger_app.offline import OfflineWriter
from ledger_app.services import ledger_fold, ledger_state, ledger_verify
from ledger_app.services.entries import entry_view
from ledger_app.services.fold import consolidation_due
from ledger_app.services.state import latest_fold, writer_state
from ledger_app.services.store import evictable_tokens

pytestmark = pytest.mark.django_db


def _journal(key, n, seed=18):
    tenant = tenant_ensure(slug="acme")
    journal = journal_ensure(session=session_ensure(tenant=tenant, key=key))
    journal_append(journal=journal, items=list(iter_session(n, seed=seed)))
    journal.refresh_from_db()
    return journal


def _fold_queries(journal, upto):
    with CaptureQueriesContext(connection) as ctx:
        result = ledger_fold(journal=journal, upto=upto, writer="offline", recover=False)
    assert result.created, result.reason
    return len(ctx.captured_queries), result.fold


def test_seeded_ledger_has_the_state_hash_and_checkpoint_of_its_facts():
    j = _journal("seed", 500)
    end = fold_scaling.seed_ledger(j, 800, template_entries=200)
    head = latest_fold(j)
    assert head.seq_end == end and head.writer == "bench-seed"
    state = ledger_state(j)
    assert len(state["facts"]) >= 800
    assert head.state_hash == reducer.state_hash(state)
    assert Fold.objects.get(pk=head.pk).state == reducer.state_bytes(state).decode()
    # the next fold continues from it with the right hash
    result = ledger_fold(journal=j, upto=end + 24, writer="offline", recover=False)
    assert result.fold.state_hash == reducer.state_hash(ledger_state(j))


def test_one_fold_runs_the_same_queries_at_two_ledger_sizes():
    """The query count of a fold does not grow with the ledger."""
    small, large = _journal("small", 500), _journal("large", 500)
    ends = {
        "small": fold_scaling.seed_ledger(small, 250, template_entries=200),
        "large": fold_scaling.seed_ledger(large, 2_500, template_entries=200),
    }
    facts = {
        name: LedgerFact.objects.filter(journal=j, until__isnull=True).count()
        for name, j in (("small", small), ("large", large))
    }
    assert facts["large"] >= 8 * facts["small"]
    counts = {"small": [], "large": []}
    for _ in range(3):  # the same entries (same seed) at both sizes
        for name, j in (("small", small), ("large", large)):
            n, fold = _fold_queries(j, ends[name] + 24)
            ends[name] = fold.seq_end
            counts[name].append(n)
    assert counts["small"] == counts["large"], counts


def test_a_fold_loads_only_the_facts_its_writer_declares(settings):
    """The writer state holds the declared keys' facts, not every command's."""
    j = _journal("keys", 500)
    end = fold_scaling.seed_ledger(j, 1_500, template_entries=200)
    keyed = LedgerFact.objects.filter(
        journal=j, until__isnull=True, lifecycle="active", command_key__gt=""
    ).count()
    assert keyed > 60
    views = [entry_view(e) for e in j.entries.filter(seq__gt=end, seq__lte=end + 24)]
    narrow = writer_state(j, latest_fold(j), keys=OfflineWriter().state_keys(views))
    broad = writer_state(j, latest_fold(j))
    assert len(narrow["facts"]) < 40 < keyed <= len(broad["facts"])
    # and the offline writer proposes the same ops from either
    assert OfflineWriter().propose(views, narrow) == OfflineWriter().propose(views, broad)


def test_narrow_and_broad_writer_states_give_the_same_ops_over_a_session():
    """Fold a generated session; at each fold the offline and mechanical writers propose
    the same ops from the declared facts as from every keyed fact (state_keys is complete)."""
    j = _journal("same-ops", 700, seed=7)
    upto, compared = 0, 0
    while upto < j.head_seq:
        upto += 24
        head = latest_fold(j)
        start = (head.seq_end or 0) + 1 if head else 1
        views = [entry_view(e) for e in j.entries.filter(seq__gte=start, seq__lte=upto)]
        for writer in (OfflineWriter(), MechanicalWriter()):
            narrow = writer_state(j, head, keys=writer.state_keys(views))
            broad = writer_state(j, head)
            assert writer.propose(views, narrow) == writer.propose(views, broad)
            compared += 1
        result = ledger_fold(journal=j, upto=upto, writer="offline", recover=False)
        if result.fold is not None:
            upto = max(upto, result.fold.seq_end or upto)
    assert compared > 40


def test_evictable_figure_is_carried_and_equals_the_rows():
    j = _journal("evict", 300)
    upto = 0
    while upto < j.head_seq:
        upto += 24
        result = ledger_fold(journal=j, upto=upto, writer="offline", recover=False)
        if result.fold is not None:
            upto = max(upto, result.fold.seq_end or upto)
    head = latest_fold(j)
    carried = head.manifest["storage"]["evictable_tokens"]
    assert carried > 0
    assert carried == evictable_tokens(j)  # recounted from the rows (no previous fold)


def test_consolidation_waits_until_it_can_free_a_consolidation_worth(settings):
    """A ledger past the start is consolidated again only when its P2/P3 facts or its
    growth since the last consolidation reach start - target: not after every fold (the
    whole-ledger rebuild issue 18 removes)."""
    settings.LEDGER_CONSOLIDATE_AT_TOKENS = 1_000
    settings.LEDGER_CHECKPOINT_TARGET_TOKENS = 400
    storage = {"evictable_tokens": 599, "consolidated_at": 4_500}
    manifest = {"tokens": {"ledger_active": 5_000}, "storage": storage}
    assert not consolidation_due(manifest)  # 599 evictable, grown by 500
    storage["evictable_tokens"] = 600
    assert consolidation_due(manifest)
    storage.update(evictable_tokens=10, consolidated_at=4_400)
    assert consolidation_due(manifest)  # grown by 600 since the last one
    storage["consolidated_at"] = 0
    assert consolidation_due(manifest)  # never consolidated: the first time past the start
    storage["evictable_tokens"] = 0
    assert not consolidation_due(manifest)  # nothing to evict
    manifest["tokens"]["ledger_active"] = 999
    storage["evictable_tokens"] = 10**6
    assert not consolidation_due(manifest)  # below the start
    # a fold stored before the figures existed: the start alone decides, as before
    assert consolidation_due({"tokens": {"ledger_active": 1_000}, "storage": {}})


def test_a_seeded_p1_ledger_past_the_start_folds_without_consolidating(settings):
    settings.LEDGER_CONSOLIDATE_AT_TOKENS = 2_000
    settings.LEDGER_CHECKPOINT_TARGET_TOKENS = 500
    j = _journal("p1", 500)
    end = fold_scaling.seed_ledger(j, 600, template_entries=200)
    head = latest_fold(j)
    assert head.manifest["tokens"]["ledger_active"] >= 2_000
    result = ledger_fold(journal=j, upto=end + 24, writer="offline", recover=False)
    storage = result.fold.manifest["storage"]
    assert storage["evictable_tokens"] < 1_500
    assert storage["consolidated_at"] > 0  # the seed's template folds consolidated once
    assert result.consolidation is None
    assert json.loads(result.fold.delta)["fold"] == result.fold.number


CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"
SOURCES = sorted(
    str(p.relative_to(CORPUS))
    for folder in CORPUS.iterdir()
    if folder.is_dir()
    for p in folder.iterdir()
)


@pytest.mark.parametrize("source", SOURCES)
def test_verify_ledger_is_clean_on_every_corpus_transcript(source, settings, tmp_path):
    """Each corpus transcript folded 24 entries at a time (checkpoints every 3 folds, as
    the migration leaves them): replay from scratch and from checkpoints = stored."""
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**12
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.OPENAI_BASE_URL = ""
    settings.LEDGER_CHECKPOINT_EVERY_FOLDS = 3
    journal = journal_import(path=CORPUS / source, tenant="corpus").journal
    upto = 0
    while upto < journal.head_seq:
        upto += 24
        result = ledger_fold(journal=journal, upto=upto, writer="offline", recover=False)
        if result.fold is not None:
            upto = max(upto, result.fold.seq_end or upto)
    assert Fold.objects.filter(journal=journal).exists()
    report = ledger_verify(journal=journal)
    assert report.ok, report.mismatch
