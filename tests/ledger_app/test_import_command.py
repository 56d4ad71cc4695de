"""``import_journal``'s summary names the runner it was started with (issue 16, item 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connections

from ledger_app.management.commands.import_journal import Command

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus" / "openai-chat-tool-calls"


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

    final = err.getvalue().split("\r")[-1]
    assert "1.12M/1.12M" in final, final  # 1,119,993 bytes (was "1.12k/1.12k")


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
