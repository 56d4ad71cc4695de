"""Every invariant a request for the next model call must hold (DESIGN.md section 6, seed 001).

Pure module: no Django, no database. It checks a message list in either target format,
OpenAI Chat Completions (``[{"role", "content", "tool_calls"?, "tool_call_id"?}]``) or
Anthropic Messages (``{"system"?, "messages": [...]}`` or a bare message list with typed
``text`` / ``tool_use`` / ``tool_result`` / ``thinking`` blocks), and returns every problem,
each named by its check and by the message, call, pin, reference or entry it concerns.

Checks (the names are the ``check`` field of a :class:`Problem`):

========================  ==============================================================
malformed_message         not an object, unknown role, content of the wrong type
lone_surrogate            a string holds an unpaired UTF-16 surrogate (no UTF-8 form)
empty_message             no content at all (``""``, ``null``, ``[]``, an empty text block)
reasoning_only_message    an assistant message holding only hidden reasoning
duplicate_tool_call_id    two tool calls share an id
orphan_tool_call          a tool call with no result (one of N parallel calls, or alone)
orphan_tool_result        a tool result whose call is not right before it
split_parallel_calls      the results of calls issued together are not all right after them
tool_result_out_of_place  a single call's result exists but not right after the call
within_working_budget     the request is over the working budget (tokens)
within_hard_limit         the request is over the hard limit minus the output reserve
pin_verbatim              a pin (P0 instruction) is not present byte for byte
current_user_goal         the latest user message is not present verbatim
task_state                an interrupted call or a pending approval is not in the task state
artifact_reference        an ``artifact://`` reference does not resolve
artifact_hash             the artifact's stored bytes or stated hash do not match
no_secrets                a secret (provider key, credential) is present
no_hidden_reasoning       hidden reasoning in the client-visible (frontend) view
no_private_metadata       private tool or runtime metadata in the client-visible view
========================  ==============================================================

Token figures are counted by a :class:`Meter` (tiktoken ``o200k_base`` by default, via
:func:`journal_app.tokens.count_tokens`): the text of every part, tool names and arguments,
a fixed cost per message and per request, and a flat cost per image (an image's base64 data
is never counted as text: case 16). These are estimates of what the provider will bill,
labelled ``tiktoken:<encoding>`` wherever they are reported.

Secrets (DESIGN.md sections 6, 7 and 9; case 20): :func:`secret_spans` combines the
provider key patterns below with ``detect-secrets``' pattern plugins and its keyword plugin.
The entropy plugins are left out on purpose: they flag every content hash this product
writes (``sha256:<hex>``). :func:`redact` replaces each value with ``[REDACTED:<kind>]``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from journal_app.tokens import count_tokens

FORMATS = ("openai", "anthropic")
TASK_STATE_MARK = "[task state"
RECEIPT_MARK = "[artifact receipt"
REDACTED = "[REDACTED:{kind}]"
ARTIFACT_REF = re.compile(r"artifact://[A-Za-z0-9._-]+/([0-9a-f]{64})")
_SURROGATE = re.compile("[\ud800-\udfff]")
_OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_ANTHROPIC_ROLES = ("user", "assistant")
_TEXT_PARTS = ("text", "input_text", "output_text")
_REASONING_BLOCKS = ("thinking", "redacted_thinking", "reasoning")
_REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")
#: Keys a frontend-view item may carry (anything else is private metadata).
FRONTEND_KEYS = frozenset(
    {"seq", "role", "kind", "text", "tool", "is_error", "attachments", "truncated", "status"}
)


# ------------------------------------------------------------------------------- tokens


@dataclass(frozen=True)
class Meter:
    """How a request is counted, in tokens.

    Attributes:
        count: ``count(text) -> int``; default tiktoken ``o200k_base``.
        per_message: fixed cost of each message (role, separators): 4, as in OpenAI's
            published accounting for chat models.
        per_request: fixed cost of the reply primer: 3.
        per_image: flat cost of an image or other non-text part: 1,000 (case 16: an
            image is not its base64 payload).
        label: where the figure comes from, stored next to it.
    """

    count: Callable[[str], int] = count_tokens
    per_message: int = 4
    per_request: int = 3
    per_image: int = 1000
    label: str = "tiktoken:o200k_base"

    def text(self, text: Any) -> int:
        if not isinstance(text, str) or not text:
            return 0
        try:
            return self.count(text)
        except UnicodeEncodeError:  # a lone surrogate: count it as a replacement character
            return self.count(_SURROGATE.sub("\ufffd", text))

    def _part(self, part: Any) -> int:
        if isinstance(part, str):
            return self.text(part)
        if not isinstance(part, dict):
            return 0
        kind = part.get("type")
        if kind in _TEXT_PARTS or (kind is None and "text" in part):
            return self.text(part.get("text"))
        if kind == "refusal":
            return self.text(part.get("refusal"))
        if kind == "tool_use":
            return self.text(part.get("name")) + self.text(_compact(part.get("input")))
        if kind == "tool_result":
            return self._content(part.get("content"))
        if kind == "thinking":
            return self.text(part.get("thinking"))
        if kind == "redacted_thinking":
            return self.text(part.get("data"))
        return self.per_image

    def _content(self, content: Any) -> int:
        if isinstance(content, list):
            return sum(self._part(p) for p in content)
        return self.text(content)

    def message(self, message: Any) -> int:
        """Tokens of one message of either format."""
        if not isinstance(message, dict):
            return self.per_message
        total = self.per_message + self._content(message.get("content"))
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict):
                fn = call.get("function") if isinstance(call.get("function"), dict) else {}
                total += self.text(fn.get("name")) + self.text(fn.get("arguments"))
        if isinstance(message.get("name"), str):
            total += self.text(message["name"])
        return total

    def system(self, system: Any) -> int:
        """Tokens of an Anthropic ``system`` parameter (string or text blocks)."""
        if system in (None, "", []):
            return 0
        return self.per_message + self._content(system)

    def request(self, messages: Sequence[Any], system: Any = None) -> int:
        """Tokens of a whole request: every message, the system parameter, the primer."""
        return self.per_request + self.system(system) + sum(self.message(m) for m in messages)


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def memo_counter(
    count: Callable[[str], int], seed: Mapping[str, int] | None = None
) -> Callable[[str], int]:
    """``count`` with a per-call-site memory: each distinct text is counted once.

    ``seed`` holds figures already known for some texts (the journal stores each entry's
    tiktoken count at append time), so those texts are not counted again.
    """
    seen: dict[str, int] = dict(seed or {})

    def counted(text: str) -> int:
        n = seen.get(text)
        if n is None:
            n = seen[text] = count(text)
        return n

    return counted


# ------------------------------------------------------------------------------ secrets

#: Provider key patterns: ``(kind, regex, anchors)``; group ``v`` is the value when present.
#: A pattern runs only on a text holding one of its anchors (a substring every match holds).
#: The assignment pattern needs an upper-case, environment-style name (``*_API_KEY``,
#: ``*SECRET*``) and ``=``, and skips values that are references (``$VAR``,
#: ``<placeholder>``) or already redacted.
PROVIDER_PATTERNS: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = (
    (
        "private-key",
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
        ),
        ("PRIVATE KEY-----",),
    ),
    ("anthropic-key", re.compile(r"(?P<v>\bsk-ant-[A-Za-z0-9_-]{20,})"), ("sk-ant-",)),
    (
        "openai-key",
        re.compile(r"(?P<v>\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,})"),
        ("sk-",),
    ),
    ("aws-access-key", re.compile(r"(?P<v>\b(?:AKIA|ASIA)[0-9A-Z]{16}\b)"), ("AKIA", "ASIA")),
    (
        "github-token",
        re.compile(r"(?P<v>\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}))"),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    ("gitlab-token", re.compile(r"(?P<v>\bglpat-[A-Za-z0-9_-]{20,})"), ("glpat-",)),
    ("slack-token", re.compile(r"(?P<v>\bxox[abposr]-[A-Za-z0-9-]{10,})"), ("xox",)),
    ("google-api-key", re.compile(r"(?P<v>\bAIza[0-9A-Za-z_-]{35})"), ("AIza",)),
    (
        "stripe-key",
        re.compile(r"(?P<v>\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,})"),
        ("k_live_", "k_test_"),
    ),
    (
        "bearer-token",
        re.compile(r"[Bb]earer\s+(?P<v>[A-Za-z0-9._~+/-]{20,}=*)"),
        ("earer",),
    ),
    (
        "credential",
        re.compile(
            r"(?:SECRET|TOKEN|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY)"
            r"[A-Z0-9_]*\s*=\s*[\"']?(?P<v>(?![$<{\[])[^\s\"'`\\,;&|)]{8,})"
        ),
        ("SECRET", "TOKEN", "PASSW", "KEY"),
    ),
)

#: detect-secrets plugins left out: the entropy plugins flag every content hash this product
#: writes (``sha256:<hex>``); a public IP address is not a secret.
_SKIPPED_PLUGINS = {"Base64HighEntropyString", "HexHighEntropyString", "IPPublicDetector"}
#: ``plugin -> (anchors, on the lower-cased text)``: a plugin runs only on a text holding one
#: of its anchors, a substring every match of its patterns holds (read off detect-secrets
#: 1.5's patterns); plugins without an entry always run.
_PLUGIN_ANCHORS: dict[str, tuple[tuple[str, ...], bool]] = {
    "AWSKeyDetector": (("a3t", "abia", "acca", "akia", "asia", "aws"), True),
    "AzureStorageKeyDetector": (("AccountKey=",), False),
    "BasicAuthDetector": (("://",), False),
    "GitHubTokenDetector": (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), False),
    "GitLabTokenDetector": (("gl", "GR1348941"), False),
    "JwtTokenDetector": (("eyJ",), False),
    "MailchimpDetector": (("-us",), False),
    "NpmDetector": (("_authToken",), False),
    "OpenAIDetector": (("T3BlbkFJ",), False),
    "PrivateKeyDetector": (("PRIVATE KEY", "PuTTY-User-Key"), False),
    "PypiTokenDetector": (("pypi-",), False),
    "SendGridDetector": (("SG.",), False),
    "SlackDetector": (("xox", "hooks.slack.com"), True),
    "SquareOAuthDetector": (("sq0csp-",), False),
    "StripeDetector": (("k_live_",), False),
}
#: Plugins whose patterns are ``<keyword> = <long value>`` on one line (Cloudant, IBM Cloud
#: IAM, IBM COS HMAC, SoftLayer; their values are 24 to 64 characters): they run only over
#: the lines holding a keyword anchor and a run of 24 or more word characters.
_LINE_PLUGINS = {
    "CloudantDetector",
    "IbmCloudIamDetector",
    "IbmCosHmacDetector",
    "SoftlayerDetector",
}
_LONG_RUN = re.compile(r"[\w-]{24}")
#: Artifactory keys start ``AKC`` or ``AP`` and a hex digit.
_ARTIFACTORY = re.compile(r"AKC|AP[0-9A-F]")
#: Keyword anchors (detect-secrets' keyword denylist, and the vendor plugins' keywords).
_KEYWORD_ANCHORS = ("key", "pw", "pass", "token", "secret", "contrase")


@lru_cache(maxsize=1)
def _detectors() -> tuple[tuple[tuple[Any, str, tuple[str, ...], bool], ...], Any]:
    """detect-secrets' pattern plugins with how each is gated, and its keyword plugin."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.keyword import KeywordDetector

    plugins = []
    for cls in get_mapping_from_secret_type_to_class().values():
        name = cls.__name__
        if name in _SKIPPED_PLUGINS or not issubclass(cls, RegexBasedDetector):
            continue
        if name in _LINE_PLUGINS:
            gate = "lines"
        elif name == "ArtifactoryDetector":
            gate = "artifactory"
        else:
            gate = "anchors"
        plugins.append((cls(), gate, *_PLUGIN_ANCHORS.get(name, ((), False))))
    return tuple(plugins), KeywordDetector()


#: Characters kept before and after a keyword hit: the keyword patterns put their value
#: within a few dozen characters of the keyword (a long JSON line is not scanned whole).
_WINDOW = (120, 360)


def _keyword_windows(text: str, low: str) -> list[str]:
    """The excerpts of ``text`` around each keyword anchor: the part of the anchor's line
    within :data:`_WINDOW` of it, overlapping excerpts merged, in order (found with
    ``str.find``: a text of many lines and few keywords costs little)."""
    spans: list[tuple[int, int]] = []
    before, after = _WINDOW
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
        if merged and a <= merged[-1][1] and "\n" not in text[merged[-1][1] : a]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [text[a:b] for a, b in merged]


def _plugin_values(text: str) -> Iterable[tuple[str, str]]:
    plugins, keyword = _detectors()
    low = text.lower()
    if len(low) == len(text):
        windows = _keyword_windows(text, low)
    else:  # lower-casing changed the length (rare scripts): fall back to whole lines
        windows = [ln for ln in text.splitlines() if any(a in ln.lower() for a in _KEYWORD_ANCHORS)]
    long_lines = "\n".join(w for w in windows if _LONG_RUN.search(w))
    for plugin, gate, anchors, lowered in plugins:
        target = text
        if gate == "lines":
            if not long_lines:
                continue
            target = long_lines
        elif gate == "artifactory":
            if not _ARTIFACTORY.search(text):
                continue
        elif anchors and not any(a in (low if lowered else text) for a in anchors):
            continue
        for value in plugin.analyze_string(target):
            if isinstance(value, str):
                yield plugin.secret_type, value
    for window in windows:
        # what analyze_line does for a file of no known type, without its per-line wrapping
        for value in keyword.analyze_string(window):
            if isinstance(value, str) and value:
                yield "secret-keyword", value


def secret_spans(text: str) -> list[tuple[int, int, str]]:
    """``[(start, end, kind)]`` character spans of secrets in ``text``, merged, in order.

    A span never covers a ``[REDACTED:...]`` marker, so redacted text scans clean.
    """
    if not text:
        return []
    spans: list[tuple[int, int, str]] = []
    for kind, pattern, anchors in PROVIDER_PATTERNS:
        if not any(a in text for a in anchors):
            continue
        for m in pattern.finditer(text):
            a, b = (m.start("v"), m.end("v")) if "v" in pattern.groupindex else m.span()
            spans.append((a, b, kind))
    for kind, value in _plugin_values(text):
        if len(value) < 6 or "[REDACTED" in value:
            continue
        start = 0
        while (i := text.find(value, start)) >= 0:
            spans.append((i, i + len(value), kind.lower().replace(" ", "-")))
            start = i + len(value)
    spans = [s for s in spans if "[REDACTED:" not in text[s[0] : s[1]]]
    spans.sort(key=lambda s: (s[0], -s[1]))
    merged: list[tuple[int, int, str]] = []
    for a, b, kind in spans:
        if merged and a <= merged[-1][1]:
            pa, pb, pk = merged[-1]
            merged[-1] = (pa, max(pb, b), pk)
        else:
            merged.append((a, b, kind))
    return merged


Scanner = Callable[[str], list[tuple[int, int, str]]]


def memo_scanner() -> Scanner:
    """:func:`secret_spans` remembering each text it scanned (one build's worth)."""
    seen: dict[str, list[tuple[int, int, str]]] = {}

    def scan(text: str) -> list[tuple[int, int, str]]:
        found = seen.get(text)
        if found is None:
            found = seen[text] = secret_spans(text)
        return found

    return scan


def redact(text: str, scan: Scanner | None = None) -> tuple[str, list[str]]:
    """``text`` with every secret value replaced by ``[REDACTED:<kind>]``, and the kinds.

    The rest of the line (variable names, the fact that a key is set) stays (case 20).
    ``scan`` finds the spans (default :func:`secret_spans`).
    """
    spans = (scan or secret_spans)(text)
    if not spans:
        return text, []
    out, pos, kinds = [], 0, []
    for a, b, kind in spans:
        out.append(text[pos:a])
        out.append(REDACTED.format(kind=kind))
        kinds.append(kind)
        pos = b
    out.append(text[pos:])
    return "".join(out), kinds


# ------------------------------------------------------------------------------ reports


@dataclass(frozen=True)
class Problem:
    """One broken invariant.

    Attributes:
        check: the check's name (table in the module docstring).
        message: one sentence naming what is wrong and where.
        index: the message's position in the list (``None`` for the request as a whole).
        ref: what inside it: a tool call id, a pin id, an artifact reference, a field path.
        entry: the journal entry it concerns (``sha256:<hex>``) when the caller said which
            entry each message came from; else ``""``.
    """

    check: str
    message: str
    index: int | None = None
    ref: str = ""
    entry: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "message": self.message,
            "index": self.index,
            "ref": self.ref,
            "entry": self.entry,
        }


@dataclass
class ValidationReport:
    """Every problem of one view, the checks that ran and the token figure."""

    view: str
    format: str
    problems: list[Problem] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    tokens: int | None = None
    token_source: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems

    def failed(self, *checks: str) -> list[Problem]:
        """The problems of the named checks (all problems when none is named)."""
        return [p for p in self.problems if not checks or p.check in checks]

    def to_dict(self) -> dict[str, Any]:
        return {
            "view": self.view,
            "format": self.format,
            "ok": self.ok,
            "tokens": self.tokens,
            "token_source": self.token_source,
            "checks": list(self.checks),
            "problems": [p.to_dict() for p in self.problems],
        }


@dataclass(frozen=True)
class ArtifactInfo:
    """What the store says about one artifact reference.

    Attributes:
        content_hash: the artifact's sha256 hex.
        stored_ok: ``True`` when the stored bytes were re-read and hash to ``content_hash``,
            ``False`` when they do not (or are gone), ``None`` when not re-read.
    """

    content_hash: str
    stored_ok: bool | None = None


@dataclass
class Expectations:
    """What the journal and ledger say must be in a request (built from the primary source).

    Attributes:
        pins: ``[(pin id, entry hex, text)]``: each text must be present byte for byte.
        goal: ``(entry hex, text)`` of the current user goal, or ``None``.
        interrupted: ``[(call id, entry hex)]`` of calls that did not complete.
        approvals: ``[(approval id, entry hex)]`` of pending approvals.
        sources: per message index, the entry hashes it was built from.
        calls: tool call id in the request -> entry hex of the call; ``results`` likewise.
        secrets_exempt: texts allowed to hold what looks like a secret (pins: a user's own
            instruction is kept verbatim).
    """

    pins: Sequence[tuple[str, str, str]] = ()
    goal: tuple[str, str] | None = None
    interrupted: Sequence[tuple[str, str]] = ()
    approvals: Sequence[tuple[str, str]] = ()
    sources: Sequence[Sequence[str]] = ()
    calls: Mapping[str, str] = field(default_factory=dict)
    results: Mapping[str, str] = field(default_factory=dict)
    secrets_exempt: frozenset[str] = frozenset()


def _hex(h: str) -> str:
    return f"sha256:{h}" if h and not h.startswith("sha256:") else h


# --------------------------------------------------------------------------- structure


def detect_format(request: Any) -> str:
    """``"anthropic"`` or ``"openai"`` for a message list or a request object.

    Anthropic when there is a top-level ``system`` with no OpenAI marker, or a content
    block of an Anthropic-only type (``tool_use``, ``tool_result``, ``thinking``,
    ``redacted_thinking``, ``image`` with ``source``); OpenAI otherwise.
    """
    messages = request.get("messages") if isinstance(request, dict) else request
    if not isinstance(messages, list):
        return "openai"
    for m in messages:
        if not isinstance(m, dict):
            continue
        if m.get("role") in ("system", "developer", "tool") or "tool_calls" in m:
            return "openai"
        if "tool_call_id" in m:
            return "openai"
        content = m.get("content")
        if isinstance(content, list):
            for b in content:
                if isinstance(b, dict) and (
                    b.get("type") in ("tool_use", "tool_result", *_REASONING_BLOCKS[:2])
                    or (b.get("type") == "image" and "source" in b)
                ):
                    return "anthropic"
    if isinstance(request, dict) and "system" in request:
        return "anthropic"
    return "openai"


def split_request(
    request: Any, fmt: str | None = None
) -> tuple[str, list[Any], Any, list[Problem]]:
    """``(format, messages, system, problems)`` of a request object or a bare message list."""
    problems: list[Problem] = []
    fmt = fmt or detect_format(request)
    system = None
    if isinstance(request, dict):
        messages = request.get("messages")
        system = request.get("system")
    else:
        messages = request
    if not isinstance(messages, list):
        problems.append(
            Problem("malformed_message", "the request has no list of messages", None, "messages")
        )
        messages = []
    elif not messages:
        problems.append(Problem("empty_message", "the request has no messages", None, "messages"))
    return fmt, messages, system, problems


def _surrogates(value: Any, path: str, index: int | None, out: list[Problem]) -> None:
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            m = _SURROGATE.search(item)
            if m:
                out.append(
                    Problem(
                        "lone_surrogate",
                        f"{where}: character {m.start()} is an unpaired UTF-16 surrogate "
                        f"(U+{ord(m.group()):04X}); the text has no UTF-8 form",
                        index,
                        where,
                    )
                )
        elif isinstance(item, dict):
            for k, v in item.items():
                if isinstance(k, str) and _SURROGATE.search(k):
                    out.append(
                        Problem(
                            "lone_surrogate", f"{where}: a key holds a lone surrogate", index, where
                        )
                    )
                stack.append((f"{where}.{_SURROGATE.sub('?', str(k))}", v))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(item))


def _is_empty_content(content: Any) -> bool:
    if content is None:
        return True
    if isinstance(content, str):
        return content == ""
    if isinstance(content, list):
        return len(content) == 0
    return False


def _empty_text_blocks(content: Any) -> list[int]:
    if not isinstance(content, list):
        return []
    return [
        i
        for i, b in enumerate(content)
        if isinstance(b, dict) and b.get("type") in _TEXT_PARTS and b.get("text") == ""
    ]


class _Names:
    """Names a message's journal entry in a problem, when the caller gave the sources."""

    def __init__(self, expect: Expectations | None) -> None:
        self.expect = expect

    def of_message(self, index: int | None) -> str:
        if self.expect is None or index is None or index >= len(self.expect.sources):
            return ""
        hashes = self.expect.sources[index]
        return _hex(hashes[0]) if hashes else ""

    def of_call(self, call_id: str, index: int | None) -> str:
        if self.expect is not None and call_id in self.expect.calls:
            return _hex(self.expect.calls[call_id])
        return self.of_message(index)

    def of_result(self, call_id: str, index: int | None) -> str:
        if self.expect is not None and call_id in self.expect.results:
            return _hex(self.expect.results[call_id])
        return self.of_message(index)


def _openai_structure(messages: list[Any], names: _Names) -> list[Problem]:
    problems: list[Problem] = []
    seen_ids: dict[str, int] = {}
    claimed: set[int] = set()
    calls_at: dict[int, list[str]] = {}
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            problems.append(Problem("malformed_message", f"{where} is not an object", i, where))
            continue
        _surrogates(m, where, i, problems)
        role = m.get("role")
        if role not in _OPENAI_ROLES:
            problems.append(
                Problem("malformed_message", f"{where}: unknown role {role!r}", i, f"{where}.role")
            )
            continue
        content = m.get("content")
        if content is not None and not isinstance(content, str | list):
            problems.append(
                Problem(
                    "malformed_message",
                    f"{where}.content must be a string, a list of parts or null",
                    i,
                    f"{where}.content",
                    names.of_message(i),
                )
            )
        for k in _empty_text_blocks(content):
            problems.append(
                Problem(
                    "empty_message",
                    f"{where}.content[{k}] is an empty text part",
                    i,
                    f"{where}.content[{k}]",
                    names.of_message(i),
                )
            )
        raw_calls = m.get("tool_calls") if role == "assistant" else None
        if raw_calls is not None and not isinstance(raw_calls, list):
            problems.append(
                Problem("malformed_message", f"{where}.tool_calls must be a list", i, where)
            )
            raw_calls = None
        ids: list[str] = []
        for k, call in enumerate(raw_calls or []):
            cid = call.get("id") if isinstance(call, dict) else None
            if not isinstance(cid, str) or not cid:
                problems.append(
                    Problem(
                        "malformed_message",
                        f"{where}.tool_calls[{k}] has no id",
                        i,
                        f"{where}.tool_calls[{k}].id",
                    )
                )
                continue
            if cid in seen_ids:
                problems.append(
                    Problem(
                        "duplicate_tool_call_id",
                        f"{where}.tool_calls[{k}]: call id {cid!r} was already used by "
                        f"messages[{seen_ids[cid]}]",
                        i,
                        cid,
                        names.of_call(cid, i),
                    )
                )
            seen_ids[cid] = i
            ids.append(cid)
        if ids:
            calls_at[i] = ids
        if _is_empty_content(content) and not ids and not m.get("function_call"):
            if role == "assistant" and any(m.get(k) for k in _REASONING_FIELDS):
                problems.append(
                    Problem(
                        "reasoning_only_message",
                        f"{where}: an assistant message holding only reasoning",
                        i,
                        where,
                        names.of_message(i),
                    )
                )
            else:
                problems.append(
                    Problem(
                        "empty_message",
                        f"{where} ({role}) has no content",
                        i,
                        where,
                        names.of_message(i),
                    )
                )
    # pairing: the results of an assistant message's calls are the tool messages after it
    for i, ids in calls_at.items():
        j = i + 1
        answered: dict[str, int] = {}
        while (
            j < len(messages)
            and isinstance(messages[j], dict)
            and messages[j].get("role") == "tool"
        ):
            answered.setdefault(str(messages[j].get("tool_call_id")), j)
            j += 1
        claimed.update(k for k in range(i + 1, j) if messages[k].get("tool_call_id") in ids)
        for cid in ids:
            if cid in answered:
                continue
            later = next(
                (
                    k
                    for k in range(j, len(messages))
                    if isinstance(messages[k], dict)
                    and messages[k].get("role") == "tool"
                    and messages[k].get("tool_call_id") == cid
                ),
                None,
            )
            group = f"one of {len(ids)} parallel calls" if len(ids) > 1 else "a single call"
            if later is not None:
                claimed.add(later)
                check = "split_parallel_calls" if len(ids) > 1 else "tool_result_out_of_place"
                problems.append(
                    Problem(
                        check,
                        f"messages[{i}]: call {cid!r} ({group}) has its result at messages[{later}], "
                        "not among the tool messages right after the call",
                        i,
                        cid,
                        names.of_call(cid, i),
                    )
                )
            else:
                problems.append(
                    Problem(
                        "orphan_tool_call",
                        f"messages[{i}]: call {cid!r} ({group}) has no tool result",
                        i,
                        cid,
                        names.of_call(cid, i),
                    )
                )
    for k, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") != "tool" or k in claimed:
            continue
        cid = m.get("tool_call_id")
        if not isinstance(cid, str) or not cid:
            problems.append(
                Problem(
                    "malformed_message",
                    f"messages[{k}]: a tool message needs tool_call_id",
                    k,
                    f"messages[{k}].tool_call_id",
                )
            )
            continue
        problems.append(
            Problem(
                "orphan_tool_result",
                f"messages[{k}]: tool result for {cid!r} has no matching call in the assistant "
                "message before it",
                k,
                cid,
                names.of_result(cid, k),
            )
        )
    return problems


def _blocks(content: Any) -> list[Any]:
    return content if isinstance(content, list) else []


def _anthropic_structure(messages: list[Any], system: Any, names: _Names) -> list[Problem]:
    problems: list[Problem] = []
    if system is not None:
        _surrogates(system, "system", None, problems)
        if not isinstance(system, str | list):
            problems.append(
                Problem(
                    "malformed_message", "system must be a string or text blocks", None, "system"
                )
            )
        for k in _empty_text_blocks(system):
            problems.append(
                Problem(
                    "empty_message", f"system[{k}] is an empty text block", None, f"system[{k}]"
                )
            )
    if messages and isinstance(messages[0], dict) and messages[0].get("role") != "user":
        problems.append(
            Problem(
                "malformed_message",
                "messages[0]: an Anthropic request must start with a user message",
                0,
                "messages[0].role",
                names.of_message(0),
            )
        )
    seen_ids: dict[str, int] = {}
    uses: dict[int, list[str]] = {}
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            problems.append(Problem("malformed_message", f"{where} is not an object", i, where))
            continue
        _surrogates(m, where, i, problems)
        role = m.get("role")
        if role not in _ANTHROPIC_ROLES:
            problems.append(
                Problem("malformed_message", f"{where}: unknown role {role!r}", i, f"{where}.role")
            )
            continue
        content = m.get("content")
        if not isinstance(content, str | list):
            problems.append(
                Problem(
                    "malformed_message",
                    f"{where}.content must be a string or blocks",
                    i,
                    f"{where}.content",
                )
            )
            continue
        if _is_empty_content(content):
            problems.append(
                Problem(
                    "empty_message",
                    f"{where} ({role}) has no content",
                    i,
                    where,
                    names.of_message(i),
                )
            )
            continue
        for k in _empty_text_blocks(content):
            problems.append(
                Problem(
                    "empty_message",
                    f"{where}.content[{k}] is an empty text block",
                    i,
                    f"{where}.content[{k}]",
                    names.of_message(i),
                )
            )
        blocks = _blocks(content)
        if (
            role == "assistant"
            and blocks
            and all(isinstance(b, dict) and b.get("type") in _REASONING_BLOCKS for b in blocks)
        ):
            problems.append(
                Problem(
                    "reasoning_only_message",
                    f"{where}: an assistant message holding only reasoning",
                    i,
                    where,
                    names.of_message(i),
                )
            )
        ids = []
        for k, b in enumerate(blocks):
            if not isinstance(b, dict) or b.get("type") != "tool_use":
                continue
            cid = b.get("id")
            if not isinstance(cid, str) or not cid:
                problems.append(
                    Problem(
                        "malformed_message",
                        f"{where}.content[{k}] tool_use has no id",
                        i,
                        f"{where}.content[{k}].id",
                    )
                )
                continue
            if role != "assistant":
                problems.append(
                    Problem(
                        "malformed_message",
                        f"{where}.content[{k}]: tool_use in a user message",
                        i,
                        cid,
                    )
                )
                continue
            if cid in seen_ids:
                problems.append(
                    Problem(
                        "duplicate_tool_call_id",
                        f"{where}.content[{k}]: tool_use id {cid!r} was already used by messages[{seen_ids[cid]}]",
                        i,
                        cid,
                        names.of_call(cid, i),
                    )
                )
            seen_ids[cid] = i
            ids.append(cid)
        if ids:
            uses[i] = ids
    claimed: set[tuple[int, str]] = set()

    def results_in(k: int) -> list[str]:
        if (
            k >= len(messages)
            or not isinstance(messages[k], dict)
            or messages[k].get("role") != "user"
        ):
            return []
        return [
            str(b.get("tool_use_id"))
            for b in _blocks(messages[k].get("content"))
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]

    for i, ids in uses.items():
        nxt = results_in(i + 1)
        claimed.update((i + 1, c) for c in ids if c in nxt)
        for cid in ids:
            if cid in nxt:
                continue
            later = next((k for k in range(i + 2, len(messages)) if cid in results_in(k)), None)
            group = f"one of {len(ids)} parallel calls" if len(ids) > 1 else "a single call"
            if later is not None:
                claimed.add((later, cid))
                check = "split_parallel_calls" if len(ids) > 1 else "tool_result_out_of_place"
                problems.append(
                    Problem(
                        check,
                        f"messages[{i}]: tool_use {cid!r} ({group}) has its tool_result at messages[{later}], not in the next message",
                        i,
                        cid,
                        names.of_call(cid, i),
                    )
                )
            else:
                problems.append(
                    Problem(
                        "orphan_tool_call",
                        f"messages[{i}]: tool_use {cid!r} ({group}) has no tool_result in the next message",
                        i,
                        cid,
                        names.of_call(cid, i),
                    )
                )
    for k, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") != "user":
            continue
        for b in _blocks(m.get("content")):
            if not isinstance(b, dict) or b.get("type") != "tool_result":
                continue
            cid = b.get("tool_use_id")
            if not isinstance(cid, str) or not cid:
                problems.append(
                    Problem(
                        "malformed_message",
                        f"messages[{k}]: tool_result without tool_use_id",
                        k,
                        f"messages[{k}].content",
                    )
                )
                continue
            if (k, cid) in claimed:
                continue
            problems.append(
                Problem(
                    "orphan_tool_result",
                    f"messages[{k}]: tool_result for {cid!r} has no tool_use in the assistant message before it",
                    k,
                    cid,
                    names.of_result(cid, k),
                )
            )
    return problems


# ------------------------------------------------------------------------------ content


def message_texts(message: Any) -> list[str]:
    """Every text a message carries: the content string, each text part, tool arguments and
    results, and for multi-part content the parts joined with newlines (how the journal's
    importers join them, so a pin that spanned parts is still found)."""
    if not isinstance(message, dict):
        return []
    out: list[str] = []

    def add_content(content: Any) -> None:
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            texts = []
            for b in content:
                if not isinstance(b, dict):
                    continue
                if b.get("type") in _TEXT_PARTS and isinstance(b.get("text"), str):
                    texts.append(b["text"])
                elif b.get("type") == "tool_result":
                    add_content(b.get("content"))
                elif b.get("type") == "tool_use":
                    out.append(_compact(b.get("input")))
            out.extend(texts)
            if len(texts) > 1:
                out.append("\n".join(texts))

    add_content(message.get("content"))
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, dict) and isinstance(call.get("function"), dict):
            args = call["function"].get("arguments")
            if isinstance(args, str):
                out.append(args)
    return out


def _system_texts(system: Any) -> list[str]:
    if isinstance(system, str):
        return [system]
    if isinstance(system, list):
        return [b["text"] for b in system if isinstance(b, dict) and isinstance(b.get("text"), str)]
    return []


def _present(text: str, haystacks: Sequence[str]) -> bool:
    return any(text == h for h in haystacks) or any(text in h for h in haystacks)


def _receipt_hash(text: str, start: int) -> str | None:
    """The ``content_hash: sha256:<hex>`` stated in the receipt that holds position ``start``."""
    block_start = text.rfind(RECEIPT_MARK, 0, start + 1)
    if block_start < 0:
        return None
    m = re.search(r"content_hash: sha256:([0-9a-f]{64})", text[block_start : block_start + 4000])
    return m.group(1) if m else None


def _content_checks(
    messages: list[Any],
    system: Any,
    expect: Expectations,
    names: _Names,
    resolve: Callable[[str], ArtifactInfo | None] | None,
    check_secrets: bool,
    scan: Scanner,
) -> list[Problem]:
    problems: list[Problem] = []
    per_message = [message_texts(m) for m in messages]
    haystack = [t for texts in per_message for t in texts] + _system_texts(system)
    for pin_id, entry, text in expect.pins:
        if not _present(text, haystack):
            problems.append(
                Problem(
                    "pin_verbatim",
                    f"pin {pin_id} (entry {_hex(entry)}) is not present byte for byte",
                    None,
                    pin_id,
                    _hex(entry),
                )
            )
    if expect.goal is not None:
        entry, text = expect.goal
        if not _present(text, haystack):
            problems.append(
                Problem(
                    "current_user_goal",
                    f"the current user goal (entry {_hex(entry)}) is not present verbatim",
                    None,
                    "goal",
                    _hex(entry),
                )
            )
    task_texts = [t for t in haystack if TASK_STATE_MARK in t]
    for label, items in (
        ("interrupted call", expect.interrupted),
        ("pending approval", expect.approvals),
    ):
        for ident, entry in items:
            if not any(ident in t for t in task_texts):
                problems.append(
                    Problem(
                        "task_state",
                        f"{label} {ident!r} (entry {_hex(entry)}) is not represented in the task state",
                        None,
                        ident,
                        _hex(entry),
                    )
                )
    for i, texts in enumerate(per_message):
        seen: set[str] = set()
        for text in texts:
            for m in ARTIFACT_REF.finditer(text):
                ref = m.group(0)
                if ref in seen:
                    continue
                seen.add(ref)
                info = resolve(ref) if resolve is not None else None
                if info is None:
                    problems.append(
                        Problem(
                            "artifact_reference",
                            f"messages[{i}]: {ref} does not resolve to a stored artifact",
                            i,
                            ref,
                            names.of_message(i),
                        )
                    )
                    continue
                stated = _receipt_hash(text, m.start())
                if m.group(1) != info.content_hash or (
                    stated is not None and stated != info.content_hash
                ):
                    problems.append(
                        Problem(
                            "artifact_hash",
                            f"messages[{i}]: {ref} states a hash that differs from the artifact's sha256:{info.content_hash}",
                            i,
                            ref,
                            names.of_message(i),
                        )
                    )
                elif info.stored_ok is False:
                    problems.append(
                        Problem(
                            "artifact_hash",
                            f"messages[{i}]: the stored bytes of {ref} no longer hash to sha256:{info.content_hash}",
                            i,
                            ref,
                            names.of_message(i),
                        )
                    )
    if check_secrets:
        for i, texts in enumerate(per_message):
            for text in texts:
                if text in expect.secrets_exempt:
                    continue
                spans = scan(text)
                if spans:
                    kinds = ", ".join(sorted({k for _, _, k in spans}))
                    problems.append(
                        Problem(
                            "no_secrets",
                            f"messages[{i}] holds {len(spans)} secret value(s) ({kinds})",
                            i,
                            kinds,
                            names.of_message(i),
                        )
                    )
                    break
    return problems


# ---------------------------------------------------------------------------- entry points


def budget_problems(
    tokens: int, working_budget: int | None, hard_limit: int | None, output_reserve: int = 0
) -> list[Problem]:
    """The ``within_working_budget`` / ``within_hard_limit`` problems of a request of
    ``tokens`` tokens (a budget of ``None`` is not checked)."""
    out = []
    if working_budget is not None and tokens > working_budget:
        out.append(
            Problem(
                "within_working_budget",
                f"the request is {tokens} tokens, over the working budget of {working_budget}",
                None,
                "tokens",
            )
        )
    if hard_limit is not None and tokens > hard_limit - output_reserve:
        limit = hard_limit - output_reserve
        out.append(
            Problem(
                "within_hard_limit",
                f"the request is {tokens} tokens, over the hard limit {hard_limit} minus the "
                f"output reserve {output_reserve} = {limit}",
                None,
                "tokens",
            )
        )
    return out


def validate_request(
    request: Any,
    *,
    fmt: str | None = None,
    working_budget: int | None = None,
    hard_limit: int | None = None,
    output_reserve: int = 0,
    meter: Meter | None = None,
    expect: Expectations | None = None,
    resolve_artifact: Callable[[str], ArtifactInfo | None] | None = None,
    check_secrets: bool = False,
    view: str = "model",
    scan: Scanner | None = None,
) -> ValidationReport:
    """Check a request for the next model call against every invariant (DESIGN.md section 6).

    Args:
        request: an OpenAI message list, ``{"messages": [...]}``, or an Anthropic
            ``{"system", "messages"}`` object (or its bare message list). Any JSON value is
            accepted: what is not a request is reported, never raised.
        fmt: ``"openai"`` / ``"anthropic"``, or ``None`` to detect (:func:`detect_format`).
        working_budget / hard_limit: tokens; each check runs only when given. The hard
            check is against ``hard_limit - output_reserve`` (case 14).
        meter: how tokens are counted (default :class:`Meter`).
        expect: what the journal says must be present (pins, goal, task state) and which
            entry each message came from; ``None`` runs the structural checks only.
        resolve_artifact: ``reference -> ArtifactInfo | None``; references are checked only
            when ``expect`` is given.
        check_secrets: also run ``no_secrets`` over every text (pins exempt).
        scan: the secret scanner (default :func:`secret_spans`; a builder passes its
            memoized one so a text it already scanned is not scanned twice).

    Returns:
        :class:`ValidationReport` with every problem found.
    """
    meter = meter or Meter()
    fmt, messages, system, problems = split_request(request, fmt)
    if fmt not in FORMATS:
        problems.append(Problem("malformed_message", f"unknown format {fmt!r}", None, "format"))
        fmt = "openai"
    names = _Names(expect)
    checks = [
        "malformed_message",
        "lone_surrogate",
        "empty_message",
        "reasoning_only_message",
        "duplicate_tool_call_id",
        "orphan_tool_call",
        "orphan_tool_result",
        "split_parallel_calls",
        "tool_result_out_of_place",
    ]
    if fmt == "anthropic":
        problems += _anthropic_structure(messages, system, names)
    else:
        problems += _openai_structure(messages, names)
    tokens = meter.request(messages, system)
    if working_budget is not None:
        checks.append("within_working_budget")
    if hard_limit is not None:
        checks.append("within_hard_limit")
    problems += budget_problems(tokens, working_budget, hard_limit, output_reserve)
    if expect is not None:
        checks += [
            "pin_verbatim",
            "current_user_goal",
            "task_state",
            "artifact_reference",
            "artifact_hash",
        ]
        if check_secrets:
            checks.append("no_secrets")
        problems += _content_checks(
            messages, system, expect, names, resolve_artifact, check_secrets, scan or secret_spans
        )
    elif check_secrets:
        checks.append("no_secrets")
        problems += _content_checks(
            messages, system, Expectations(), names, None, True, scan or secret_spans
        )
    return ValidationReport(
        view=view,
        format=fmt,
        problems=problems,
        checks=checks,
        tokens=tokens,
        token_source=meter.label,
    )


def validate_frontend(
    view: Mapping[str, Any],
    *,
    reasoning: Sequence[str] = (),
    entry_of: Mapping[int, str] | None = None,
) -> ValidationReport:
    """Check the client-visible view: nothing private in it (DESIGN.md sections 6 and 9).

    Args:
        view: ``{"items": [{"seq", "role", "kind", "text", ...}], ...}`` as built by
            :func:`ledger_app.context.frontend_view`.
        reasoning: texts of the journal's reasoning entries; none may appear in the view.
        entry_of: seq -> entry hex, to name the entry of each problem.

    Returns:
        :class:`ValidationReport` for ``no_secrets``, ``no_hidden_reasoning``,
        ``no_private_metadata`` and ``lone_surrogate``.
    """
    entry_of = entry_of or {}
    problems: list[Problem] = []
    items = view.get("items") if isinstance(view, Mapping) else None
    if not isinstance(items, list):
        items = []
        problems.append(
            Problem("malformed_message", "the frontend view has no items", None, "items")
        )
    hidden = [t for t in reasoning if isinstance(t, str) and len(t.strip()) >= 20]
    for i, item in enumerate(items):
        where = f"items[{i}]"
        if not isinstance(item, dict):
            problems.append(Problem("malformed_message", f"{where} is not an object", i, where))
            continue
        seq = item.get("seq")
        entry = _hex(entry_of.get(seq, "")) if isinstance(seq, int) else ""
        _surrogates(item, where, i, problems)
        extra = sorted(set(item) - FRONTEND_KEYS)
        if extra:
            problems.append(
                Problem(
                    "no_private_metadata",
                    f"{where} (seq {seq}) carries private fields: {', '.join(extra)}",
                    i,
                    ",".join(extra),
                    entry,
                )
            )
        if item.get("kind") == "reasoning":
            problems.append(
                Problem(
                    "no_hidden_reasoning",
                    f"{where} (seq {seq}) is a reasoning entry",
                    i,
                    "kind",
                    entry,
                )
            )
        text = item.get("text")
        if isinstance(text, str) and text:
            if any(h in text for h in hidden):
                problems.append(
                    Problem(
                        "no_hidden_reasoning",
                        f"{where} (seq {seq}) shows hidden reasoning text",
                        i,
                        "text",
                        entry,
                    )
                )
            spans = secret_spans(text)
            if spans:
                kinds = ", ".join(sorted({k for _, _, k in spans}))
                problems.append(
                    Problem(
                        "no_secrets",
                        f"{where} (seq {seq}) shows {len(spans)} secret value(s) ({kinds})",
                        i,
                        kinds,
                        entry,
                    )
                )
    return ValidationReport(
        view="frontend",
        format="frontend",
        problems=problems,
        checks=["no_secrets", "no_hidden_reasoning", "no_private_metadata", "lone_surrogate"],
    )


BUDGET_CHECKS = ("within_working_budget", "within_hard_limit")
ARTIFACT_CHECKS = ("artifact_reference", "artifact_hash")
