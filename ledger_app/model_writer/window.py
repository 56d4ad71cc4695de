"""Slices of a fold that fit the writer's window (README "Use a local model"). Pure.

A fold covers whole API rounds sized by covered tokens (``LEDGER_FOLD_THRESHOLD_TOKENS``),
which says nothing about the writer model's context window. Before any writer call, the
covered entries are cut at round boundaries into slices whose prompt fits:

    rubric (+ the answer format when the server does not enforce the schema)
    + ledger state (at most a quarter of the window, P0 first)
    + the slice's entries as sent
    + the output reserve (``MODEL_MAX_OUTPUT_TOKENS``, at most half the window)
    + a margin of a tenth of the window (the server's tokenizer is not o200k_base)
    <= the writer's window (``WRITER_WINDOW_TOKENS``, else its ``MODEL_WINDOWS`` entry).

Tokens are counted with o200k_base (:func:`journal_app.tokens.count_tokens`). A window of 0
means unbounded: one slice. A slice the server still refuses as too long, or whose answer
is cut at ``max_tokens``, is split in two by :func:`split` and tried again by the writer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from journal_app.rounds import group_rounds
from journal_app.tokens import count_tokens
from ledger_app.entry_view import EntryView
from ledger_app.model_client import ModelConfig, format_hint
from ledger_app.model_writer.judges import FoldContext
from ledger_app.model_writer.messages import (
    ENTRY_TEXT_LIMIT,
    VERIFIER_EXAMPLE,
    WRITER_EXAMPLE,
    Prompt,
    entry_json,
    verifier_item_json,
    verifier_messages,
    writer_messages,
)
from ledger_app.model_writer.records import ItemRecord
from ledger_app.offline import EvidenceIndex
from ledger_app.proposals import verifier_schema, writer_schema

#: At most this many slices per fold (splits included): past it, the labelled fallback.
MAX_SLICES = 64
#: Tokens of framing per chat message (role, separators), as servers count them.
MESSAGE_OVERHEAD = 4


@dataclass(frozen=True)
class Plan:
    """Token figures of one fold's writer calls.

    Attributes:
        window: the writer's window (tokens; 0: unbounded).
        output_tokens: ``max_tokens`` of each writer call.
        state_tokens: the most the ledger state may take in a prompt (0: no bound).
        fixed_tokens: the prompt without entries (rubric, format hint, state, wrapper).
        entry_budget: tokens left for the entries of one slice (0: no bound).
    """

    window: int
    output_tokens: int
    state_tokens: int
    fixed_tokens: int
    entry_budget: int

    @classmethod
    def for_writer(
        cls,
        config: ModelConfig,
        prompt: Prompt,
        mode: str,
        state: dict[str, Any],
        ctx: FoldContext,
    ) -> Plan:
        """The plan for the writer of ``config`` with rubric ``prompt``, structured-output
        ``mode`` (the client's) and ledger ``state``."""
        win = config.window_for("writer")
        output = output_tokens(config, "writer")
        state_tokens = win // 4 if win else 0
        messages = writer_messages(prompt, [], state, ctx, state_tokens=state_tokens)
        fixed = sum(count_tokens(m["content"]) + MESSAGE_OVERHEAD for m in messages)
        if mode != "json_schema":
            fixed += count_tokens(format_hint(writer_schema(), WRITER_EXAMPLE))
        budget = max(1, win - output - fixed - win // 10) if win else 0
        return cls(win, output, state_tokens, fixed, budget)

    @property
    def too_small(self) -> str:
        """Why no slice can fit (the window cannot hold the prompt without entries, the
        output reserve and the margin), or ``""`` when one can; nothing is sent then."""
        if not self.window:
            return ""
        need = self.fixed_tokens + self.output_tokens + self.window // 10
        if need < self.window:
            return ""
        return (
            f"the writer's window ({self.window:,} tokens, WRITER_WINDOW_TOKENS) cannot hold the "
            f"prompt without entries ({self.fixed_tokens:,} tokens: rubric, format, ledger state) "
            f"plus max_tokens ({self.output_tokens:,}) and a tenth of margin: no writer call made"
        )


def output_tokens(config: ModelConfig, role: str) -> int:
    """``max_tokens`` of ``role``'s calls: ``max_output_tokens``, at most half its window."""
    win = config.window_for(role)
    return config.max_output_tokens if not win else min(config.max_output_tokens, win // 2)


def verifier_batches(
    items: list[ItemRecord],
    index: EvidenceIndex,
    state: dict[str, Any],
    ctx: FoldContext,
    config: ModelConfig,
    prompt: Prompt,
    mode: str,
) -> list[list[ItemRecord]]:
    """``items`` in batches whose verifier prompt (rubric, timeline, obligations, the
    batch's items with their cited entries) plus the output reserve and a tenth of margin
    fits the verifier's window; one batch when the window is unbounded."""
    win = config.window_for("verifier")
    if not win or not items:
        return [items] if items else []
    base = verifier_messages(prompt, [], index, state, ctx)
    fixed = sum(count_tokens(m["content"]) + MESSAGE_OVERHEAD for m in base)
    if mode != "json_schema":
        fixed += count_tokens(format_hint(verifier_schema(), VERIFIER_EXAMPLE))
    budget = max(1, win - output_tokens(config, "verifier") - fixed - win // 10)
    facts = state.get("facts", {})
    batches: list[list[ItemRecord]] = []
    current: list[ItemRecord] = []
    used = 0
    for item in items:
        size = count_tokens(json.dumps(verifier_item_json(item, index, facts), ensure_ascii=False))
        if current and used + size > budget:
            batches.append(current)
            current, used = [], 0
        current.append(item)
        used += size + 1
    if current:
        batches.append(current)
    return batches


def entry_tokens(e: EntryView) -> int:
    """Tokens one entry takes in the writer's prompt (its JSON, separator included)."""
    return count_tokens(json.dumps(entry_json(e, ENTRY_TEXT_LIMIT), ensure_ascii=False)) + 1


def rounds_of(entries: Sequence[EntryView]) -> list[list[EntryView]]:
    """``entries`` cut where a slice may end: after a complete API round, never between a
    tool call and its result (an out-of-order result keeps the rounds between together)."""
    if not entries:
        return []
    last_of_round: dict[int, int] = {}
    for r in group_rounds(entries):
        for s in r.seqs:
            last_of_round[s] = max(r.seqs)
    groups: list[list[EntryView]] = []
    current: list[EntryView] = []
    reach = 0
    for e in entries:
        current.append(e)
        reach = max(reach, last_of_round.get(e.seq, e.seq))
        if reach <= e.seq:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def slices(entries: Sequence[EntryView], plan: Plan) -> list[list[EntryView]]:
    """``entries`` packed into slices of whole rounds within ``plan.entry_budget`` tokens
    (one slice when the window is unbounded; a round larger than the budget alone is a
    slice of its own: the server's answer decides, then the fallback)."""
    if not plan.entry_budget:
        return [list(entries)] if entries else []
    out: list[list[EntryView]] = []
    current: list[EntryView] = []
    used = 0
    for group in rounds_of(entries):
        size = sum(entry_tokens(e) for e in group)
        if current and used + size > plan.entry_budget:
            out.append(current)
            current, used = [], 0
        current.extend(group)
        used += size
    if current:
        out.append(current)
    return out


def split(entries: Sequence[EntryView]) -> list[list[EntryView]] | None:
    """``entries`` in two slices of whole rounds, about half the tokens each; ``None`` when
    they are one round (nothing left to split)."""
    groups = rounds_of(entries)
    if len(groups) < 2:
        return None
    sizes = [sum(entry_tokens(e) for e in g) for g in groups]
    total, acc, cut = sum(sizes), 0, 1
    for i, size in enumerate(sizes[:-1]):
        acc += size
        if acc >= total / 2:
            cut = i + 1
            break
    else:
        cut = len(groups) - 1
    return [
        [e for g in groups[:cut] for e in g],
        [e for g in groups[cut:] for e in g],
    ]


def span(entries: Sequence[EntryView]) -> str:
    """``"seq 12-40"`` for a slice (``"seq 12"`` for one entry)."""
    if not entries:
        return "no entries"
    first, last = entries[0].seq, entries[-1].seq
    return f"seq {first}" if first == last else f"seq {first}-{last}"
