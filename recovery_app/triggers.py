"""The trigger scan run at each fold (docs/design.md section 7, "Trigger"; seed 000). Pure.

The scan reads the most recent :data:`WINDOW` (24) entries. It fires on either of:

* a phrase of the fixed :data:`VOCABULARY` of uncertainty and correction ("was wrong",
  "actually", "revert", "may have been", ...) in a message (any role but runtime), or
* an **identifier** (hash, path, flag, migration name, ticket number, id) in an
  authoritative message (system, developer, user): a person naming something specific.

Tool calls and results count toward the window but are not scanned: they are the record of
what happened, not a reference back to it, and nearly every one holds a path. Reasoning
blocks and derived entries (summaries, compaction markers) are never scanned.

The vocabulary is fixed, so a loose request such as "use the same method as last time"
does not fire; the agent then has its own search and read tools (seed 000, "What comes
back"). When the scan fires, the identifiers found in the window's messages become the
first search terms; the phrases only say that something earlier is in doubt.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

WINDOW = 24

#: Uncertainty and correction, matched case-insensitively on word boundaries.
VOCABULARY: tuple[str, ...] = (
    "actually",
    "are you sure",
    "broke",
    "broken",
    "correction",
    "could have been",
    "did not work",
    "didn't work",
    "doesn't work",
    "double-check",
    "double check",
    "earlier result",
    "incorrect",
    "is wrong",
    "may have been",
    "might have been",
    "mistake",
    "mistaken",
    "not sure",
    "re-check",
    "recheck",
    "regression",
    "revert",
    "reverted",
    "roll back",
    "rollback",
    "should not have",
    "shouldn't have",
    "undo",
    "unsure",
    "was wrong",
    "were wrong",
    "went wrong",
    "wrong",
)

_VOCAB = re.compile(
    r"(?<![\w-])("
    + "|".join(
        re.escape(p).replace(r"\ ", r"\s+") for p in sorted(VOCABULARY, key=len, reverse=True)
    )
    + r")(?![\w-])",
    re.IGNORECASE,
)

#: Identifier patterns, most specific first; each match is reported once with its kind.
IDENTIFIERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("hash", re.compile(r"\bsha256:[0-9a-f]{8,64}\b|\b[0-9a-f]{7,64}\b(?=[^0-9a-z]|$)", re.I)),
    (
        "migration",
        re.compile(r"\b\d{3,14}_[A-Za-z0-9_]+\b|\b[A-Za-z][\w-]*\.\d{3,14}_[A-Za-z0-9_]+\b"),
    ),
    ("ticket", re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d{1,7}\b|(?<![\w&])#\d{1,7}\b")),
    ("flag", re.compile(r"(?<![\w-])(?:--[A-Za-z][\w-]*(?:=[^\s'\"`]+)?|-[A-Za-z]{1,3}\b)")),
    (
        "path",
        re.compile(r"(?<![\w/.-])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+|\b[\w-]+\.[A-Za-z]{1,5}\b"),
    ),
    ("id", re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:[_-][A-Za-z0-9]+)*[_-]\d+[A-Za-z0-9_-]*\b")),
)

_AUTHORITATIVE = ("system", "developer", "user")
_NOT_A_HASH = re.compile(r"^(?:\d+|[a-f]+)$", re.I)
_PLAIN_WORD_EXT = {"e.g", "i.e", "etc"}
#: Names that look like ids or tickets but are vocabulary, not references to the journal.
_COMMON = {
    "utf-8",
    "utf-16",
    "utf-32",
    "sha-1",
    "sha-256",
    "sha-512",
    "iso-8601",
    "iso-8859-1",
    "gpt-3",
    "gpt-4",
    "gpt-5",
    "x-1",
    "covid-19",
    "mp-3",
    "ipv-4",
    "ipv-6",
}


@dataclass(frozen=True)
class ScanItem:
    """What the scan reads of one entry (built from a row by the service)."""

    seq: int
    kind: str
    role: str
    text: str
    derived: bool = False


@dataclass
class TriggerScan:
    """Result of :func:`scan`.

    Attributes:
        fired: whether recovery should run.
        window: ``(first_seq, last_seq)`` scanned, ``None`` for an empty journal.
        phrases: ``[{"seq", "phrase"}]`` vocabulary matches.
        identifiers: ``[{"seq", "kind", "value", "authoritative"}]`` identifiers in messages.
        terms: search terms to try first (identifiers, most specific first, de-duplicated).
        trigger_seqs: seqs of the messages that fired (the question, never its own answer).
        reason: one sentence for the receipt.
    """

    fired: bool
    window: tuple[int, int] | None
    phrases: list[dict[str, Any]] = field(default_factory=list)
    identifiers: list[dict[str, Any]] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)
    trigger_seqs: list[int] = field(default_factory=list)
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "fired": self.fired,
            "window": list(self.window) if self.window else None,
            "phrases": self.phrases,
            "identifiers": self.identifiers,
            "terms": self.terms,
            "trigger_seqs": self.trigger_seqs,
            "reason": self.reason,
        }


def find_phrases(text: str) -> list[str]:
    """Vocabulary phrases in ``text``, lower-cased, whitespace collapsed, in order."""
    return [" ".join(m.group(1).lower().split()) for m in _VOCAB.finditer(text)]


def find_identifiers(text: str) -> list[tuple[str, str]]:
    """``[(kind, value)]`` identifiers in ``text`` in order of appearance, each span once.

    Kinds: ``hash`` (7-64 hex digits with at least one letter and one digit, or
    ``sha256:...``), ``migration`` (``0042_add_index``, ``app.0042_x``), ``ticket``
    (``ABC-123``, ``#123``), ``flag`` (``--fake``, ``-x``), ``path`` (``a/b.py``,
    ``setup.cfg``), ``id`` (``call_12``, ``job-7a``).
    """
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, str, str]] = []
    for kind, pattern in IDENTIFIERS:
        for m in pattern.finditer(text):
            value = m.group().rstrip(".,;:)")
            a, b = m.start(), m.start() + len(value)
            if not value or any(a < y and x < b for x, y in taken):
                continue
            if value.lower() in _COMMON:
                taken.append((a, b))
                continue
            if kind == "hash" and not value.lower().startswith("sha256:"):
                if _NOT_A_HASH.match(value):
                    continue
            if kind == "path" and "/" not in value and value.lower() in _PLAIN_WORD_EXT:
                continue
            taken.append((a, b))
            found.append((a, kind, value))
    return [(k, v) for _, k, v in sorted(found)]


_SPECIFICITY = {"hash": 0, "migration": 1, "ticket": 2, "id": 3, "path": 4, "flag": 5}


def scan(items: Sequence[ScanItem], *, window: int = WINDOW, skip_upto: int = 0) -> TriggerScan:
    """Scan the last ``window`` items for identifiers and the vocabulary.

    Args:
        items: entries in seq order (the service passes the last ``window``; more is fine).
        window: how many of the most recent entries to scan (docs/design.md section 7: 24).
        skip_upto: matches at seqs at or below this were already scanned by an earlier
            fold's attempt; they are listed but do not fire again.

    Returns:
        :class:`TriggerScan`; ``fired`` is False with a reason when nothing matched.
    """
    recent = list(items)[-window:] if window > 0 else []
    if not recent:
        return TriggerScan(False, None, reason="no entries to scan")
    span = (recent[0].seq, recent[-1].seq)
    phrases: list[dict[str, Any]] = []
    identifiers: list[dict[str, Any]] = []
    firing: list[int] = []
    for item in recent:
        if item.kind != "message" or item.derived or item.role == "runtime":
            continue
        authoritative = item.role in _AUTHORITATIVE
        item_phrases = find_phrases(item.text)
        item_ids = find_identifiers(item.text)
        phrases += [{"seq": item.seq, "phrase": p} for p in item_phrases]
        identifiers += [
            {"seq": item.seq, "kind": k, "value": v, "authoritative": authoritative}
            for k, v in item_ids
        ]
        if item.seq > skip_upto and (item_phrases or (authoritative and item_ids)):
            firing.append(item.seq)
    terms = _terms(identifiers, firing)
    if not firing:
        reason = f"no identifier or uncertainty/correction phrase in the last {len(recent)} entries"
        if phrases or any(i["authoritative"] for i in identifiers):
            reason = f"matches only in entries already scanned (seq <= {skip_upto})"
        elif identifiers:
            named = len({i["value"] for i in identifiers})
            reason = (
                f"{named} identifier(s) in the last {len(recent)} entries, all in the agent's "
                "own messages (only a user's or system message naming one, or an "
                "uncertainty/correction phrase, fires recovery)"
            )
        return TriggerScan(False, span, phrases, identifiers, terms, [], reason)
    what = []
    if any(p["seq"] in firing for p in phrases):
        what.append(
            "phrase "
            + ", ".join(sorted({repr(p["phrase"]) for p in phrases if p["seq"] in firing}))
        )
    ids = [i for i in identifiers if i["seq"] in firing]
    if ids:
        what.append("identifier " + ", ".join(dict.fromkeys(i["value"] for i in ids)))
    reason = f"seq {', '.join(map(str, firing))}: " + "; ".join(what)
    return TriggerScan(True, span, phrases, identifiers, terms, firing, reason)


def _terms(identifiers: Iterable[dict[str, Any]], firing: Sequence[int]) -> list[str]:
    """The firing messages' identifiers, most specific kind first.

    When the firing messages name none (a phrase alone fired), the identifiers of the other
    messages in the window, authoritative ones first: they are what the doubt is about.
    """
    ids = list(identifiers)
    chosen = [i for i in ids if i["seq"] in firing] or ids
    ordered = sorted(
        chosen, key=lambda i: (not i["authoritative"], -i["seq"], _SPECIFICITY[i["kind"]])
    )
    out: list[str] = []
    for i in ordered:
        value = i["value"].removeprefix("sha256:")
        if value not in out:
            out.append(value)
    return out
