"""What validation reports: problems, reports, and what the journal says a request must hold.

Pure module (no Django). Shared by the structure, content and budget checks of
:mod:`ledger_app.validation` (docs/design.md section 6).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

FORMATS = ("openai", "anthropic")
TASK_STATE_MARK = "[task state"
RECEIPT_MARK = "[artifact receipt"
#: Keys a frontend-view item may carry (anything else is private metadata).
FRONTEND_KEYS = frozenset(
    {
        "seq",
        "role",
        "kind",
        "text",
        "tool",
        "is_error",
        "attachments",
        "truncated",
        "status",
        "filtered",
        "labels",
    }
)
BUDGET_CHECKS = ("within_working_budget", "within_hard_limit")
ARTIFACT_CHECKS = ("artifact_reference", "artifact_hash")


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
        pins: ``[(pin id, entry hex, text)]``: each text must be present byte for byte; a
            pin's text as a context shows it (:func:`ledger_app.pins.pin_shown_text`: its
            attachments as receipts naming their hash and ``read`` range, the words around
            them verbatim, docs/design.md 5.2), so a receipt must be present exactly too.
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


def hex_name(h: str) -> str:
    """``sha256:<hex>`` for a bare hex digest (unchanged when already prefixed)."""
    return f"sha256:{h}" if h and not h.startswith("sha256:") else h


class EntryNames:
    """Names a message's journal entry in a problem, when the caller gave the sources."""

    def __init__(self, expect: Expectations | None) -> None:
        self.expect = expect

    def of_message(self, index: int | None) -> str:
        if self.expect is None or index is None or index >= len(self.expect.sources):
            return ""
        hashes = self.expect.sources[index]
        return hex_name(hashes[0]) if hashes else ""

    def of_call(self, call_id: str, index: int | None) -> str:
        if self.expect is not None and call_id in self.expect.calls:
            return hex_name(self.expect.calls[call_id])
        return self.of_message(index)

    def of_result(self, call_id: str, index: int | None) -> str:
        if self.expect is not None and call_id in self.expect.results:
            return hex_name(self.expect.results[call_id])
        return self.of_message(index)
