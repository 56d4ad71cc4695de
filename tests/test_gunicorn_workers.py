"""``WEB_CONCURRENCY`` (config/gunicorn.py): 1 worker or more, else one line naming it."""

from __future__ import annotations

import sys

import pytest

from config.env import SettingError, env_count
from tests.test_gunicorn import _loaded


@pytest.mark.parametrize("value", ["0", "-2", "abc", "1.5"])
def test_it_refuses_a_worker_count_below_one_or_not_a_number(monkeypatch, value):
    monkeypatch.setenv("WEB_CONCURRENCY", value)
    with pytest.raises(SettingError) as caught:
        env_count("WEB_CONCURRENCY", 3, minimum=1)
    assert str(caught.value) == (
        f"WEB_CONCURRENCY={value!r} is not accepted: use an integer of 1 or more"
    )


def test_the_config_module_refuses_zero_workers_naming_the_variable(monkeypatch, capsys):
    monkeypatch.setenv("WEB_CONCURRENCY", "0")
    sys.modules.pop("config.gunicorn", None)
    try:
        with pytest.raises(SystemExit) as stopped:
            import config.gunicorn  # noqa: F401
    finally:
        sys.modules.pop("config.gunicorn", None)
    assert stopped.value.code == 2
    assert capsys.readouterr().err == (
        "gunicorn: configuration error: WEB_CONCURRENCY='0' is not accepted: "
        "use an integer of 1 or more\n"
    )


@pytest.mark.parametrize(("value", "workers"), [("", 3), ("1", 1), ("1_2", 12)])
def test_gunicorn_takes_a_count_of_one_or_more(monkeypatch, value, workers):
    assert _loaded(monkeypatch, WEB_CONCURRENCY=value).workers == workers
