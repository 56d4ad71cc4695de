"""Pure modules import nothing from Django or Celery (STYLE.md, "The shape of the repository")."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PURE = [
    "config/logging.py",
    "config/env.py",
    "journal_app/hashing.py",
    "journal_app/chunking.py",
    "journal_app/rounds.py",
    "journal_app/tokens.py",
    "journal_app/content.py",
    "journal_app/chain.py",
    "journal_app/artifacts.py",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "journal_app" / "formats").glob("*.py")),
    "ledger_app/facts.py",
    "ledger_app/reducer.py",
    "ledger_app/mechanical.py",
    "ledger_app/writers.py",
    "ledger_app/budget.py",
    "ledger_app/loss.py",
    "ledger_app/model_client.py",
    "ledger_app/proposals.py",
    "ledger_app/offline.py",
    "ledger_app/model_writer.py",
    "ledger_app/context.py",
    "bench/generator.py",
    "ledger_app/filters.py",
    "ledger_app/diff.py",
    "journal_app/charts.py",
    "ledger_app/hooks.py",
    "recovery_app/lexical.py",
    "recovery_app/triggers.py",
    "recovery_app/cursors.py",
    "recovery_app/budget.py",
    "recovery_app/filtering.py",
    "recovery_app/snapshot.py",
    "recovery_app/analyst.py",
    "recovery_app/writer.py",
    "ledger_app/validation.py",
]


@pytest.mark.parametrize("path", PURE)
def test_pure_module_imports_no_framework(path):
    tree = ast.parse((ROOT / path).read_text())
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            assert top not in ("django", "celery", "ninja", "django_htmx"), f"{path} imports {name}"
            assert not name.endswith((".models", ".services", ".views", ".tasks")), (
                f"{path} imports {name}"
            )
