"""Reads and shaping for the operator UI only (issue 17): the folds page's filter and the
diff's text and support changes.

Imported by module path (``from ledger_app.selectors import ui``); the shared read layer
(:mod:`ledger_app.selectors`, :mod:`ledger_app.selectors.presenters`) stays the one path of the
UI and the API; nothing here is shown over the API.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from ledger_app.models import Fold

#: ``?show=`` of the folds page: which folds to list (DESIGN.md 5.3, issue 17 item 5).
FOLD_SHOWS = {
    "rejections": "folds with rejections (reducer, proposal or repair)",
    "fallbacks": "fallback folds (mechanical facts only)",
    "failures": "failed folds and failed attempts",
}


def folds_shown(folds: QuerySet[Fold], show: str) -> QuerySet[Fold]:
    """``folds`` narrowed by a :data:`FOLD_SHOWS` key (any other value: unchanged).

    ``rejections`` reads ``Fold.ops_rejected``, which counts the reducer's rejected ops plus the
    verifier's rejections of the writer's proposal and repair (DESIGN.md 5.3).
    """
    if show == "rejections":
        return folds.filter(ops_rejected__gt=0)
    if show == "fallbacks":
        return folds.filter(outcome=Fold.Outcome.FALLBACK)
    if show == "failures":
        return folds.filter(outcome__in=[Fold.Outcome.FAILED, Fold.Outcome.TARGET_UNREACHABLE])
    return folds


# The diff ------------------------------------------------------------------------------------

_WORDS = re.compile(r"\s+|[^\s]+")


def text_diff(before: str, after: str) -> list[tuple[str, str]]:
    """A word-level diff of two texts: ``[(op, text), ...]`` with op ``equal``, ``del`` or
    ``ins``, in reading order (whitespace kept), so ``"".join`` of the equal and del parts is
    ``before`` and of the equal and ins parts is ``after``."""
    a, b = _WORDS.findall(before or ""), _WORDS.findall(after or "")
    out: list[tuple[str, str]] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out.append(("equal", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            out.append(("del", "".join(a[i1:i2])))
        if j2 > j1:
            out.append(("ins", "".join(b[j1:j2])))
    return out


def _entries(items: Any) -> list[str]:
    if not isinstance(items, list):
        return []
    return [str(i.get("entry", "")) for i in items if isinstance(i, dict) and i.get("entry")]


@dataclass
class FieldRow:
    """One changed field of a fact, ready to show: a text diff, support hashes added and
    removed (hex), or the values before and after."""

    name: str
    before: Any = None
    after: Any = None
    segments: list[tuple[str, str]] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def field_rows(changes: Iterable[Any]) -> list[FieldRow]:
    """:class:`ledger_app.diff.FieldChange` items as :class:`FieldRow` (text diffed by word,
    support by entry hash)."""
    rows = []
    for ch in changes:
        if ch.name == "text" and isinstance(ch.before, str) and isinstance(ch.after, str):
            rows.append(FieldRow(ch.name, segments=text_diff(ch.before, ch.after)))
        elif ch.name == "support":
            old, new = _entries(ch.before), _entries(ch.after)
            rows.append(
                FieldRow(
                    ch.name,
                    added=[h for h in new if h not in old],
                    removed=[h for h in old if h not in new],
                    before=ch.before if old == new else None,
                    after=ch.after if old == new else None,
                )
            )
        else:
            rows.append(FieldRow(ch.name, before=ch.before, after=ch.after))
    return rows


DIFF_STATUSES = ("added", "changed", "removed")
