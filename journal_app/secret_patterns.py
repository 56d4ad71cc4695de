"""Where secret values may be in a text: the patterns and the raw scan. Pure.

:func:`raw_spans` lists every match of the provider key patterns
(:data:`PROVIDER_PATTERNS`), of the keyword assignments (``db password: ...``,
``X_API_KEY=...``, ``--secret-access-key ...``) and of ``detect-secrets``' pattern plugins,
used through their public API only (each plugin instantiated here, its ``analyze_string``
called; no process-wide settings read or changed). The entropy plugins are left out on
purpose: they flag every content hash this product writes (``sha256:<hex>``).

The verdict (which matches count, how they merge, what replaces them) is
:mod:`journal_app.privacy`'s: call its functions, not these.

Speed: each pattern runs only on a text holding one of its anchors (a substring every match
holds), all found in one pass (an Aho-Corasick automaton, :func:`_runnable`); keyword patterns
run only over short windows around keyword anchors, and only where a keyword can start.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

# A value may not start with a reference or placeholder (``$VAR``, ``<x>``, ``{x}``, ``[x``).
# A lone ``&`` belongs to the value (``Tr0ub4dor&3Horse``); ``&&`` ends it (a shell list).
_VALUE = r"(?P<v>(?![$<{\[%*])(?:[^\s\"'`\\,;&|()<>\[\]{}]|&(?!&)){8,})"

#: Provider key and credential patterns: ``(kind, regex, anchors, lowered)``; group ``v`` is
#: the value when present. A pattern runs only on a text holding one of its anchors (in the
#: lower-cased text when ``lowered``). A command's pattern leads with the command's name and
#: checks the word boundary before it after it (``docker(?<!\wdocker)``, the same matches as
#: ``\bdocker``): a pattern that starts with a literal is searched by skipping to that
#: literal, one that starts with ``\b`` is tried at every position of the text.
PROVIDER_PATTERNS: tuple[tuple[str, re.Pattern[str], tuple[str, ...], bool], ...] = (
    (
        "private-key",
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
        ),
        ("PRIVATE KEY-----",),
        False,
    ),
    ("anthropic-key", re.compile(r"(?P<v>\bsk-ant-[A-Za-z0-9_-]{20,})"), ("sk-ant-",), False),
    (
        "openai-key",
        re.compile(r"(?P<v>\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,})"),
        ("sk-",),
        False,
    ),
    (
        "aws-access-key",
        re.compile(r"(?P<v>\b(?:AKIA|ASIA)[0-9A-Z]{16}\b)"),
        ("AKIA", "ASIA"),
        False,
    ),
    (
        # the 40-character secret access key, after its name or option, whatever the separator
        "aws-secret-key",
        re.compile(
            r"(?i)(?:aws)?[_-]?secret[_-]?access[_-]?key[\"']?\s*(?:[:=]|\s)\s*[\"']?"
            r"(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
        ),
        ("secret", "access"),
        True,
    ),
    (
        "github-token",
        re.compile(r"(?P<v>\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}))"),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        False,
    ),
    ("gitlab-token", re.compile(r"(?P<v>\bglpat-[A-Za-z0-9_-]{20,})"), ("glpat-",), False),
    ("slack-token", re.compile(r"(?P<v>\bxox[abposr]-[A-Za-z0-9-]{10,})"), ("xox",), False),
    ("google-api-key", re.compile(r"(?P<v>\bAIza[0-9A-Za-z_-]{35})"), ("AIza",), False),
    (
        "stripe-key",
        re.compile(r"(?P<v>\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,})"),
        ("k_live_", "k_test_"),
        False,
    ),
    # gitleaks / detect-secrets formats the plugins above do not cover
    ("huggingface-token", re.compile(r"(?P<v>\bhf_[A-Za-z0-9]{30,})"), ("hf_",), False),
    ("npm-token", re.compile(r"(?P<v>\bnpm_[A-Za-z0-9]{36})"), ("npm_",), False),
    ("shopify-token", re.compile(r"(?P<v>\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32})"), ("shp",), False),
    ("groq-key", re.compile(r"(?P<v>\bgsk_[A-Za-z0-9]{40,})"), ("gsk_",), False),
    ("xai-key", re.compile(r"(?P<v>\bxai-[A-Za-z0-9]{60,})"), ("xai-",), False),
    ("google-oauth-token", re.compile(r"(?P<v>\bya29\.[0-9A-Za-z_-]{20,})"), ("ya29.",), False),
    ("databricks-token", re.compile(r"(?P<v>\bdapi[a-f0-9]{32}(?:-\d)?)"), ("dapi",), False),
    ("linear-key", re.compile(r"(?P<v>\blin_api_[A-Za-z0-9]{40})"), ("lin_api_",), False),
    ("postman-key", re.compile(r"(?P<v>\bPMAK-[a-f0-9]{24}-[a-f0-9]{34})"), ("PMAK-",), False),
    ("pulumi-token", re.compile(r"(?P<v>\bpul-[a-f0-9]{40})"), ("pul-",), False),
    (
        "age-secret-key",
        re.compile(r"(?P<v>\bAGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58})"),
        ("AGE-SECRET-KEY-",),
        False,
    ),
    (
        "basic-auth-header",
        re.compile(r"(?i)\bauthorization\s*[:=]\s*[\"']?basic\s+(?P<v>[A-Za-z0-9+/]{8,}={0,2})"),
        ("basic",),
        True,
    ),
    (
        "auth-header",
        re.compile(
            r"(?i)\bauthorization\s*[:=]\s*[\"']?(?:token|apikey|api-key)\s+(?P<v>[^\s\"']{8,})"
        ),
        ("authorization",),
        True,
    ),
    (
        # ``mysql -u root -pS3cret`` (the password glued to -p, or quoted: ``-p'S3cret'``),
        # mysqldump, mysqladmin
        "mysql-password",
        re.compile(
            r"mysql(?<!\wmysql)(?:dump|admin|sh)?\b[^\n|;]*?\s-p[\"']?(?P<v>[^\s\"'|;&]{3,})"
        ),
        ("mysql",),
        False,
    ),
    (
        # ``docker login -p S3cret`` / ``--password S3cret`` (not ``--password-stdin``)
        "docker-login-password",
        re.compile(
            r"docker(?<!\wdocker)\s+login\b[^\n|;]*?\s(?:-p|--password)(?:\s+|=)[\"']?(?P<v>[^\s\"'|;&$]{3,})"
        ),
        ("docker",),
        False,
    ),
    (
        "sshpass-password",
        re.compile(r"sshpass(?<!\wsshpass)\s+-p\s*(?P<v>[^\s\"']{3,})"),
        ("sshpass",),
        False,
    ),
    (
        "curl-user-password",
        re.compile(
            r"curl(?<!\wcurl)\b[^\n|;]*?\s(?:-u|--user)\s+[\"']?[^\s:\"']+:(?P<v>(?![$<{%])[^\s@\"']{3,})"
        ),
        ("curl",),
        False,
    ),
    (
        "bearer-token",
        re.compile(r"(?i)\bbearer\s+(?P<v>[A-Za-z0-9._~+/-]{20,}=*)"),
        ("bearer",),
        True,
    ),
    (
        "jwt",
        re.compile(r"(?P<v>\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"),
        ("eyJ",),
        False,
    ),
    (
        "connection-string",
        re.compile(r"\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@\"']{1,64}:(?P<v>[^\s@/\"']{3,128})@"),
        ("://",),
        False,
    ),
    (
        # environment style: an upper-case name holding SECRET/TOKEN/... and ``=``
        "credential",
        re.compile(
            r"(?:SECRET|TOKEN|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY)"
            r"[A-Z0-9_]*\s*=\s*[\"']?" + _VALUE
        ),
        ("SECRET", "TOKEN", "PASSW", "KEY"),
        False,
    ),
)

#: Keyword style in any case: ``password: x``, ``"api_key": "x"``, ``--token x``. The value
#: must look like a secret (:func:`_looks_secret`), so ``password: required``,
#: ``max_tokens: 4096`` or ``totalTokens: usage.totalTokens`` are not secrets.
_KEYWORD = re.compile(
    r"(?i)(?P<flag>--?)?(?P<name>[a-z0-9_.-]{0,40}?"
    r"(?:password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key|auth[_-]?key"
    r"|private[_-]?key|client[_-]?secret|credentials?|(?<![a-z])(?:pass|pwd)(?![a-z]))"
    r"[a-z0-9_-]{0,20})"
    r"[\"']?(?P<sep>\s*[:=]\s*|\s+(?:(?:is|was)\s+)?)[\"']?" + _VALUE
)
#: The part of a :data:`_KEYWORD` match from its keyword on: a window without one cannot hold
#: a match, and this leads with the keyword, so the regex engine skips ahead to it (5x faster
#: than trying the lazy name prefix at every position of the window).
_KEYWORD_TAIL = re.compile(
    r"(?i)(?:password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key|auth[_-]?key"
    r"|private[_-]?key|client[_-]?secret|credentials?|(?<![a-z])(?:pass|pwd)(?![a-z]))"
    r"[a-z0-9_-]{0,20}"
    r"[\"']?(?P<sep>\s*[:=]\s*|\s+(?:(?:is|was)\s+)?)[\"']?" + _VALUE
)
_KEYWORD_ANCHORS = ("pass", "pwd", "secret", "token", "key", "credential")
_KEYWORD_WINDOW = (80, 240)
_STRONG = re.compile(r"[0-9!@#$%^&*+/=~]")
_NUMBER = re.compile(r"[0-9.,_]+")
_PATH_STARTS = ("/", "./", "../", "~/")
_DOTTED = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+")

#: ``sha256:<64 hex>``: every id in this product. Never a secret.
HASH = re.compile(r"(?:sha256:)?[0-9a-f]{64}")

#: detect-secrets plugins used (module, class, anchors, lowered); a plugin runs only on a text
#: holding one of its anchors (read off detect-secrets 1.5's patterns).
_PLUGINS: tuple[tuple[str, str, tuple[str, ...], bool], ...] = (
    ("aws", "AWSKeyDetector", ("a3t", "abia", "acca", "akia", "asia"), True),
    ("artifactory", "ArtifactoryDetector", ("AKC", "AP"), False),
    ("azure_storage_key", "AzureStorageKeyDetector", ("AccountKey=",), False),
    ("basic_auth", "BasicAuthDetector", ("://",), False),
    ("discord", "DiscordBotTokenDetector", (), False),
    ("github_token", "GitHubTokenDetector", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), False),
    ("gitlab_token", "GitLabTokenDetector", ("gl", "GR1348941"), False),
    ("jwt", "JwtTokenDetector", ("eyJ",), False),
    ("mailchimp", "MailchimpDetector", ("-us",), False),
    ("npm", "NpmDetector", ("_authToken",), False),
    ("openai", "OpenAIDetector", ("T3BlbkFJ",), False),
    ("private_key", "PrivateKeyDetector", ("PRIVATE KEY", "PuTTY-User-Key"), False),
    ("pypi_token", "PypiTokenDetector", ("pypi-",), False),
    ("sendgrid", "SendGridDetector", ("SG.",), False),
    ("slack", "SlackDetector", ("xox", "hooks.slack.com"), True),
    ("square_oauth", "SquareOAuthDetector", ("sq0csp-",), False),
    ("stripe", "StripeDetector", ("k_live_",), False),
    ("telegram_token", "TelegramBotTokenDetector", (":AA",), False),
    ("twilio", "TwilioKeyDetector", ("AC", "SK"), False),
)

#: ``(start, end, kind)`` of one secret value in a text (character offsets)
Span = tuple[int, int, str]


@lru_cache(maxsize=1)
def _plugins() -> tuple[tuple[Any, tuple[str, ...], bool], ...]:
    """The detect-secrets plugin instances, built once (public classes, default options)."""
    import importlib

    out = []
    for module, name, anchors, lowered in _PLUGINS:
        try:
            cls = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)
        except (ImportError, AttributeError):  # a plugin missing from this version
            continue
        out.append((cls(), anchors, lowered))
    return tuple(out)


#: A gate for a plugin with no anchor: a regex every match of the plugin's patterns holds,
#: led by a literal the engine skips to. Used only while the plugin's patterns are the ones
#: it was read off (detect-secrets 1.5) and it scans with them alone: ``{class: (patterns,
#: gate)}``. A Discord bot token ends ``.<6>.<27>``.
_PLUGIN_GATES: dict[str, tuple[tuple[str, ...], re.Pattern[str]]] = {
    "DiscordBotTokenDetector": (
        (r"[MNO][a-zA-Z\d_-]{23,25}\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}",),
        re.compile(r"\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}"),
    ),
}


@lru_cache(maxsize=1)
def _plugin_gates() -> tuple[re.Pattern[str] | None, ...]:
    """Per plugin of :func:`_plugins`, its gate of :data:`_PLUGIN_GATES`, or ``None``."""
    from detect_secrets.plugins.base import RegexBasedDetector

    out: list[re.Pattern[str] | None] = []
    for plugin, _anchors, _lowered in _plugins():
        known = _PLUGIN_GATES.get(type(plugin).__name__)
        patterns = tuple(p.pattern for p in getattr(plugin, "denylist", ()))
        plain = type(plugin).analyze_string is RegexBasedDetector.analyze_string
        out.append(known[1] if known and plain and patterns == known[0] else None)
    return tuple(out)


def _kind(secret_type: str) -> str:
    return secret_type.lower().replace(" ", "-").replace("(", "").replace(")", "")


def _keyword_windows(text: str, low: str) -> list[tuple[int, int]]:
    """Spans of ``text`` around each keyword anchor (within its line), merged, in order."""
    spans: list[tuple[int, int]] = []
    before, after = _KEYWORD_WINDOW
    for anchor in _KEYWORD_ANCHORS:
        i = low.find(anchor)
        while i >= 0:
            line_start = low.rfind("\n", 0, i) + 1
            line_end = low.find("\n", i)
            line_end = len(low) if line_end < 0 else line_end
            spans.append((max(line_start, i - before), min(line_end, i + after)))
            i = low.find(anchor, i + len(anchor))
    spans.sort()
    merged: list[list[int]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


#: How many characters a keyword of :data:`_KEYWORD_TAIL` may start before the keyword
#: anchor it holds (``private_key``: 8 before ``key``; ``client_secret``: 7 before ``secret``).
_ANCHOR_LEAD = 8


#: :data:`_KEYWORD_TAIL` starting at most :data:`_ANCHOR_LEAD` characters after the place
#: it is tried at (each start in the window, so each finds only what a search of it finds)
_KEYWORD_TAIL_NEAR = re.compile(
    rf"(?i)[\s\S]{{0,{_ANCHOR_LEAD}}}?(?:{_KEYWORD_TAIL.pattern.removeprefix('(?i)')})"
)


def _tail_in(text: str, low: str, wa: int, wb: int) -> bool:
    """Whether :data:`_KEYWORD_TAIL` matches in the window ``text[wa:wb]``: the answer of
    ``_KEYWORD_TAIL.search(text, wa, wb) is not None``, computed faster.

    A match starts with a keyword, and every keyword holds one of :data:`_KEYWORD_ANCHORS` at
    most :data:`_ANCHOR_LEAD` characters after its start; so in an ASCII window (where the
    pattern's ignore-case matching is ASCII case folding, which ``low`` holds) the pattern is
    tried only at those places before each anchor the window holds, instead of at each of
    its positions (the keyword alternation ignoring case has no prefix the engine can skip
    to). A window with any other character is searched whole: there Unicode case folding
    (``ſ`` for ``s``, the Kelvin sign for ``k``) can match a keyword ``low`` does not spell.
    """
    if not text[wa:wb].isascii():
        return _KEYWORD_TAIL.search(text, wa, wb) is not None
    for anchor in _KEYWORD_ANCHORS:
        i = low.find(anchor, wa, wb)
        while i >= 0:
            if _KEYWORD_TAIL_NEAR.match(text, max(wa, i - _ANCHOR_LEAD), wb):
                return True
            i = low.find(anchor, i + len(anchor), wb)
    return False


def _looks_secret(value: str) -> bool:
    """A keyword's value is a secret when it holds a digit or a symbol and is not a number,
    a path, a hash or a code reference (``usage.totalTokens``, ``process.env.KEY``)."""
    if HASH.fullmatch(value) or _NUMBER.fullmatch(value) or value.startswith(_PATH_STARTS):
        return False  # ``max_tokens: 128000000``, ``--token-file /run/x``
    if _DOTTED.fullmatch(value):
        return False
    return bool(_STRONG.search(value))


def _looks_generated(value: str) -> bool:
    """A value in prose after a keyword is a secret only when it looks generated: at least 10
    characters mixing lower case, upper case and digits, and not a path, hash or number."""
    return (
        len(value) >= 10
        and _looks_secret(value)
        and any(c.islower() for c in value)
        and any(c.isupper() for c in value)
        and any(c.isdigit() for c in value)
    )


@lru_cache(maxsize=1)
def _anchor_automata() -> tuple[Any, Any]:
    """Aho-Corasick automata (``pyahocorasick``) of every anchor of :data:`PROVIDER_PATTERNS`
    and of the plugins: one over the text, one over the lower-cased text (the anchors marked
    ``lowered``). Each anchor's value is the scanners it lets run: ``("p", i)`` for the
    pattern ``PROVIDER_PATTERNS[i]``, ``("g", j)`` for the plugin ``_plugins()[j]``."""
    import ahocorasick

    words: tuple[dict[str, list[tuple[str, int]]], dict[str, list[tuple[str, int]]]] = ({}, {})
    for i, (_kind, _pattern, anchors, lowered) in enumerate(PROVIDER_PATTERNS):
        for a in anchors:
            words[lowered].setdefault(a, []).append(("p", i))
    for j, (_plugin, anchors, lowered) in enumerate(_plugins()):
        for a in anchors:
            words[lowered].setdefault(a, []).append(("g", j))
    out = []
    for table in words:
        automaton = ahocorasick.Automaton()
        for word, scanners in table.items():
            automaton.add_word(word, tuple(scanners))
        automaton.make_automaton()
        out.append(automaton)
    return out[0], out[1]


def _runnable(text: str, low: str) -> set[tuple[str, int]]:
    """The scanners (as in :func:`_anchor_automata`) one of whose anchors ``text`` holds (in
    ``low`` for a lowered one): the same set as testing each anchor with ``in``, found in
    one pass over each text instead of one per anchor."""
    exact, lowered = _anchor_automata()
    run: set[tuple[str, int]] = set()
    for hay, automaton in ((text, exact), (low, lowered)):
        for _end, scanners in automaton.iter(hay):
            run.update(scanners)
    return run


def raw_spans(text: str) -> Iterable[Span]:
    """Every ``(start, end, kind)`` a pattern, keyword or plugin matches in ``text``, in scan
    order, overlapping and unmerged (:func:`journal_app.privacy.secret_spans` merges them and
    drops those touching a hash or a mark). ``kind`` as in that function."""
    low = text.lower()
    run = _runnable(text, low)
    for i, (kind, pattern, _anchors, _lowered) in enumerate(PROVIDER_PATTERNS):
        if ("p", i) not in run:
            continue
        for m in pattern.finditer(text):
            a, b = (m.start("v"), m.end("v")) if "v" in pattern.groupindex else m.span()
            yield a, b, kind
    if len(low) == len(text):
        for wa, wb in _keyword_windows(text, low):
            if not _tail_in(text, low, wa, wb):
                continue
            for m in _KEYWORD.finditer(text, wa, wb):
                sep = m.group("sep")
                sep_is_space = ":" not in sep and "=" not in sep  # `` ``, `` is ``
                name = m.group("name")
                # ``name value`` for an option (``--token x``) or a compound name
                # (``aws_secret_access_key x``); in prose ("the token is ...", "password
                # reset") only a value that looks generated: an echoed credential such as
                # "failed with password Sup3rS3cretValue99" is still caught
                if sep_is_space and not (m.group("flag") or "_" in name):
                    if not _looks_generated(m.group("v")):
                        continue
                if _looks_secret(m.group("v")):
                    yield m.start("v"), m.end("v"), "secret-keyword"
    for j, ((plugin, anchors, _lowered), gate) in enumerate(
        zip(_plugins(), _plugin_gates(), strict=True)
    ):
        if anchors and ("g", j) not in run:
            continue
        if gate is not None and gate.search(text) is None:
            continue
        for value in plugin.analyze_string(text):
            if not isinstance(value, str) or len(value) < 6:
                continue  # a token prefix (e.g. "ghp"): the provider patterns cover it
            kind = _kind(plugin.secret_type)
            start = 0
            while (i := text.find(value, start)) >= 0:
                yield i, i + len(value), kind
                start = i + len(value)
