"""A bad ``LEDGER_MODEL_PRICES`` stops ``manage.py`` with one line naming the variable, the
model and the field (journal_app/pricing.py ``parse_price_table``, config/cli.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from journal_app.pricing import PriceTableError, parse_price_table

ROOT = Path(__file__).resolve().parents[2]


def _manage_check(value: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["LEDGER_MODEL_PRICES"] = value
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ('{"gpt-5-codex": [1.25, "ten"]}', ["'gpt-5-codex'", "output price", "'ten'"]),
        ('{"gpt-5-codex": [-1, 10.0]}', ["'gpt-5-codex'", "input price", "-1"]),
        ('{"gpt-5-codex": [1.25]}', ["'gpt-5-codex'", "output price is missing"]),
        ('{"gpt-5-codex": [1, 2, "x"]}', ["'gpt-5-codex'", "cached input price", "'x'"]),
        ('{"gpt-5-codex": [1.25, 10.0', ["is not JSON", "column"]),
    ],
)
def test_a_bad_price_table_stops_manage_py_with_one_line_naming_it(value, words):
    result = _manage_check(value)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "LEDGER_MODEL_PRICES" in lines[0]
    for word in words:
        assert word in lines[0]


def test_the_readme_example_passes_manage_py_check():
    result = _manage_check('{"gpt-5-codex": [1.25, 10.0]}')
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({"m": [1, None]}, "the output price None"),
        ({"m": []}, "the input price is missing"),
        ({"m": [1, 2, 3, 4]}, "4 prices given"),
        ({"m": [1, 2, float("nan")]}, "the cached input price nan"),
        ({"m": "1,2"}, "is not a list"),
    ],
)
def test_each_bad_entry_names_the_model_and_field(table, field):
    with pytest.raises(PriceTableError) as info:
        parse_price_table(table)
    assert "model 'm'" in str(info.value) and field in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_model_name_is_refused(name):
    """An empty name would price every call whose source names no model."""
    with pytest.raises(PriceTableError) as info:
        parse_price_table({"gpt-5-codex": [1.25, 10.0], name: [1, 2]})
    assert "a model name is empty" in str(info.value)
