"""The installable package: what the wheel carries, and the ``ledgerkeep`` command.

The wheel is built here (``pip wheel --no-deps``) and its file list checked: every app, the
migrations, the templates, static files and sample (copied to ``config/site/`` by setup.py),
the prompts and the bundled tokenizer data, and the console entry point. Installing it into a
fresh virtual environment and running it from outside the checkout is ``.ci/wheel-check``
(run by ``.ci/run``: it needs the package index for the dependencies).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ["config", "journal_app", "audit_app", "ledger_app", "recovery_app", "proxy_app"]
#: what a build never reads: version control, virtual environments, local data, caches
NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv*", "var", "build", "dist", "*.egg-info", "__pycache__", ".*_cache",
    "node_modules", "results",
)  # fmt: skip


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Iterator[zipfile.ZipFile]:
    """The wheel built from a copy of the checkout: setuptools writes ``build/`` into the
    source folder, and a stale or concurrent one there failed a build ("File exists:
    build/bdist.../ledgerkeep-0.1.0.dist-info")."""
    source = tmp_path_factory.mktemp("source") / "ledgerkeep"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if built.returncode != 0 and "No matching distribution" in built.stderr:
        pytest.skip(f"the build backend cannot be installed here: {built.stderr[-300:]}")
    assert built.returncode == 0, built.stdout + built.stderr
    (path,) = out.glob("ledgerkeep-*.whl")
    with zipfile.ZipFile(path) as zf:
        yield zf


def _files(root: Path, pattern: str) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.glob(pattern) if p.is_file()}


def test_the_wheel_holds_every_app_with_its_migrations_and_commands(wheel):
    names = set(wheel.namelist())
    for app in APPS:
        assert f"{app}/__init__.py" in names, app
        if (ROOT / app / "migrations").is_dir():
            assert _files(ROOT, f"{app}/migrations/0*.py") <= names, app
        if (ROOT / app / "management" / "commands").is_dir():
            assert _files(ROOT, f"{app}/management/commands/*.py") <= names, app
    assert "audit_app/models.py" in names  # the app the first wheels forgot


def test_the_wheel_holds_templates_static_files_samples_prompts_and_tokenizer_data(wheel):
    names = set(wheel.namelist())
    for folder in ("templates", "static", "samples"):
        shipped = {f"config/site/{name}" for name in _files(ROOT, f"{folder}/**/*")}
        assert shipped and shipped <= names, sorted(shipped - names)
    assert _files(ROOT, "ledger_app/prompts/*.md") <= names
    assert {
        "journal_app/data/o200k_base.tiktoken.gz",
        "journal_app/data/cl100k_base.tiktoken.gz",
    } <= names
    # the bundled copy is byte for byte the checkout's (its sha256 is checked at load time)
    data = wheel.read("journal_app/data/o200k_base.tiktoken.gz")
    assert data == (ROOT / "journal_app/data/o200k_base.tiktoken.gz").read_bytes()
    assert not any(n.startswith(("tests/", "bench/", ".venv/")) for n in names)


def test_the_wheel_declares_the_ledgerkeep_command_and_its_dependencies(wheel):
    dist = next(n.split("/")[0] for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    entry_points = wheel.read(f"{dist}/entry_points.txt").decode()
    assert "ledgerkeep = config.cli:main" in entry_points
    requires = [
        re.split(r"[\[<>=;, ]", line.split(":", 1)[1].strip(), maxsplit=1)[0].lower()
        for line in wheel.read(f"{dist}/METADATA").decode().splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    for needed in ("django", "django-ninja", "celery", "tiktoken", "django-ratelimit", "gunicorn"):
        assert needed in requires, requires


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "LOG_"))}
    return subprocess.run(
        [sys.executable, "-m", "config.cli", *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_ledgerkeep_lists_the_commands_of_every_app():
    r = _cli("help")

    assert r.returncode == 0, r.stderr
    for command in ("import_journal", "compact", "verify_journal", "verify_ledger", "recover"):
        assert command in r.stdout
    for command in ("create_user", "create_api_key", "gc_artifacts", "runserver", "migrate"):
        assert command in r.stdout
    assert "Type 'ledgerkeep help <subcommand>'" in r.stdout


def test_ledgerkeep_refuses_to_start_without_a_secret_key_naming_the_variable():
    r = _cli("check", DJANGO_DEBUG="false")

    assert r.returncode == 2
    assert "DJANGO_SECRET_KEY" in r.stderr
    assert "Traceback" not in r.stderr
