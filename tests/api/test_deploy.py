"""Production settings: ``manage.py check --deploy`` is clean when DEBUG is false,
and the embedded default keeps its development settings."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from config.production import (
    SECRET_KEY_INSECURE_PREFIX,
    SECRET_KEY_MIN_LENGTH,
    SECRET_KEY_MIN_UNIQUE_CHARACTERS,
    secret_key_problem,
)

ROOT = Path(__file__).resolve().parents[2]


def _production_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "LOG_"))}
    env.update(
        {
            "DJANGO_DEBUG": "false",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "DJANGO_ALLOWED_HOSTS": "ledgerkeep.example",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'deploy.sqlite3'}",
            **extra,
        }
    )
    return env


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_under_production_settings(tmp_path):
    r = _manage(_production_env(tmp_path), "check", "--deploy", "--fail-level", "WARNING")

    assert r.returncode == 0, r.stdout + r.stderr
    assert "System check identified no issues" in r.stdout


def test_production_settings_switch_on_https_hsts_and_json_logs(tmp_path):
    code = (
        "from django.conf import settings as s; "
        "print(s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, s.SESSION_COOKIE_SECURE, "
        "s.CSRF_COOKIE_SECURE, s.SECURE_REDIRECT_EXEMPT, s.LOG_FORMAT, s.SECURE_PROXY_SSL_HEADER)"
    )
    env = _production_env(
        tmp_path, DJANGO_SECURE_SSL_REDIRECT="false", DJANGO_SECURE_PROXY_SSL_HEADER="HTTP_X_FWD"
    )

    r = _manage(env, "shell", "-v", "0", "-c", code)

    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [
        "False", "31536000", "True", "True", "['^healthz$']", "json", "('HTTP_X_FWD',", "'https')",
    ]  # fmt: skip


def test_the_embedded_default_keeps_development_settings(settings):
    # (pytest-django runs tests with DEBUG off; the module was configured with it on)
    assert settings.SECURE_SSL_REDIRECT is False
    assert settings.SESSION_COOKIE_SECURE is False
    assert settings.SECURE_HSTS_SECONDS == 0
    assert settings.LOG_FORMAT == "console"


def test_debug_off_without_a_secret_key_is_a_startup_error_naming_the_variable(tmp_path):
    env = _production_env(tmp_path)
    del env["DJANGO_SECRET_KEY"]

    r = _manage(env, "check")

    assert r.returncode != 0
    assert "DJANGO_SECRET_KEY is not set" in r.stderr


def test_debug_off_with_the_public_development_key_is_refused_too(tmp_path):
    from config.settings import DEVELOPMENT_SECRET_KEY

    env = _production_env(tmp_path)
    env["DJANGO_SECRET_KEY"] = DEVELOPMENT_SECRET_KEY

    r = _manage(env, "check")

    assert r.returncode != 0
    assert "DJANGO_SECRET_KEY" in r.stderr


def test_https_off_serves_plain_http_without_secure_cookies(tmp_path):
    code = (
        "from django.conf import settings as s; "
        "print(s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, s.SESSION_COOKIE_SECURE, "
        "s.CSRF_COOKIE_SECURE)"
    )
    r = _manage(_production_env(tmp_path, DJANGO_HTTPS="false"), "shell", "-v", "0", "-c", code)

    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "0", "False", "False"]


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("x", "is 1 characters long"),
        ("abcd" * 20, "has 4 distinct characters"),
        ("django-insecure-" + secrets.token_urlsafe(50), "starts with 'django-insecure-'"),
    ],
    ids=["short", "four-characters", "django-insecure"],  # fixed ids: each xdist worker collects
)
def test_debug_off_with_a_weak_secret_key_is_a_startup_error_naming_the_variable(
    tmp_path, key, why
):
    env = _production_env(tmp_path, DJANGO_SECRET_KEY=key)

    r = _manage(env, "check")

    assert r.returncode != 0
    assert f"DJANGO_SECRET_KEY {why}" in r.stderr and "DJANGO_DEBUG is off" in r.stderr
    assert f"={key}" not in r.stderr and repr(key) not in r.stderr  # the key is not printed


def test_a_weak_key_is_what_djangos_w009_calls_weak():
    from django.core.checks.security import base

    assert SECRET_KEY_MIN_LENGTH == base.SECRET_KEY_MIN_LENGTH
    assert SECRET_KEY_MIN_UNIQUE_CHARACTERS == base.SECRET_KEY_MIN_UNIQUE_CHARACTERS
    assert SECRET_KEY_INSECURE_PREFIX == base.SECRET_KEY_INSECURE_PREFIX
    default = "public-default"
    assert secret_key_problem("a" * 49 + "bcde", development_default=default) is None
    assert "49 characters" in secret_key_problem("abcde" * 9 + "abcd", development_default=default)
    assert "not set" in secret_key_problem(default, development_default=default)


def test_debug_on_keeps_working_with_any_key(tmp_path):
    env = _production_env(tmp_path, DJANGO_DEBUG="true", DJANGO_SECRET_KEY="x")
    assert _manage(env, "check").returncode == 0
