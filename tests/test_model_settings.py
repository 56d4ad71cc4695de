"""The model settings refuse values that would fail every call, with one line naming the
variable (README "Use a local model"): a timeout or stall of 0 s or less, an unknown
response format, a negative window, no output tokens."""

from __future__ import annotations

import pytest

from config.env import SettingError, env_choice, env_count, env_seconds, env_url


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


@pytest.mark.parametrize(
    "raw", ["not a url", "ftp://127.0.0.1:8089/v1", "http://", "127.0.0.1:8089"]
)
def test_the_base_url_is_an_http_url_with_a_host(monkeypatch, raw):
    monkeypatch.setenv("OPENAI_BASE_URL", raw)
    with pytest.raises(SettingError) as caught:
        env_url("OPENAI_BASE_URL", "")
    assert str(caught.value).startswith(f"OPENAI_BASE_URL={raw!r} is not accepted: use an http")


def test_a_base_url_read_and_unset(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8089/v1")
    assert env_url("OPENAI_BASE_URL", "") == "http://127.0.0.1:8089/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "")
    assert env_url("OPENAI_BASE_URL", "") == ""


def test_a_negative_recovery_limit_stops_the_start(monkeypatch):
    """RECOVERY_MAX_SECONDS is read as env_seconds by the settings: -1 is one line, status 2."""
    import subprocess
    import sys

    env = {**__import__("os").environ, "RECOVERY_MAX_SECONDS": "-1"}
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "manage.py", "check"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert "RECOVERY_MAX_SECONDS='-1' is not accepted: use seconds above 0" in done.stderr
    assert "Traceback" not in done.stderr
