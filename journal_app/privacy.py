"""The one privacy module: secrets and hidden reasoning (docs/design.md sections 6, 7 and 9).

Pure module (no Django). Every surface that shows or sends an entry's text (the frontend
view, recovery reads, search and the analyst, ``/validate``, the UI pages and API endpoints
that render bodies, export, the writer and verifier prompts, ledger fact text) calls these
functions and nothing else, so the same input gets the same verdict everywhere.

Two kinds of private data:

* **secrets**: provider key patterns (OpenAI/Anthropic ``sk-...`` keys, AWS access and secret
  access keys, GitHub/GitLab/Slack/Stripe tokens, Google API keys, bearer tokens, private key
  blocks), keyword assignments (``db password: ...``, ``X_API_KEY=...``,
  ``--secret-access-key ...``), and ``detect-secrets``' pattern plugins used through their
  public API only (each plugin instantiated here, its ``analyze_string`` called; no
  process-wide settings read or changed). The entropy plugins are left out on purpose: they
  flag every content hash this product writes (``sha256:<hex>``), and such a hash is never
  reported. Each value is replaced by ``[filtered: <kind>]``; the name and the rest of the
  line stay.
* **hidden reasoning**: ``<think>``, ``<thinking>``, ``<reasoning>`` blocks in text, content
  blocks of type ``thinking``/``redacted_thinking``/``reasoning``, and a whole ``reasoning``
  entry; each is replaced by ``[filtered: reasoning]``.

Speed: this runs on every body shown. Each pattern runs only on a text holding one of its
anchors (a substring every match holds), all found in one Aho-Corasick pass; keyword patterns
run only over short windows around keyword anchors, tried only where a keyword can start. The
patterns and that scan are :mod:`journal_app.secret_patterns`; this module decides what they
found and replaces it. A caller filtering the same text twice (the identifiers and the search
index of an entry, a context's filter and its check) shares a :func:`memo_findings`.

The stored entry is never changed: filtering returns a copy that says ``filtered`` and why.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from journal_app.secret_patterns import HASH, Span, raw_spans

SECRET_MARK = "[filtered: {kind}]"
REASONING_MARK = "[filtered: reasoning]"
#: The prefix every mark starts with: a text already filtered scans clean.
MARK_PREFIX = "[filtered: "

REASONING_KINDS = ("thinking", "redacted_thinking", "reasoning")
#: Message fields that carry a provider's hidden reasoning as a string.
REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")

#: A closed block anywhere; an unclosed one only when the text starts with it (a model's
#: reasoning cut off mid-stream), so prose naming a tag ("inside <think> tags") stays.
_REASONING = re.compile(r"<(think|thinking|reasoning)>[\s\S]*?</\1>", re.IGNORECASE)
_REASONING_OPEN = re.compile(r"\s*<(think|thinking|reasoning)>", re.IGNORECASE)
_REASONING_ANCHORS = ("<think", "<reasoning")


def _excluded(text: str) -> list[tuple[int, int]]:
    """Spans no secret may touch: content hashes and the marks of earlier filtering."""
    out: list[tuple[int, int]] = []
    if "[filtered: " in text:
        i = text.find(MARK_PREFIX)
        while i >= 0:
            j = text.find("]", i)
            j = len(text) if j < 0 else j + 1
            out.append((i, j))
            i = text.find(MARK_PREFIX, j)
    if "sha256:" in text or len(text) >= 64:
        out.extend(m.span() for m in HASH.finditer(text))
    return out


def secret_spans(text: str) -> list[tuple[int, int, str]]:
    """Character spans of secret values in ``text``: ``[(start, end, kind)]``, merged, sorted.

    ``kind`` is a short slug: ``openai-key``, ``anthropic-key``, ``aws-access-key``,
    ``aws-secret-key``, ``github-token``, ``gitlab-token``, ``slack-token``,
    ``google-api-key``, ``stripe-key``, ``bearer-token``, ``jwt``, ``connection-string``,
    ``private-key``, ``credential`` (``X_API_KEY=...``), ``secret-keyword``
    (``password: ...``), or a detect-secrets type slug (``basic-auth-credentials``,
    ``json-web-token``, ...). Overlapping hits merge into one span keeping the kind of the
    earliest, longest hit. A span never covers a ``[filtered: ...]`` mark or a
    ``sha256:<64 hex>`` hash. Empty list for a clean text.
    """
    if not text:
        return []
    spans = list(raw_spans(text))
    if not spans:
        return []
    excluded = _excluded(text)
    if excluded:
        spans = [s for s in spans if not any(s[0] < y and x < s[1] for x, y in excluded)]
    # the provider pattern's kind wins over a generic one at the same place
    generic = ("secret-keyword", "credential", "basic-auth-credentials")
    spans.sort(key=lambda s: (s[0], -s[1], s[2] in generic))
    merged: list[Span] = []
    for a, b, kind in spans:
        if merged and a < merged[-1][1]:
            pa, pb, pk = merged[-1]
            if pk in generic and kind not in generic and b >= pb:
                pk = kind
            merged[-1] = (pa, max(pb, b), pk)
        else:
            merged.append((a, b, kind))
    return merged


def reasoning_spans(text: str) -> list[tuple[int, int]]:
    """Spans of ``<think>``/``<thinking>``/``<reasoning>`` blocks: closed blocks anywhere;
    a text that starts with an opening tag never closed is reasoning to its end."""
    if not text or "<" not in text:
        return []
    low = text.lower()
    if not any(a in low for a in _REASONING_ANCHORS):
        return []
    spans = [m.span() for m in _REASONING.finditer(text)]
    opened = _REASONING_OPEN.match(text)
    if opened and not (spans and spans[0][0] == opened.start(1) - 1):
        return [(0, len(text))]  # the opening tag is never closed
    return spans


@dataclass
class Filtered:
    """A filtered text.

    Attributes:
        text: the text with each secret value and reasoning block replaced by its mark.
        filtered: True when anything was replaced.
        labels: what was replaced, in order, each once: ``"secret: <kind>"``, ``"reasoning"``.
        spans: the ``(start, end)`` character spans of the input that were replaced.
    """

    text: str
    filtered: bool = False
    labels: list[str] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)


def findings(text: str) -> list[tuple[int, int, str, str]]:
    """Everything private in ``text``: ``[(start, end, kind, category)]`` sorted by start.

    ``category`` is ``"secret"`` (``kind`` as in :func:`secret_spans`) or ``"reasoning"``
    (``kind`` ``"reasoning"``). A secret inside a reasoning block is not listed apart. This is
    what validation's ``no_secrets`` / ``no_hidden_reasoning`` checks report.
    """
    found = [(a, b, "reasoning", "reasoning") for a, b in reasoning_spans(text)]
    for a, b, kind in secret_spans(text):
        if not any(x <= a and b <= y for x, y, _, _ in found):
            found.append((a, b, kind, "secret"))
    found.sort()
    return found


#: ``findings(text)``, or a memo of it (:func:`memo_findings`)
Finder = Callable[[str], list[tuple[int, int, str, str]]]


def memo_findings(max_chars: int | None = None) -> Finder:
    """:func:`findings` remembering each text it scanned, for one unit of work (a context
    build, a window of derived rows): a text two surfaces filter is scanned once.

    Args:
        max_chars: the most characters of text the memo holds; a text that would take it
            past this first empties it (what was forgotten is scanned again if asked: slower,
            never different). ``None``: no bound, for a unit of work bounded itself.

    Returns:
        ``find(text)``, giving what ``findings(text)`` gives.
    """
    seen: dict[str, list[tuple[int, int, str, str]]] = {}
    held = [0]

    def find(text: str) -> list[tuple[int, int, str, str]]:
        found = seen.get(text)
        if found is None:
            if max_chars is not None and held[0] + len(text) > max_chars:
                seen.clear()
                held[0] = 0
            found = seen[text] = findings(text)
            held[0] += len(text)
        return found

    return find


def _replace(text: str, found: list[tuple[int, int, str, str]]) -> Filtered:
    if not found:
        return Filtered(text)
    out: list[str] = []
    labels: list[str] = []
    spans: list[tuple[int, int]] = []
    pos = 0
    for a, b, kind, category in found:
        a = max(a, pos)
        if a >= b:
            continue
        out.append(text[pos:a])
        if category == "reasoning":
            out.append(REASONING_MARK)
            label = "reasoning"
        else:
            out.append(SECRET_MARK.format(kind=kind))
            label = f"secret: {kind}"
        if label not in labels:
            labels.append(label)
        spans.append((a, b))
        pos = b
    out.append(text[pos:])
    return Filtered("".join(out), True, labels, spans)


def filter_text(
    text: str, *, kind: str = "message", found: list[tuple[int, int, str, str]] | None = None
) -> Filtered:
    """Replace hidden reasoning and secrets in ``text`` of an entry of ``kind``.

    Args:
        text: any text (message, tool arguments or output, fact text).
        kind: the entry's kind; a ``"reasoning"`` entry returns only the reasoning mark.
        found: ``findings(text)`` when the caller has it already (a memo shared with the
            check of the same view, so a text is scanned once); scanned here otherwise.

    Returns:
        :class:`Filtered`; ``spans`` index ``text`` (used to keep quotes clear of them).
    """
    if kind == "reasoning":
        return Filtered(REASONING_MARK, True, ["reasoning"], [(0, len(text or ""))])
    return _replace(text, findings(text) if found is None else found)


def redact_secrets(text: str) -> tuple[str, list[str]]:
    """``text`` with every secret value replaced by ``[filtered: <kind>]``, and the labels.

    Hidden-reasoning tags are kept (the model view may carry its own reasoning); used for the
    model view and the writer/verifier prompts. Labels as in :class:`Filtered`.
    """
    found = [(a, b, k, "secret") for a, b, k in secret_spans(text)]
    result = _replace(text, found)
    return result.text, result.labels


def filter_content(kind: str, content: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A filtered copy of an entry's content and the labels of what was replaced.

    Every string is filtered (message text, tool output, tool arguments, nested values; dict
    keys are kept); content blocks of type ``thinking``, ``redacted_thinking`` or
    ``reasoning`` are dropped; a ``reasoning`` entry becomes ``{"text": REASONING_MARK}``.
    ``content`` itself is never changed.
    """
    if kind == "reasoning":
        return {"text": REASONING_MARK}, ["reasoning"]
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
                if isinstance(item, dict) and item.get("type") in REASONING_KINDS:
                    add(["reasoning"])
                    continue
                kept.append(walk(item))
            return kept
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if k in REASONING_FIELDS and isinstance(v, str) and v:
                    add(["reasoning"])
                    out[k] = REASONING_MARK
                else:
                    out[k] = walk(v)
            return out
        return value

    return walk(content), labels


@dataclass
class FilteredEntry:
    """An entry's readable parts, filtered (what every page and endpoint shows by default).

    Attributes:
        content, text, metadata: filtered copies (:func:`filter_content`, :func:`filter_text`).
        filtered: True when anything was replaced.
        labels: what was replaced, each once, in order (``"secret: <kind>"``, ``"reasoning"``).
    """

    content: dict[str, Any]
    text: str
    metadata: dict[str, Any]
    filtered: bool
    labels: list[str]


def filter_entry(
    *, kind: str, content: dict[str, Any], text: str, metadata: dict[str, Any] | None = None
) -> FilteredEntry:
    """Filter an entry's content, readable text and metadata with one verdict.

    Args:
        kind: the entry's kind (a ``"reasoning"`` entry shows only the reasoning mark).
        content: the entry's content; text: its readable text; metadata: its metadata.

    Returns:
        :class:`FilteredEntry`; the stored entry is not touched (hashes stay over it).
    """
    new_content, labels = filter_content(kind, content)
    f = filter_text(text, kind=kind)
    meta, meta_labels = filter_content("metadata", metadata or {})
    for label in [*f.labels, *meta_labels]:
        if label not in labels:
            labels.append(label)
    return FilteredEntry(new_content, f.text, meta, bool(labels), labels)
