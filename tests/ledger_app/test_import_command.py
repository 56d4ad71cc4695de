"""``import_journal``'s summary names the runner it was started with."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connections

from recovery_app.management.commands.import_journal import Command

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus" / "openai-chat-tool-calls"


@pytest.fixture(autouse=True)
def _acme(db):
    """The tenant these imports name (``import_journal`` refuses an unknown tenant unless
    ``--create-tenant`` is given)."""
    from journal_app.services import tenant_ensure

    tenant_ensure(slug="acme")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("argv0", "prog"),
    [("/opt/venv/bin/ledgerkeep", "ledgerkeep"), ("manage.py", "manage.py")],
)
def test_the_next_line_names_the_command_runner(argv0, prog, monkeypatch, capsys):
    monkeypatch.setattr(connections, "close_all", lambda: None)  # keep the test's transaction
    source = sorted(CORPUS.glob("*.json*"))[0]

    Command().run_from_argv(
        [argv0, "import_journal", str(source), "--tenant", "acme", "--no-progress"]
    )

    next_line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("next"))
    assert next_line.split()[1:3] == [prog, "verify_journal"]
    assert f"|   {prog} compact acme/" in next_line


@pytest.mark.django_db
def test_the_progress_bar_counts_megabytes(settings):
    import io

    from django.core.management import call_command

    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**12
    source = CORPUS.parent / "codex-rollout-jsonl" / "codex-vscode-long-monorepo-session.jsonl"
    err = io.StringIO()

    call_command(
        "import_journal", str(source), "--tenant", "acme", stdout=io.StringIO(), stderr=err
    )

    # not a terminal: no bar, one final line (journal_app/progress.py)
    final = err.getvalue().splitlines()[-1]
    assert "\r" not in err.getvalue()
    assert final.startswith("reading, hashing and writing: 1.12 MB in "), final  # 1,119,993 B


@pytest.mark.django_db
def test_an_import_in_the_embedded_default_logs_no_broker_warning(settings, caplog):
    import io
    import logging

    from django.core.management import call_command

    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**12
    assert settings.CELERY_BROKER_URL == "memory://localhost/"  # the embedded default
    source = sorted(CORPUS.glob("*.json*"))[0]
    with caplog.at_level(logging.WARNING, logger="kombu"):
        call_command("import_journal", str(source), "--tenant", "acme", "--no-progress",
                     stdout=io.StringIO())  # fmt: skip
    assert not [r for r in caplog.records if r.name.startswith("kombu")]


@pytest.mark.django_db
def test_importing_a_folded_session_again_says_nothing_new_was_folded(
    settings, django_capture_on_commit_callbacks
):
    import io

    from django.core.management import call_command

    from ledger_app.models import Fold

    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 200  # the import folds it all
    source = sorted(CORPUS.glob("*.json*"))[0]
    args = (str(source), "--tenant", "acme", "--no-progress")
    with django_capture_on_commit_callbacks(execute=True):  # the fold after the import
        call_command("import_journal", *args, stdout=io.StringIO())
    assert Fold.objects.exists()
    again = io.StringIO()

    with django_capture_on_commit_callbacks(execute=True):
        call_command("import_journal", *args, stdout=again)

    line = next(x for x in again.getvalue().splitlines() if x.startswith("folded"))
    assert "nothing new; the ledger already covers seq 1-" in line, line
    assert "compact` folds it now" not in line


@pytest.mark.django_db
def test_an_import_whose_fold_is_still_queued_says_so(settings):
    import io

    from django.core.management import call_command

    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 200  # over it; the fold runs after commit
    out = io.StringIO()
    source = sorted(CORPUS.glob("*.json*"))[0]
    call_command("import_journal", str(source), "--tenant", "acme", "--no-progress", stdout=out)
    line = next(x for x in out.getvalue().splitlines() if x.startswith("folded"))
    assert "a fold is queued for the worker" in line and "below" not in line, line


@pytest.mark.django_db(transaction=True)  # the fold runs when the import commits
def test_a_fold_that_could_not_be_written_is_an_error_of_the_import(settings, monkeypatch):
    from django.core.management import CommandError, call_command
    from django.db import OperationalError

    from journal_app.models import Entry
    from ledger_app import services
    from ledger_app.models import Fold

    def locked(**kwargs):
        raise OperationalError("database is locked")

    monkeypatch.setattr(services, "ledger_compact", locked)
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10
    source = sorted(CORPUS.glob("*.json*"))[0]
    with pytest.raises(CommandError) as caught:
        call_command("import_journal", str(source), "--tenant", "acme", "--no-progress")
    message = str(caught.value)
    assert "the import committed its entries" in message
    assert "database is locked" in message
    assert Entry.objects.exists() and not Fold.objects.exists()
