"""Reads and shaping for the operator UI only: the folds page's filter and the
diff's text and support changes.

Imported by module path (``from ledger_app.selectors import ui``); the shared read layer
(:mod:`ledger_app.selectors`, :mod:`ledger_app.selectors.presenters`) stays the one path of the
UI and the API; nothing here is shown over the API.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet
from django.urls import reverse

from journal_app.hashing import display
from ledger_app.models import Fold
from ledger_app.selectors.diff import DIFF_STATUSES

#: ``?show=`` of the folds page: which folds to list (docs/design.md 5.3).
FOLD_SHOWS = {
    "rejections": "folds with rejections (reducer, proposal or repair)",
    "fallbacks": "fallback folds (mechanical facts only)",
    "failures": "failed folds and failed attempts",
}


def folds_shown(folds: QuerySet[Fold], show: str) -> QuerySet[Fold]:
    """``folds`` narrowed by a :data:`FOLD_SHOWS` key (any other value: unchanged).

    ``rejections`` reads ``Fold.ops_rejected``, which counts the reducer's rejected ops plus the
    verifier's rejections of the writer's proposal and repair (docs/design.md 5.3).
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


_HEX = re.compile(r"(?:sha256:)?([0-9a-f]{64})")
#: characters of one plain value a diff cell prints
VALUE_SHOWN = 300


@dataclass
class ValueNode:
    """A stored value shaped for reading: no raw dicts, hashes linked.

    ``kind`` is ``text``, ``link`` (``url``, ``title``: an entry, a fold or a fact), ``list``
    or ``map``; ``items`` holds ``(key, node)`` pairs (key ``""`` in a list).
    """

    kind: str
    text: str = ""
    url: str = ""
    title: str = ""
    items: list[tuple[str, ValueNode]] = field(default_factory=list)
    is_hash: bool = False


class ScopeLinks:
    """Permalinks of one scope's entries, folds and facts (``scope`` as ``scope_kwargs``)."""

    def __init__(self, scope: Mapping[str, str]) -> None:
        self.scope = dict(scope)

    def entry(self, digest: str) -> ValueNode:
        url = reverse("journal:entry", args=[display(digest)]) + "?cited=entry"
        return ValueNode("link", digest[:12], url, f"entry sha256:{digest}", is_hash=True)

    def fold(self, number: int) -> ValueNode:
        url = reverse("ledger:fold", kwargs={**self.scope, "number": number})
        return ValueNode("link", f"fold {number}", url, f"fold {number}")

    def fact(self, fact_id: str) -> ValueNode:
        url = reverse("ledger:fact", kwargs={**self.scope, "fact_id": fact_id})
        return ValueNode("link", fact_id, url, f"fact {fact_id}")


def value_node(value: Any, links: ScopeLinks, key: str = "") -> ValueNode:
    """``value`` (a fact field: ``ended_by``, ``superseded_by``, ``pending_retirement``,
    ``reviews``, ...) as a :class:`ValueNode` tree: a 64-hex string (``sha256:`` or not)
    links its entry, an integer under ``fold`` its fold, ``superseded_by`` the superseding
    fact (``refold:N`` the refold), lists and objects nest; other text is cut to
    :data:`VALUE_SHOWN` characters. Reducer fields: :mod:`ledger_app.reducer`."""
    if isinstance(value, Mapping):
        return ValueNode(
            "map", items=[(str(k), value_node(v, links, str(k))) for k, v in value.items()]
        )
    if isinstance(value, (list, tuple)):
        return ValueNode("list", items=[("", value_node(v, links, key)) for v in value])
    if key == "fold" and isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return links.fold(value)
    if isinstance(value, str):
        hexed = _HEX.fullmatch(value)
        if hexed:
            return links.entry(hexed.group(1))
        if key == "superseded_by":
            refold = re.fullmatch(r"refold:(\d+)", value)
            return links.fold(int(refold.group(1))) if refold else links.fact(value)
        text = value if len(value) <= VALUE_SHOWN else value[: VALUE_SHOWN - 1] + "…"
        return ValueNode("text", text)
    if value is None:
        return ValueNode("text", "(absent)")
    return ValueNode("text", str(value).lower() if isinstance(value, bool) else str(value))


@dataclass
class FieldRow:
    """One changed field of a fact, ready to show: a text diff, support hashes added and
    removed (hex), or the values before and after (``before_node``, ``after_node``: shaped
    by :func:`value_node` when the rows were built with links)."""

    name: str
    before: Any = None
    after: Any = None
    segments: list[tuple[str, str]] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    before_node: ValueNode | None = None
    after_node: ValueNode | None = None


def field_rows(changes: Iterable[Any], links: ScopeLinks | None = None) -> list[FieldRow]:
    """:class:`ledger_app.fact_changes.FieldChange` items as :class:`FieldRow` (text diffed by word,
    support by entry hash, other values as :func:`value_node` trees when ``links`` is
    given)."""
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
            row = FieldRow(ch.name, before=ch.before, after=ch.after)
            if links is not None:
                row.before_node = value_node(ch.before, links, ch.name)
                row.after_node = value_node(ch.after, links, ch.name)
            rows.append(row)
    return rows


__all__ = [
    "DIFF_STATUSES",
    "FOLD_SHOWS",
    "FieldRow",
    "ScopeLinks",
    "ValueNode",
    "field_rows",
    "folds_shown",
    "text_diff",
    "value_node",
]
