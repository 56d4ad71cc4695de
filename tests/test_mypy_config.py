"""`make lint` type-checks every app with mypy and django-stubs (docs/architecture.md "Layers").

The ``[[tool.mypy.overrides]]`` entry of ``pyproject.toml`` turns on strict mode for the
modules of the import-linter contract ``id = "pure"`` (mypy cannot read another tool's
table): the first test fails when the two lists drift apart. ``mypy-baseline.txt`` holds the
errors of the other modules that may remain (fewer each time, never more): none may be in a
pure module. The last tests plant a type error in a copy of a module and run mypy with the
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
BASELINE = ROOT / "mypy-baseline.txt"


def _tool() -> dict:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]


def _pure() -> list[str]:
    (pure,) = [c for c in _tool()["importlinter"]["contracts"] if c["id"] == "pure"]
    return pure["source_modules"]


def test_mypy_is_strict_on_the_modules_of_the_pure_contract():
    (strict,) = [o for o in _tool()["mypy"]["overrides"] if o.get("disallow_untyped_defs")]
    modules = strict["module"]
    assert len(modules) == len(set(modules)), "a module is listed twice in the override"
    assert set(modules) == {m for p in _pure() for m in (p, f"{p}.*")}
    assert strict["disallow_any_generics"] and strict["warn_return_any"]


def test_the_baseline_holds_no_error_of_a_pure_module():
    pure = _pure()
    in_pure = []
    for line in BASELINE.read_text(encoding="utf-8").splitlines():
        module = line.split(".py:", 1)[0].replace("/", ".").removesuffix(".__init__")
        if any(module == p or module.startswith(p + ".") for p in pure):
            in_pure.append(line)
    assert in_pure == []


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


def _filter(mypy_output: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    baseline = tmp_path / "baseline.txt"
    shutil.copy(BASELINE, baseline)
    return subprocess.run(
        [str(Path(sys.executable).parent / "mypy-baseline"), "filter", "--baseline-path",
         str(baseline), "--sort-baseline", "--no-colors", "--hide-stats"],
        input=mypy_output, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _as_mypy_prints(lines: list[str]) -> str:
    # the baseline keeps no line numbers (":0:"); mypy prints real ones
    return "".join(line.replace(".py:0:", ".py:7:", 1) + "\n" for line in lines)


def test_the_baseline_lets_its_own_errors_pass_and_refuses_a_new_one_or_a_fixed_one(tmp_path):
    known = BASELINE.read_text(encoding="utf-8").splitlines()
    assert _filter(_as_mypy_prints(known), tmp_path).returncode == 0

    new = 'ledger_app/views/folds.py:12: error: Incompatible return value type (got "str", expected "int")  [return-value]'  # fmt: skip
    planted = _filter(_as_mypy_prints(known) + new + "\n", tmp_path)
    assert planted.returncode != 0 and "views/folds.py" in planted.stdout

    # an error fixed but still in the baseline fails too, until `make mypy-baseline` drops it
    fixed = next(i for i, line in enumerate(known) if ": error:" in line)
    assert _filter(_as_mypy_prints(known[:fixed] + known[fixed + 1 :]), tmp_path).returncode != 0
