"""The per-fold loss report: which identifiers of the covered entries the ledger dropped. Pure.

Public measurements of summary-based compaction found that summaries keep about 10% of
file paths, 0.2% of commands and 2% of numbers. The ledger may omit routine detail on
purpose (seed, "What comes back"); this report makes every omission visible, each with a
pointer to the first journal entry that holds it, so the detail stays recoverable
(docs/design.md sections 5 and 7: the recovery trigger looks for the same kinds).

Identifier kinds (:data:`KINDS`): ``path``, ``url``, ``hash``, ``flag``, ``command``,
``number`` (with a unit), ``id`` (ticket or issue), ``migration``. Extraction is
lexical, deterministic and deliberately conservative: a false "lost" is noise in front of
a reviewer, so ambiguous shapes (``and/or``, ``e.g.``, ``v1.2``, ``os.path``) are left out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from journal_app.identifiers import (
    COMMAND_LIMIT,
    KINDS,
    Identifier,
    extract_identifiers,
    identifiers_of,
)
from ledger_app.entry_view import EntryView

__all__ = [
    "COMMAND_LIMIT",
    "KINDS",
    "LOST_LIMIT",
    "Identifier",
    "LossReport",
    "extract_identifiers",
    "identifiers_of_entry",
    "ledger_terms",
    "loss_report",
    "term_key",
]

#: Most lost items listed in a report; the rest are counted in ``lost_truncated``.
LOST_LIMIT = 500


def identifiers_of_entry(entry: EntryView) -> list[Identifier]:
    """Identifiers of one journal entry (:func:`journal_app.identifiers.identifiers_of`)."""
    return identifiers_of(
        kind=entry.kind,
        text=entry.text,
        content=entry.content,
        tool_call_id=entry.tool_call_id,
        derived=entry.derived,
    )


@dataclass
class LossReport:
    """How many identifiers of a fold's covered entries the ledger text still holds.

    Attributes:
        total: distinct identifiers (by kind and value) across the entries.
        kept: how many of them occur verbatim in the ledger text.
        lost: ``[{"kind", "value", "entry": entry_hash, "seq": seq}]`` naming the first entry
            that holds each missing identifier, in journal order, at most :data:`LOST_LIMIT`.
        lost_truncated: lost identifiers left out of ``lost`` (recoverable from the journal
            by running the report again over the same entries).
        by_kind: ``{kind: {"total": n, "kept": k}}`` for every kind of :data:`KINDS`.
    """

    total: int = 0
    kept: int = 0
    lost: list[dict[str, Any]] = field(default_factory=list)
    lost_truncated: int = 0
    by_kind: dict[str, dict[str, int]] = field(
        default_factory=lambda: {k: {"total": 0, "kept": 0} for k in KINDS}
    )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for the fold manifest."""
        return {
            "total": self.total,
            "kept": self.kept,
            "lost_count": self.total - self.kept,
            "lost": [dict(item) for item in self.lost],
            "lost_truncated": self.lost_truncated,
            "by_kind": {k: dict(v) for k, v in self.by_kind.items()},
        }


def _is_joined(ch: str) -> bool:
    return ch.isalnum() or ch in "_-"


def _occurs(value: str, text: str) -> bool:
    """``value`` occurs in ``text`` as a whole token: ``a.py`` is not kept by ``data.py``,
    ``8 tests`` not by ``18 tests``, ``-x`` not by ``--x``."""
    digit_start = value[:1].isdigit()
    start = text.find(value)
    while start != -1:
        end = start + len(value)
        before = text[start - 1] if start else ""
        after = text[end] if end < len(text) else ""
        left_ok = not before or not (
            (_is_joined(value[0]) or value[0] == "-")
            and _is_joined(before)
            or (digit_start and before in ".,")
        )
        right_ok = not after or not (_is_joined(value[-1]) and _is_joined(after))
        if left_ok and right_ok:
            return True
        start = text.find(value, start + 1)
    return False


def term_key(value: str) -> str:
    """How an identifier is looked up in the ledger's term index: its whitespace-collapsed
    value (``sha256`` of it is the stored key, see :func:`ledger_terms`)."""
    return " ".join(value.split())


def ledger_terms(text: str) -> set[str]:
    """The term-index keys of a fact's rendered text: every identifier it holds
    (:func:`term_key` of :func:`extract_identifiers`). A covered entry's identifier whose
    key is among an active fact's terms counts as kept (the fold compares stored
    identifiers with an index instead of scanning the whole ledger text)."""
    return {term_key(i.value) for i in extract_identifiers(text)}


def loss_report(
    entries: Sequence[EntryView],
    ledger_text: str,
    *,
    identifiers: Mapping[str, Sequence[Identifier]] | None = None,
    indexed: Collection[str] = frozenset(),
) -> LossReport:
    """Compare the identifiers of ``entries`` with the ledger (section 5, seed).

    Args:
        entries: the fold's covered entries, in journal order.
        ledger_text: ledger text to search (e.g. the rendered facts,
            :func:`ledger_app.budget.render_fact` per fact, joined by newlines): the facts
            the fold wrote, or the whole ledger.
        identifiers: the identifiers of each entry by entry hash, as stored at append
            (:class:`journal_app.models.EntryIdentifiers`); an entry missing here is
            scanned (:func:`identifiers_of_entry`).
        indexed: :func:`term_key` values known to occur in the rest of the ledger (the
            term index of the active facts): those count as kept without a text search.

    Returns:
        :class:`LossReport`. An identifier is kept when its :func:`term_key` is in
        ``indexed``, or its value occurs verbatim in ``ledger_text`` as a whole token (not
        inside a longer word or number), or, for values spanning whitespace such as
        commands, once runs of whitespace are collapsed to one space on both sides.
        Deterministic.
    """
    collapsed = " ".join(ledger_text.split())
    report = LossReport()
    seen: set[Identifier] = set()
    for entry in entries:
        stored = identifiers.get(entry.entry_hash) if identifiers is not None else None
        for ident in stored if stored is not None else identifiers_of_entry(entry):
            if ident in seen:
                continue
            seen.add(ident)
            report.total += 1
            counts = report.by_kind.setdefault(ident.kind, {"total": 0, "kept": 0})
            counts["total"] += 1
            key = term_key(ident.value)
            if key in indexed or _occurs(ident.value, ledger_text) or _occurs(key, collapsed):
                report.kept += 1
                counts["kept"] += 1
            elif len(report.lost) < LOST_LIMIT:
                report.lost.append(
                    {
                        "kind": ident.kind,
                        "value": ident.value,
                        "entry": entry.entry_hash,
                        "seq": entry.seq,
                    }
                )
            else:
                report.lost_truncated += 1
    return report
