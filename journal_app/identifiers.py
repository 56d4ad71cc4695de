"""Identifiers in journal text: paths, URLs, hashes, flags, commands, numbers, ids. Pure.

Extracted once per entry, when it is appended (:func:`identifiers_of`, stored in
:class:`journal_app.models.EntryIdentifiers`), since an entry's bytes never change: the
per-fold loss report (:mod:`ledger_app.loss`) then only compares. Every pattern
is compiled once, at import.

Identifier kinds (:data:`KINDS`): ``path``, ``url``, ``hash``, ``flag``, ``command``,
``number`` (with a unit), ``id`` (ticket or issue), ``migration``. Extraction is
lexical, deterministic and deliberately conservative: a false "lost" is noise in front of
a reviewer, so ambiguous shapes (``and/or``, ``e.g.``, ``v1.2``, ``os.path``) are left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from journal_app.privacy import Finder, filter_text

KINDS = ("path", "url", "hash", "flag", "command", "number", "id", "migration")
#: Longest ``command`` identifier kept (characters).
COMMAND_LIMIT = 200
#: Version of the extraction rules stored with each entry's identifiers.
RULES_VERSION = 2  # 2: read from the privacy-filtered text


@dataclass(frozen=True)
class Identifier:
    """One identifier found in journal text: ``kind`` (one of :data:`KINDS`) and ``value``."""

    kind: str
    value: str


# --- Patterns -------------------------------------------------------------------------
# Every pattern finds candidates; overlapping candidates are resolved leftmost-longest,
# ties going to the earlier entry of _PATTERNS (so a URL is not also read as a path).

# Tool call ids are not wanted: call_8f3a9b2c1d, toolu_01AbC9xyz, fc_68a1b2.
# They are matched first so that nothing inside them is read as a hash.
_TOOL_CALL_ID = re.compile(r"(?<![\w-])(?:call|toolu|fc)_[A-Za-z0-9_-]+")

# https://example.com/a?b=1, file:///tmp/x (trailing sentence punctuation is trimmed).
_URL = re.compile(r"\b(?:https?|ftp|file|wss?|ssh|git)://[^\s<>\"'`)\]}]+")

# sha256:1a2b3c4d5e6f (a prefix of at least 7 hex digits).
_PREFIXED_HASH = re.compile(r"(?<![\w-])(?:sha1|sha256|sha512|md5):[0-9a-fA-F]{7,128}(?![\w-])")

# 550e8400-e29b-41d4-a716-446655440000 (one identifier, not five pieces).
_UUID = re.compile(
    r"(?<![\w-])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-])"
)

# Django migrations: 0097_auto, 0001_initial, payments.0097_auto_20240101_1200.
# Not: 0097 alone, 97_auto (four digits and an underscore, as makemigrations writes them).
_MIGRATION = re.compile(r"(?<![\w./\\-])(?:[A-Za-z_][A-Za-z0-9_]*\.)?\d{4}_\w+(?![\w-])")

# Path-shaped tokens; _is_path decides. billing/refunds.py, /var/log/x.log, ./a.sh,
# ~/notes.md, C:\Users\me\a.txt, src\main.rs, manage.py. The token may not start inside a
# word, a flag or a URL and may not end on punctuation ("see a.py." gives "a.py"). The
# lookahead skips runs with no dot, slash or backslash: no path _is_path accepts lacks all
# three, and without it every word of the text was a candidate (7.4 million _is_path calls
# in one 10,000-entry fold); the tokens it lets through are unchanged.
_PATH_TOKEN = re.compile(
    r"(?<![\w.~/\\:@+-])(?=(?:[A-Za-z]:)?[\w.~/\\@+-]*[./\\])(?:[A-Za-z]:)?[\w.~/\\@+-]*[\w/\\]"
)

# Tickets: ABC-123, PROJ-42, CVE-2024-1234. Not: UTF-8, SHA-256 (_NOT_TICKETS), abc-123.
_TICKET = re.compile(r"(?<![\w-])([A-Z][A-Z0-9]{1,9})-\d{1,7}(?:-\d{1,7})*(?![\w-])")
_NOT_TICKETS = frozenset(
    {"UTF", "UCS", "SHA", "MD", "ISO", "GPT", "AES", "RSA", "TLS", "SSL", "HTTP", "IPV", "COVID"}
)

# Issues and pull requests: #1234 (not &#39; and not a colour like #fff).
_ISSUE = re.compile(r"(?=#)(?<![\w&#])#\d{1,7}(?![\w])")  # (?=#): a fast skip

# Flags: --skip-locked-tables, --output (of --output=x), and short flags standing alone
# after a space: -x, -rf, -xvf. Not: re-run, - item, -5, ---.
_FLAG = re.compile(
    r"(?=-)"  # both branches start with a dash: a fast skip elsewhere
    r"(?:(?<![\w-])--[A-Za-z](?:[\w-]*[A-Za-z0-9])?(?![\w-])"  # --skip-locked-tables, --x
    r"|(?<!\S)-[A-Za-z]{1,3}(?!\S))"  # -x, -rf standing alone
)

# Numbers with a unit. 12.4ms, 1200 ms, 3 GB, 7B, 8 tests, 270,000 tokens, 99%, 5m30s,
# $12.50. Not: a bare 42, v1.2, x86 (a number glued to a preceding word or number).
_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_UNITS = (
    # time
    r"ns|us|µs|ms|secs?|seconds?|mins?|minutes?|hrs?|hours?|days?|weeks?"
    # size and rate
    r"|bytes?|[kmgtp]i?b|[kmg]bps|rps|qps|fps"
    # counts an agent reports
    r"|tokens?|tests?|files?|lines?|errors?|warnings?|failures?|passed|failed|skipped"
    r"|deselected|items?|rows?|records?|chars|characters?|words?|requests?|retries"
    r"|attempts?|commits?|calls?|steps?|rounds?|entries|facts?|folds?|chunks?|workers?"
    r"|threads?|cores?|cpus?|gpus?|dollars?|usd|eur"
)
_NUMBER = re.compile(
    rf"""
    (?=[\d$])(?:                                   # every branch starts so: skips fast
    (?<![\w.,$])\$?{_NUM}[ ]?%                      # 99%, 12.5 %
  | (?<![\w.,$])(?:\d+h)?(?:\d+m)?\d+(?:\.\d+)?s(?![\w])  # 5m30s, 1h2m3s, 3s
  | (?<![\w.,$]){_NUM}[ ]?(?i:{_UNITS})(?![\w])     # 1200 ms, 3 GB, 8 tests
  | (?<![\w.,$]){_NUM}(?:[mhdxkKMB])(?![\w])        # 5m, 2h, 3x, 12k, 7B (attached only)
  | (?<![\w$])\${_NUM}(?![\w])                      # $12.50
    )""",
    re.VERBOSE,
)

# Bare hex hashes of 7-64 characters with at least one digit and one letter:
# 4d74c33, 1a2b3c4d5e6f. Not: deadbeef, cafe, 1234567 (no letter), abc123 (too short).
_HEX = re.compile(r"(?<![\w-])[0-9a-fA-F]{7,64}(?![\w-])")

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("skip", _TOOL_CALL_ID),
    ("url", _URL),
    ("hash", _PREFIXED_HASH),
    ("hash", _UUID),
    ("migration", _MIGRATION),
    ("path", _PATH_TOKEN),
    ("id", _TICKET),
    ("id", _ISSUE),
    ("flag", _FLAG),
    ("number", _NUMBER),
    ("hash", _HEX),
)

# File extensions a path may end in without a slash (manage.py). A list rather than "any
# letters after a dot", so that e.g., os.path, self.name and example.com are not paths.
_EXTENSIONS = frozenset(
    """
    py pyi pyx ipynb js jsx mjs cjs ts tsx vue svelte json jsonl ndjson yaml yml toml ini cfg
    conf env lock md rst txt log csv tsv sh bash zsh fish ps1 bat cmd sql html htm css scss
    sass less xml go rs rb java kt kts scala swift c h cc cpp hpp cs php pl lua dart ex exs
    erl hs ml r jl gradle mk cmake proto tf tfvars patch diff pem crt key gz tgz tar zip bz2
    xz whl jar wasm so dll exe bin png jpg jpeg gif svg webp pdf db sqlite sqlite3 parquet
    pkl pt onnx tiktoken dockerfile makefile
    """.split()
)
_DOTFILES = frozenset(
    {".env", ".gitignore", ".dockerignore", ".bashrc", ".zshrc", ".profile", ".npmrc"}
)
_SEPARATOR = re.compile(r"[\\/]")
_LETTER = re.compile(r"[A-Za-z]")
_DRIVE = re.compile(r"[A-Za-z]:(?=[\\/])")
_DIGIT = re.compile(r"\d")
_HEX_LETTER = re.compile(r"[A-Fa-f]")


def _has_extension(name: str) -> bool:
    stem, dot, ext = name.rpartition(".")
    return bool(dot and stem.strip(".") and ext.lower() in _EXTENSIONS)


def _is_path(token: str) -> bool:
    """Decide whether a path-shaped token is a file path (see _PATH_TOKEN)."""
    if not _LETTER.search(token):
        return False  # 1/2, 24/7, 2026/01/02
    drive = _DRIVE.match(token)
    body = token[drive.end() :] if drive else token
    if token[:2] in ("./", ".\\", "~/", "~\\") or token[:3] in ("../", "..\\") or drive:
        return True  # ./a.sh, ../x, ~/notes, C:\Users
    names = [n for n in _SEPARATOR.split(body) if n not in ("", ".", "..", "~")]
    if not names:
        return False
    has_ext = _has_extension(names[-1]) or names[-1] in _DOTFILES
    if not _SEPARATOR.search(body):
        return has_ext  # manage.py, .env; not e.g., v1.2, os.path
    if body.startswith(("/", "\\")):
        return has_ext or len(names) >= 2  # /var/log, /tmp/x.log; not /compact, \d
    # Relative with a slash: billing/refunds.py, tests/ledger_app, a/b/c, src/.
    # Not and/or, P0/P1, TCP/IP (two plain words).
    return has_ext or len(names) >= 3 or token.endswith(("/", "\\")) or any("_" in n for n in names)


# Gates: a pattern of _PATTERNS runs only on a text that passes its gate, a test every text
# holding a match the pattern yields passes (a substring, or a regex with a literal first
# character that the engine skips to): each pattern is a scan of the whole text, tried at
# every position, and most texts hold no URL, hash, ticket, migration or tool call id. A
# gate never changes what is found, only whether a pattern that would find nothing runs.
_UUID_GATE = re.compile(r"-[0-9a-fA-F]{4}-")
_MIGRATION_GATE = re.compile(r"_(?<=\d{4}_)")
_TICKET_GATE = re.compile(r"-\d")
_HEX_GATE = re.compile(r"[0-9a-fA-F][0-9a-fA-F]{6}")  # led by a class: the engine skips to it


def _has_digit(text: str) -> bool:
    return _DIGIT.search(text) is not None


_GATES: dict[re.Pattern[str], Callable[[str], bool]] = {
    _TOOL_CALL_ID: lambda t: "call_" in t or "toolu_" in t or "fc_" in t,
    _URL: lambda t: "://" in t,
    _PREFIXED_HASH: lambda t: (
        ":" in t and any(p in t for p in ("sha1:", "sha256:", "sha512:", "md5:"))
    ),
    _UUID: lambda t: _UUID_GATE.search(t) is not None,
    _MIGRATION: lambda t: _MIGRATION_GATE.search(t) is not None,
    _PATH_TOKEN: lambda t: "." in t or "/" in t or "\\" in t,
    _TICKET: lambda t: _TICKET_GATE.search(t) is not None,
    _ISSUE: lambda t: "#" in t,
    _FLAG: lambda t: "-" in t,
    _NUMBER: _has_digit,  # every branch holds a digit
    # a hex candidate is kept only with a digit and a letter (see _candidates)
    _HEX: lambda t: _has_digit(t) and _HEX_GATE.search(t) is not None,
}


def _candidates(text: str) -> Iterator[tuple[int, int, int, str, str]]:
    """(start, -length, pattern rank, kind, value) for every plausible match."""
    for rank, (kind, pattern) in enumerate(_PATTERNS):
        gate = _GATES.get(pattern)
        if gate is not None and not gate(text):
            continue
        for m in pattern.finditer(text):
            value = m.group(0)
            if kind == "url":
                value = value.rstrip(".,;:!?")
            elif kind == "path" and not _is_path(value):
                continue
            elif kind == "id" and m.re is _TICKET and m.group(1) in _NOT_TICKETS:
                continue
            elif m.re is _HEX and not (_DIGIT.search(value) and _HEX_LETTER.search(value)):
                continue
            yield (m.start(), -len(value), rank, kind, value)


def extract_identifiers(text: str) -> list[Identifier]:
    """Identifiers in ``text``, deduplicated, in order of first appearance.

    Overlapping matches are resolved leftmost-longest (``https://x.org/a.py`` is one
    ``url``; ``payments/migrations/0097_auto.py`` one ``path``). Tool call ids
    (``call_...``, ``toolu_...``, ``fc_...``) are never returned. ``command`` identifiers
    come only from tool-call arguments (:func:`identifiers_of_entry`).

    Args:
        text: any journal text.

    Returns:
        ``[Identifier(kind, value)]``; ``value`` is a verbatim substring of ``text``.
    """
    found: list[Identifier] = []
    seen: set[Identifier] = set()
    covered = 0
    for start, neg_len, _rank, kind, value in sorted(_candidates(text)):
        if start < covered:
            continue
        covered = start - neg_len
        ident = Identifier(kind, value)
        if kind != "skip" and ident not in seen:
            seen.add(ident)
            found.append(ident)
    return found


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON value, in document order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def shell_command(content: dict[str, Any]) -> str:
    """The shell command of a tool call's content (``command``/``cmd``/``script``), or ``""``.

    The one reading of a call's command: :func:`ledger_app.entry_view.command_of` (the
    reducer's command key, the offline writer) calls this.
    """
    args = content.get("arguments")
    if isinstance(args, dict):
        for key in ("command", "cmd", "script"):
            value = args.get(key)
            if isinstance(value, list):
                value = " ".join(str(v) for v in value)
                value = value.removeprefix("bash -lc ").removeprefix("bash -c ")
            if isinstance(value, str) and value.strip():
                return value.strip()
    return ""


def identifiers_of(
    *,
    kind: str,
    text: str,
    content: dict[str, Any],
    tool_call_id: str = "",
    derived: bool = False,
    findings: Finder | None = None,
) -> list[Identifier]:
    """Identifiers of one journal entry, deduplicated, in order of first appearance.

    * tool calls: the shell command (:func:`shell_command`) whitespace-collapsed and trimmed
      to :data:`COMMAND_LIMIT` characters as one ``command`` identifier, then the
      identifiers of every string argument (so a ``path`` argument counts, and JSON quoting
      does not);
    * messages, tool results, events: the identifiers of ``text``;
    * secrets and hidden reasoning are filtered first (:mod:`journal_app.privacy`);
    * reasoning (hidden, never shown to clients) and derived entries (summaries are not
      sources, docs/design.md 5.1): none.

    The entry's own ``tool_call_id`` is never returned. ``findings`` is
    :func:`journal_app.privacy.findings` or a memo of it (:func:`journal_app.privacy.memo_findings`,
    shared with the search index's filter of the same text, so it is scanned once); the
    verdict is the same either way.
    """
    if derived or kind == "reasoning":
        return []
    found: list[Identifier] = []

    # identifiers are read from the filtered text (journal_app.privacy): the loss report and
    # the term index never hold a secret value as a "path" or a "command"
    def filtered(value: str, kind: str = "message") -> str:
        return filter_text(value, kind=kind, found=findings(value) if findings else None).text

    if kind == "tool_call":
        command = filtered(" ".join(shell_command(content).split()))
        command = command[:COMMAND_LIMIT].rstrip()
        if command:
            found.append(Identifier("command", command))
        for value in _strings(content.get("arguments")):
            found.extend(extract_identifiers(filtered(value)))
    else:
        found.extend(extract_identifiers(filtered(text, kind)))
    out: list[Identifier] = []
    seen: set[Identifier] = set()
    for ident in found:
        if ident not in seen and not (tool_call_id and ident.value == tool_call_id):
            seen.add(ident)
            out.append(ident)
    return out


def identifiers_dump(idents: list[Identifier]) -> list[list[str]]:
    """JSON form stored per entry: ``[[kind, value], ...]``."""
    return [[i.kind, i.value] for i in idents]


def identifiers_load(rows: list[list[str]]) -> list[Identifier]:
    """Inverse of :func:`identifiers_dump`."""
    return [Identifier(str(k), str(v)) for k, v in rows]
