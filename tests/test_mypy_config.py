"""`make lint` type-checks the pure modules with mypy (docs/architecture.md "Architecture").

``[tool.mypy] packages`` in ``pyproject.toml`` mirrors the ``source_modules`` of the
import-linter contract ``id = "pure"`` (mypy cannot read another tool's table), less the
modules listed in :data:`NOT_YET_CHECKED`. The first test fails when the two lists drift
apart; the second plants a type error in a copy of a pure module and runs mypy with the
project's own configuration, which must report it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"

# pure modules mypy does not check yet, each with the comment in [tool.mypy] saying why
NOT_YET_CHECKED = {"ledger_app.context"}


def _tool() -> dict:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]


def test_mypy_checks_the_modules_of_the_pure_contract():
    tool = _tool()
    (pure,) = [c for c in tool["importlinter"]["contracts"] if c["id"] == "pure"]
    checked = tool["mypy"]["packages"]
    assert len(checked) == len(set(checked)), "a module is listed twice in [tool.mypy]"
    assert set(checked) == set(pure["source_modules"]) - NOT_YET_CHECKED
    assert NOT_YET_CHECKED <= set(pure["source_modules"])


def _mypy(cwd: Path, module: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(PYPROJECT),
            "--cache-dir",
            str(cwd / ".mypy_cache"),
            "-p",
            module,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_planted_type_error_in_a_pure_module_fails_the_check(tmp_path):
    package = tmp_path / "journal_app"
    package.mkdir()
    shutil.copy(ROOT / "journal_app/__init__.py", package / "__init__.py")
    module = package / "hashing.py"
    shutil.copy(ROOT / "journal_app/hashing.py", module)

    clean = _mypy(tmp_path, "journal_app.hashing")
    assert clean.returncode == 0, clean.stdout + clean.stderr

    with module.open("a", encoding="utf-8") as f:
        f.write('\n\ndef _planted() -> int:\n    return "not an int"\n')
    planted = _mypy(tmp_path, "journal_app.hashing")
    assert planted.returncode == 1, planted.stdout + planted.stderr
    assert "journal_app/hashing.py:" in planted.stdout
    assert "[return-value]" in planted.stdout
