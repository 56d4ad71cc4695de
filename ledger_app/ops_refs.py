"""A proposal's ops stored once: a reference to the run of its fold's delta ops they equal
(bench/README.md, ``storage``; :class:`ledger_app.models.Proposal`). Pure.

A fold's delta holds the pins, then the writer's ops that stood, then any recovered ops, so
the ops of the round that stood are usually one contiguous run of the delta's ops. Where
they are, a proposal stores ``(start, count)`` instead of a second copy; the comparison is
of the exact JSON (key order aside: ``1.0`` is not ``1``), so what a reader gets back is the
list the writer recorded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def _same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return json.dumps(list(a), sort_keys=True) == json.dumps(list(b), sort_keys=True)


def ops_refer(ops: Sequence[Any], delta_ops: Sequence[Any]) -> tuple[int, int] | None:
    """Where ``ops`` stand in ``delta_ops`` as one contiguous run.

    Args:
        ops: a proposal's ops (JSON values).
        delta_ops: its fold's delta ``"ops"`` (parsed from the stored delta).

    Returns:
        ``(start, count)`` with ``delta_ops[start:start + count]`` equal to ``ops`` as JSON
        (the first such run), or ``None``: no run equals them, or ``ops`` is empty (an
        empty list is stored as it is).
    """
    n = len(ops)
    if n == 0 or n > len(delta_ops):
        return None
    first = json.dumps(ops[0], sort_keys=True)
    for start in range(len(delta_ops) - n + 1):
        if json.dumps(delta_ops[start], sort_keys=True) == first and _same(
            ops, delta_ops[start : start + n]
        ):
            return start, n
    return None


def ops_resolve(
    stored: list[Any], start: int | None, count: int, delta_ops: Sequence[Any]
) -> list[Any]:
    """A proposal's ops from its stored form: ``stored`` when ``start`` is ``None``, else the
    run ``delta_ops[start:start + count]`` (a new list)."""
    if start is None:
        return stored
    return list(delta_ops[start : start + count])


def op_item(op: Any) -> tuple[str, list[Any]]:
    """The claim and cited entries a verdict row records for an item that became ``op``
    (what :func:`ledger_app.model_writer.compose` writes): the fact's text and its support
    entries, or for an op without a fact ``"<op> <id>"`` and its ``evidence``."""
    if not isinstance(op, dict):
        return "", []
    fact = op.get("fact") if isinstance(op.get("fact"), dict) else None
    claim = (fact or {}).get("text", "") or f"{op.get('op')} {op.get('id', '')}"
    support = (fact or {}).get("support", [])
    cited = [s.get("entry") if isinstance(s, dict) else s for s in support] if support else []
    return claim, cited or list(op.get("evidence", []) or [])


class ItemRefs:
    """Which op of a proposal's ops gives a verdict's claim and support (:func:`op_item`), so
    that a verdict row stores the op's index instead of a copy of its text and citations.

    Args:
        ops: the proposal's ops (as :attr:`ledger_app.models.Proposal.ops` reads them).
    """

    def __init__(self, ops: Sequence[Any]) -> None:
        self.index: dict[str, int] = {}
        for n, op in enumerate(ops):
            self.index.setdefault(_item_key(*op_item(op)), n)

    def find(self, claim: str, support: Any) -> int | None:
        """The index of the first op whose :func:`op_item` is exactly ``(claim, support)``
        (as JSON), or ``None``."""
        if not isinstance(support, list):
            return None
        return self.index.get(_item_key(claim, support))


def _item_key(claim: str, support: list[Any]) -> str:
    return json.dumps([claim, support], sort_keys=True)
