"""The model settings refuse values that would fail every call, with one line naming the
variable (README "Use a local model"): a timeout or stall of 0 s or less, an unknown
response format, a negative window, no output tokens."""

from __future__ import annotations

import pytest

from config.env import SettingError, env_choice, env_count, env_seconds


@pytest.mark.parametrize("raw", ["0", "-1", "0.0"])
def test_seconds_must_be_above_zero(monkeypatch, raw):
    monkeypatch.setenv("MODEL_TIMEOUT_SECONDS", raw)
    with pytest.raises(
        SettingError, match=r"^MODEL_TIMEOUT_SECONDS='.*' is not accepted: use seconds above 0$"
    ):
        env_seconds("MODEL_TIMEOUT_SECONDS", 60.0)


def test_seconds_read_and_default(monkeypatch):
    monkeypatch.setenv("MODEL_STALL_SECONDS", "2.5")
    assert env_seconds("MODEL_STALL_SECONDS", 60.0) == 2.5
    monkeypatch.delenv("MODEL_STALL_SECONDS")
    assert env_seconds("MODEL_STALL_SECONDS", 60.0) == 60.0
    monkeypatch.setenv("MODEL_STALL_SECONDS", "soon")
    with pytest.raises(SettingError, match="is not a number"):
        env_seconds("MODEL_STALL_SECONDS", 60.0)


def test_response_format_is_one_of_the_modes(monkeypatch):
    modes = ("json_schema", "json_object", "none")
    monkeypatch.setenv("MODEL_RESPONSE_FORMAT", "json_object")
    assert env_choice("MODEL_RESPONSE_FORMAT", "json_schema", modes) == "json_object"
    monkeypatch.setenv("MODEL_RESPONSE_FORMAT", "xml")
    with pytest.raises(SettingError) as caught:
        env_choice("MODEL_RESPONSE_FORMAT", "json_schema", modes)
    assert str(caught.value) == (
        "MODEL_RESPONSE_FORMAT='xml' is not accepted: use one of json_schema, json_object, none"
    )


def test_a_window_of_zero_means_unbounded_but_not_below(monkeypatch):
    monkeypatch.setenv("WRITER_WINDOW_TOKENS", "0")
    assert env_count("WRITER_WINDOW_TOKENS", 0, minimum=0) == 0
    monkeypatch.setenv("WRITER_WINDOW_TOKENS", "-5")
    with pytest.raises(SettingError, match="use an integer of 0 or more"):
        env_count("WRITER_WINDOW_TOKENS", 0, minimum=0)


def test_the_settings_offer_the_client_s_modes(settings):
    from ledger_app.model_client.formats import FORMATS

    assert settings.MODEL_RESPONSE_FORMATS == FORMATS
