"""Typed readers for settings from environment variables (pure, no Django).

Each reader fails loudly, naming the variable, when a value cannot be parsed, in the manner
of healthchecks' ``hc/settings.py``.
"""

from __future__ import annotations

import json
import os
import re
from urllib.parse import urlsplit


class SettingError(ValueError):
    """An environment variable holds a value of the wrong shape."""


def env_str(name: str, default: str = "") -> str:
    """The variable's value, or ``default`` when unset or empty."""
    return os.environ.get(name) or default


def env_int(name: str, default: int) -> int:
    """An integer variable (``_`` separators allowed, e.g. ``270_000``)."""
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    try:
        return int(raw.replace("_", ""))
    except ValueError:
        raise SettingError(f"{name}={raw!r} is not an integer") from None


def env_count(name: str, default: int, minimum: int = 1) -> int:
    """A whole count of at least ``minimum`` (``_`` separators allowed): worker processes.

    Raises:
        SettingError: not an integer, or below ``minimum``; one line naming the variable and
            the accepted range.
    """
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise SettingError(f"{name}={raw!r} is not accepted: use an integer of {minimum} or more")
    return value


def env_float(name: str, default: float) -> float:
    """A floating-point variable."""
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    try:
        return float(raw)
    except ValueError:
        raise SettingError(f"{name}={raw!r} is not a number") from None


def env_seconds(name: str, default: float) -> float:
    """A duration in seconds above 0 (a timeout or a limit: 0 or less would fail every call).

    Raises:
        SettingError: not a number, or not above 0; one line naming the variable.
    """
    value = env_float(name, default)
    if not value > 0:
        raise SettingError(f"{name}={os.environ.get(name)!r} is not accepted: use seconds above 0")
    return value


def env_url(name: str, default: str) -> str:
    """An ``http://`` or ``https://`` URL with a host, or ``""`` (unset: the feature is off).

    Raises:
        SettingError: anything else (``not a url``, ``ftp://...``, ``http://``); one line
            naming the variable and what is accepted.
    """
    value = env_str(name, default)
    if not value:
        return value
    parsed = urlsplit(value)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise SettingError(
            f"{name}={value!r} is not accepted: use an http:// or https:// URL with a host "
            "(e.g. http://127.0.0.1:8089/v1)"
        )
    return value


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    """One of ``choices`` (``default`` when unset or empty).

    Raises:
        SettingError: any other value; one line naming the variable and the choices.
    """
    value = env_str(name, default)
    if value not in choices:
        raise SettingError(f"{name}={value!r} is not accepted: use one of {', '.join(choices)}")
    return value


def env_bool(name: str, default: bool) -> bool:
    """A boolean variable: 1/true/yes/on or 0/false/no/off (case-insensitive)."""
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise SettingError(f"{name}={raw!r} is not a boolean (use true or false)")


def env_list(name: str, default: list[str]) -> list[str]:
    """A comma-separated list; blanks dropped."""
    raw = os.environ.get(name)
    if raw in (None, ""):
        return list(default)
    return [part.strip() for part in raw.split(",") if part.strip()]


def env_json(name: str, default: dict[str, int]) -> dict[str, int]:
    """A JSON object of names to positive integers, e.g. ``{"gpt-4o": 128000}``."""
    raw = os.environ.get(name)
    if raw in (None, ""):
        return dict(default)
    try:
        value = json.loads(raw)
    except ValueError:
        raise SettingError(f"{name}={raw!r} is not JSON") from None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v > 0
        for k, v in value.items()
    ):
        raise SettingError(f"{name} must be a JSON object of names to positive integers")
    return value


def env_object(name: str) -> dict[str, object]:
    """A JSON object of any shape (``{}`` when unset); the caller checks its fields."""
    raw = os.environ.get(name)
    if raw in (None, ""):
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SettingError(
            f"{name}={raw!r} is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    if not isinstance(value, dict):
        raise SettingError(f"{name} must be a JSON object")
    return value


_RATE = re.compile(r"^([0-9]+)/([0-9]*)([smhd])$")


def env_rate(name: str, default: str) -> str:
    """A request rate as django-ratelimit reads it: ``"6000/m"``, ``"500/5m"``; or ``"off"``.

    Units: ``s``, ``m``, ``h``, ``d``, optionally preceded by a count of them. ``"off"``
    (or ``"0"``) disables the limit and is returned as ``""``.
    """
    raw = (os.environ.get(name) or default).strip().lower()
    if raw in ("off", "0", "none"):
        return ""
    match = _RATE.match(raw)
    if match is None or int(match.group(1)) < 1 or match.group(2) == "0":
        raise SettingError(f"{name}={raw!r} is not a rate (e.g. 6000/m, 500/5m, or off)")
    return raw
