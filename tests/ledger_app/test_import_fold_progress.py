"""``import_journal`` shows the automatic fold after its commit as a second progress bar
(journal_app/progress.py): a bar redrawn a few times a second on a terminal, one final line
off a terminal, nothing with ``--no-progress``."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command

from journal_app.models import Journal
from ledger_app.models import Fold

SOURCE = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "corpus"
    / "codex-rollout-jsonl"
    / "codex-vscode-long-monorepo-session.jsonl"
)

pytestmark = pytest.mark.django_db(transaction=True)  # the fold runs when the import commits


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _folds(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 20_000  # the import queues a fold of many slices


def _import(*extra: str, err: io.StringIO) -> None:
    call_command(
        "import_journal",
        str(SOURCE),
        "--tenant",
        "acme",
        "--create-tenant",
        *extra,
        stdout=io.StringIO(),
        stderr=err,
    )


def test_off_a_terminal_the_fold_after_the_import_ends_with_one_line():
    err = io.StringIO()
    _import(err=err)
    assert Fold.objects.filter(kind="fold").count() > 1
    head = Journal.objects.get().head_seq
    lines = err.getvalue().splitlines()
    assert "\r" not in err.getvalue()
    assert lines[-2].startswith("reading, hashing and writing: 1.12 MB in ")
    folded = max(Fold.objects.filter(kind="fold").values_list("seq_end", flat=True))
    assert lines[-1].startswith(f"folding: {folded:,} entries in "), lines[-1]
    assert 0 < folded <= head


def test_on_a_terminal_the_fold_is_a_bar_of_entries_of_the_head():
    err = _Terminal()
    _import(err=err)
    text = err.getvalue()
    head = Journal.objects.get().head_seq
    assert "folding:" in text and f"/{head} " in text.split("folding:")[-1]
    assert len(text) < 8_000  # a few redraws a second, not one per fold or entry


def test_no_progress_prints_nothing_of_the_fold():
    err = io.StringIO()
    _import("--no-progress", err=err)
    assert Fold.objects.exists()
    assert "folding" not in err.getvalue()
