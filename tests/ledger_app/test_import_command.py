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
