"""Secrets and hidden reasoning are filtered out of what recovery shows (DESIGN.md section 7).

Pure module (no Django). Two passes over a text, both recorded as labels:

* **secrets**: ``detect-secrets`` (its line plugins and false-positive filters, default
  settings) plus provider key patterns it does not cover (OpenAI/Anthropic ``sk-...`` keys,
  AWS secret access keys, GitHub/GitLab/Slack tokens, Google API keys, bearer tokens,
  private key blocks, ``*_KEY=``/``*_TOKEN=``/``*PASSWORD=`` assignments). Each secret value is
  replaced by ``[secret filtered: <type>]``; the variable name and the rest of the line stay.
* **hidden reasoning**: ``<think>``, ``<thinking>``, ``<reasoning>`` blocks in message text
  are removed and replaced by ``[reasoning filtered]``; a whole ``reasoning`` entry shows
  nothing but that marker (DESIGN.md section 4: hidden reasoning is never client-visible).

The stored entry is never changed: filtering applies to the copy that is returned, and the
result says ``filtered`` with the labels of what was removed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

SECRET_MARK = "[secret filtered: {kind}]"
REASONING_MARK = "[reasoning filtered]"

#: Provider key patterns: (label, regex); group ``v`` is the secret value when present.
PROVIDER_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private key",
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
        ),
    ),
    ("anthropic key", re.compile(r"(?P<v>sk-ant-[A-Za-z0-9_-]{20,})")),
    ("openai key", re.compile(r"(?P<v>sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,})")),
    ("aws access key", re.compile(r"(?P<v>\b(?:AKIA|ASIA)[0-9A-Z]{16}\b)")),
    (
        "github token",
        re.compile(r"(?P<v>\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}))"),
    ),
    ("gitlab token", re.compile(r"(?P<v>\bglpat-[A-Za-z0-9_-]{20,})")),
    ("slack token", re.compile(r"(?P<v>\bxox[abposr]-[A-Za-z0-9-]{10,})")),
    ("google api key", re.compile(r"(?P<v>\bAIza[0-9A-Za-z_-]{35})")),
    ("stripe key", re.compile(r"(?P<v>\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,})")),
    ("bearer token", re.compile(r"(?i)\bbearer\s+(?P<v>[A-Za-z0-9._~+/=-]{20,})")),
    (
        "credential assignment",
        re.compile(
            r"(?i)\b[A-Z0-9_]*(?:SECRET|TOKEN|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY)"
            r"[A-Z0-9_]*\s*[=:]\s*[\"']?(?P<v>[^\s\"',;]{8,})"
        ),
    ),
)

_GENERIC = {
    "credential assignment",
    "secret keyword",
    "base64 high entropy string",
    "hex high entropy string",
}

_REASONING = re.compile(r"<(think|thinking|reasoning)>[\s\S]*?(?:</\1>|$)", re.IGNORECASE)


@dataclass
class Filtered:
    """Filtered text: ``filtered`` is True when anything was removed; ``labels`` say what."""

    text: str
    filtered: bool = False
    labels: list[str] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)


_configured = False


def _configure_detect_secrets() -> None:
    """Enable every detect-secrets plugin with its default filters, once per process.

    ``detect_secrets.settings.default_settings()`` does the same per call but clears and
    rebuilds its caches twice each time (milliseconds per read); recovery is the process's
    only user of detect-secrets, so its global settings are configured once instead.
    """
    global _configured
    if _configured:
        return
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.settings import cache_bust, configure_settings_from_baseline

    cache_bust()
    configure_settings_from_baseline(
        {
            "plugins_used": [
                {"name": cls.__name__} for cls in get_mapping_from_secret_type_to_class().values()
            ]
        }
    )
    _configured = True


def _detect_secrets(text: str) -> list[tuple[str, str]]:
    """``[(type, value)]`` found by detect-secrets' line plugins with its default filters."""
    from detect_secrets.core.scan import _process_line_based_plugins

    lines = text.splitlines()
    if not lines:
        return []
    _configure_detect_secrets()
    # The same line pipeline as ``scan_file`` (plugins, then the false-positive filters),
    # without writing the text to a file.
    found = _process_line_based_plugins(list(enumerate(lines, start=1)), "recovery-read")
    return [(s.type, s.secret_value) for s in found if s.secret_value]


def secret_spans(text: str) -> list[tuple[int, int, str]]:
    """``[(start, end, kind)]`` character spans of secrets in ``text``, merged, in order."""
    spans: list[tuple[int, int, str]] = []
    for kind, pattern in PROVIDER_PATTERNS:
        for m in pattern.finditer(text):
            a, b = (m.start("v"), m.end("v")) if "v" in pattern.groupindex else m.span()
            spans.append((a, b, kind))
    for kind, value in _detect_secrets(text):
        if len(value) < 6:
            continue  # a token prefix (e.g. "ghp"): the provider patterns cover the value
        start = 0
        while (i := text.find(value, start)) >= 0:
            spans.append((i, i + len(value), kind.lower()))
            start = i + len(value)
    spans.sort(key=lambda s: (s[0], s[2] in _GENERIC, -s[1]))
    merged: list[tuple[int, int, str]] = []
    for a, b, kind in spans:
        if merged and a <= merged[-1][1]:
            pa, pb, pk = merged[-1]
            merged[-1] = (pa, max(pb, b), pk)
        else:
            merged.append((a, b, kind))
    return merged


def filter_text(text: str, *, kind: str = "message") -> Filtered:
    """Remove hidden reasoning and secrets from ``text`` of an entry of ``kind``.

    Returns:
        :class:`Filtered`. ``spans`` are the character spans of ``text`` that were removed
        (used to keep quotes clear of them). A ``reasoning`` entry returns only the marker.
    """
    if kind == "reasoning":
        if not text:
            return Filtered(REASONING_MARK, True, ["reasoning"], [(0, 0)])
        return Filtered(REASONING_MARK, True, ["reasoning"], [(0, len(text))])
    removed: list[tuple[int, int, str]] = [
        (m.start(), m.end(), "reasoning") for m in _REASONING.finditer(text)
    ]
    for a, b, label in secret_spans(text):
        if not any(x <= a and b <= y for x, y, _ in removed):
            removed.append((a, b, label))
    if not removed:
        return Filtered(text)
    removed.sort()
    out, pos, labels, spans = [], 0, [], []
    for a, b, label in removed:
        if a < pos:
            a = pos
            if a >= b:
                continue
        out.append(text[pos:a])
        out.append(REASONING_MARK if label == "reasoning" else SECRET_MARK.format(kind=label))
        name = "reasoning" if label == "reasoning" else f"secret: {label}"
        if name not in labels:
            labels.append(name)
        spans.append((a, b))
        pos = b
    out.append(text[pos:])
    return Filtered("".join(out), True, labels, spans)


def filter_content(kind: str, content: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A filtered copy of an entry's content and the labels of what was removed.

    Message text, tool output and string tool arguments are filtered; content blocks of type
    ``thinking``, ``redacted_thinking`` or ``reasoning`` are dropped; a reasoning entry keeps
    only the marker.
    """
    labels: list[str] = []

    def add(new: list[str]) -> None:
        labels.extend(x for x in new if x not in labels)

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            f = filter_text(value)
            add(f.labels)
            return f.text
        if isinstance(value, list):
            kept = []
            for item in value:
                if isinstance(item, dict) and item.get("type") in (
                    "thinking",
                    "redacted_thinking",
                    "reasoning",
                ):
                    add(["reasoning"])
                    continue
                kept.append(walk(item))
            return kept
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    if kind == "reasoning":
        return {"text": REASONING_MARK}, ["reasoning"]
    return walk(content), labels
