"""Budgets of a proxied call and the ``MODEL_WINDOWS`` setting."""

from __future__ import annotations

import pytest

from config.env import SettingError, env_json
from proxy_app.errors import ProxyRequestInvalid
from proxy_app.services import budgets_for


def test_the_window_of_the_model_minus_the_output_is_the_working_budget(settings):
    settings.MODEL_WINDOWS = {"small-model": 8000}
    settings.MODEL_WINDOW_DEFAULT = 270_000
    assert budgets_for(model="small-model", output_tokens=1000, header=None) == (7000, 8000)
    assert budgets_for(model="other", output_tokens=0, header=None) == (270_000, 270_000)
    # the header wins, never past what the window leaves
    assert budgets_for(model="small-model", output_tokens=1000, header="500") == (500, 8000)
    assert budgets_for(model="small-model", output_tokens=1000, header="99999") == (7000, 8000)


@pytest.mark.parametrize(
    ("header", "output", "field"),
    [("0", 0, "X-Ledgerkeep-Working-Budget"), (None, 8000, "max_tokens")],
)
def test_impossible_budgets_are_refused(settings, header, output, field):
    settings.MODEL_WINDOWS = {"small-model": 8000}
    with pytest.raises(ProxyRequestInvalid) as info:
        budgets_for(model="small-model", output_tokens=output, header=header)
    assert info.value.field == field


def test_model_windows_is_read_from_json(monkeypatch):
    monkeypatch.setenv("MODEL_WINDOWS", '{"gpt-4o-mini": 128000}')
    assert env_json("MODEL_WINDOWS", {}) == {"gpt-4o-mini": 128000}
    monkeypatch.setenv("MODEL_WINDOWS", '{"gpt-4o-mini": "big"}')
    with pytest.raises(SettingError, match="MODEL_WINDOWS"):
        env_json("MODEL_WINDOWS", {})
    monkeypatch.setenv("MODEL_WINDOWS", "{nope")
    with pytest.raises(SettingError, match="not JSON"):
        env_json("MODEL_WINDOWS", {})
