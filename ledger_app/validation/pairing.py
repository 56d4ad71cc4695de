"""The pairing core shared by OpenAI and Anthropic message lists (docs/design.md section 6, step 5).

Pure module (no Django). Every tool call needs its result and no result may lack its call,
parallel calls included. The two formats differ only in where a call's results must be (the
``tool`` messages right after an OpenAI assistant message; the ``tool_result`` blocks of the
user message right after an Anthropic one) and in their words; each format's structure check
reduces its messages to :class:`Calls` and calls :func:`pairing_problems`.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from ledger_app.validation.report import EntryNames, Problem


class Wording(NamedTuple):
    """A format's sentences for each pairing problem (``str.format`` fields in braces)."""

    misplaced: str  # {i} {cid} {group} {later}
    missing: str  # {i} {cid} {group}
    no_id: str  # {k}
    no_id_ref: str  # {k}
    orphan: str  # {k} {cid}


OPENAI = Wording(
    misplaced="messages[{i}]: call {cid!r} ({group}) has its result at messages[{later}], "
    "not among the tool messages right after the call",
    missing="messages[{i}]: call {cid!r} ({group}) has no tool result",
    no_id="messages[{k}]: a tool message needs tool_call_id",
    no_id_ref="messages[{k}].tool_call_id",
    orphan="messages[{k}]: tool result for {cid!r} has no matching call in the assistant "
    "message before it",
)
ANTHROPIC = Wording(
    misplaced="messages[{i}]: tool_use {cid!r} ({group}) has its tool_result at "
    "messages[{later}], not in the next message",
    missing="messages[{i}]: tool_use {cid!r} ({group}) has no tool_result in the next message",
    no_id="messages[{k}]: tool_result without tool_use_id",
    no_id_ref="messages[{k}].content",
    orphan="messages[{k}]: tool_result for {cid!r} has no tool_use in the assistant message "
    "before it",
)


@dataclass
class Calls:
    """A message list reduced to its calls and results.

    Attributes:
        issued: message index -> the call ids issued together in that message, in order.
        results: ``(message index, call id or None)`` of every result, in order (``None``:
            the result names no call).
        block_end: call message index -> the index just after the messages where its
            results belong.
    """

    issued: dict[int, list[str]] = field(default_factory=dict)
    results: list[tuple[int, str | None]] = field(default_factory=list)
    block_end: Callable[[int], int] = lambda i: i + 2


def pairing_problems(calls: Calls, names: EntryNames, words: Wording) -> list[Problem]:
    """Problems of unpaired calls and results, in order: per call message, each call with no
    result in its block (``split_parallel_calls`` / ``tool_result_out_of_place`` when the
    result is further on, else ``orphan_tool_call``); then each result no call claimed
    (``malformed_message`` when it names no call, else ``orphan_tool_result``)."""
    problems: list[Problem] = []
    claimed: set[tuple[int, str | None]] = set()
    # one pass: results are in message order, so each call message's block is found by
    # bisection and a misplaced result by its id (linear in the request)
    positions = [k for k, _ in calls.results]
    where: dict[str | None, list[int]] = {}
    for k, cid in calls.results:
        where.setdefault(cid, []).append(k)
    for i, ids in calls.issued.items():
        end = calls.block_end(i)
        lo, hi = bisect.bisect_right(positions, i), bisect.bisect_left(positions, end)
        near = calls.results[lo:hi]
        answered = {cid for _, cid in near}
        claimed.update((k, cid) for k, cid in near if cid in ids)
        group = f"one of {len(ids)} parallel calls" if len(ids) > 1 else "a single call"
        for cid in ids:
            if cid in answered:
                continue
            ks = where.get(cid, [])
            j = bisect.bisect_left(ks, end)
            later = ks[j] if j < len(ks) else None
            if later is not None:
                claimed.add((later, cid))
                check = "split_parallel_calls" if len(ids) > 1 else "tool_result_out_of_place"
                message = words.misplaced.format(i=i, cid=cid, group=group, later=later)
            else:
                check = "orphan_tool_call"
                message = words.missing.format(i=i, cid=cid, group=group)
            problems.append(Problem(check, message, i, cid, names.of_call(cid, i)))
    for k, cid in calls.results:
        if not cid:
            problems.append(
                Problem(
                    "malformed_message",
                    words.no_id.format(k=k),
                    k,
                    words.no_id_ref.format(k=k),
                )
            )
        elif (k, cid) not in claimed:
            problems.append(
                Problem(
                    "orphan_tool_result",
                    words.orphan.format(k=k, cid=cid),
                    k,
                    cid,
                    names.of_result(cid, k),
                )
            )
    return problems
