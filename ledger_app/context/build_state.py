"""The state of one context build: rounds, how each is shown, costs and decisions.

Pure module: no Django, no database (docs/design.md section 6). :class:`Builder` holds the journal's
rounds as :class:`Plan` s (parts plus whether the round is protected or dropped), the ledger's
facts (:class:`~ledger_app.context.checkpoint.Checkpoint`), the task state, the token cost of
the request as planned, and every decision taken with its reason and token effect. The
compaction steps that change a plan are in :mod:`ledger_app.context.compaction`, the request
assembled from it and validated in :mod:`ledger_app.context.final_request`; the order they
run in is :func:`ledger_app.context.build.build_context`.
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from journal_app.harness import harness_kind
from journal_app.privacy import REASONING_MARK, reasoning_spans
from journal_app.rounds import Round, group_rounds
from ledger_app.context.assembly import (
    CONTINUED,
    Part,
    anthropic_ids,
    assemble,
    round_notes,
    round_parts,
)
from ledger_app.context.checkpoint import Checkpoint, fact_line, imported_summaries
from ledger_app.context.continuation import done_request_line, is_closed_request
from ledger_app.context.inputs import ArtifactResolver, FoldCallback
from ledger_app.context.prefix import prefix_rounds
from ledger_app.context.task_state import current_goal, pending_approvals, task_state_text
from ledger_app.context.thinking import loop_thinking, thinking_part
from ledger_app.entry_view import EntryView
from ledger_app.pin_facts import is_pin_source, pin_fact
from ledger_app.pins import open_requests_split, pin_shown_text
from ledger_app.validation import (
    Meter,
    memo_scanner,
    redact,
)

#: The last deliverable is shown whole in the continuation record when it takes at most
#: 1/DELIVERABLE_SHARE of the budget; over that, as a receipt that ``read`` restores.
DELIVERABLE_SHARE = 8


def budget_limit(working: int, hard: int, reserve: int) -> int:
    """What a request may hold, tokens: the working budget, or the hard limit less the output
    reserve when that is smaller (docs/design.md 6)."""
    return min(working, hard - reserve)


@dataclass
class Plan:
    """One round of the body and how it is shown."""

    round: Round
    parts: list[Part]
    position: int = -1  # position among droppable API rounds, -1 for others
    dropped: bool = False
    protected: bool = False
    cost: int = 0
    settled: bool = False  # cost counted on the redacted text (as it will be sent)
    #: a round of the folded prefix read as metadata only: no parts, its cost the stored
    #: token counts of its entries; left out at once and never brought back
    #: (:func:`ledger_app.context.compaction.leave_out_prefix`, docs/design.md 6)
    metadata: bool = False


class Builder:
    """The state of one build: the rounds and how each is shown, the ledger facts, the task
    state, the planned cost, and the decisions taken (each with its reason and token effect).

    Budgets are tokens; ``limit`` is ``min(working, hard - reserve)``. The steps that change
    how rounds are shown are :mod:`ledger_app.context.compaction`.
    """

    def __init__(
        self,
        *,
        entries: Sequence[EntryView],
        ledger: Mapping[str, Any],
        covered_upto: int,
        receipts: Mapping[str, Mapping[str, Any]],
        resolve: ArtifactResolver | None,
        working: int,
        hard: int,
        reserve: int,
        tail_tokens: int,
        fmt: str,
        fold: FoldCallback | None,
        meter: Meter,
        tools: Any = None,
        end_status: str = "",
        metadata_before: int = 0,
        token_counts: Mapping[str, int] | None = None,
        rounds: Sequence[Round] | None = None,
    ) -> None:
        self.entries = list(entries)
        #: entries before this seq in API rounds the fold covers were read as metadata only
        #: (0: none): those rounds are the folded prefix (:attr:`Plan.metadata`)
        self.metadata_before = metadata_before
        self.token_counts = token_counts or {}
        self._rounds = rounds
        #: the source's own end status (``exit_status`` of a run), for the continuation record
        self.end_status = end_status
        self.ledger = ledger
        self.covered_upto = covered_upto
        self.receipts = receipts
        self.resolve = resolve
        self.working = working
        self.hard = hard
        self.reserve = reserve
        #: the budget's own limit; ``limit`` is what the plan aims at (lowered by
        #: :func:`~ledger_app.context.calibration.calibrate` when the provider counts more than we do)
        self.budget_limit = budget_limit(working, hard, reserve)
        self.limit = self.budget_limit
        self.tail_tokens = tail_tokens
        self.fmt = fmt
        self.fold = fold
        self.meter = meter
        self.decisions: list[dict[str, Any]] = []
        self.fold_attempts: list[dict[str, Any]] = []
        self.by_seq = {e.seq: e for e in self.entries}
        self.by_hash = {e.entry_hash: e for e in self.entries}
        #: the pin sources (:func:`ledger_app.pin_facts.is_pin_source`) in journal order,
        #: judged once per build (a harness check of each authoritative message)
        self.pin_entries = [e for e in self.entries if is_pin_source(e)]
        self.pin_hashes = {e.entry_hash for e in self.pin_entries}
        self.ids = anthropic_ids(self.entries) if fmt == "anthropic" else {}
        self.redacteded: dict[str, str] = {}
        self.redactions = 0
        self.scan = memo_scanner()
        self.tools = tools
        self.tools_cost = meter.tools(tools)
        # what every request carries whatever is folded: the primer, the tools schema, and
        # (Anthropic) the user turn a request may have to open with
        self.fixed = (
            meter.per_request
            + self.tools_cost
            + (self.text_cost(CONTINUED) if fmt == "anthropic" else 0)
        )
        #: tokens the built request was found over its plan by (the last pass), added to
        #: every planned total from then on
        self.correction = 0
        # running sums: the cost of the rounds shown and how many are left out,
        # kept up to date by set_cost/set_dropped instead of re-summed at each step
        self.body = 0
        self.n_dropped = 0
        #: set by the recovery step: a checkpoint with no P0/P1 fact is planned at 0 tokens
        #: (:meth:`ledger_app.context.checkpoint.Checkpoint.make_soft`), kept across refolds
        self.soft_checkpoint = False
        #: step 3 ran (:func:`ledger_app.context.compaction.shrink`, consumed results): a
        #: left-out round that comes back is shrunk as it would have been shown
        self.consumed_shrunk = False
        #: set when the folded prefix was left out (compaction.leave_out_prefix): the next
        #: step-4 cut runs whatever the total, as it would with the prefix shown
        self.cut_due = False
        self._pin_facts: dict[str, dict[str, Any]] = {}
        self._prepare()

    # ---------------------------------------------------------------- setup

    def _prepare(self) -> None:
        rounds = list(self._rounds) if self._rounds is not None else group_rounds(self.entries)
        self.tail_round: Round | None = None
        if (
            rounds
            and rounds[-1].at_tail
            and rounds[-1].kind == "api"
            and rounds[-1].status == "interrupted"
        ):
            self.tail_round = rounds.pop()
        self.interrupted: list[tuple[str, EntryView, bool]] = []  # (call id, call, at tail)
        for r in rounds:
            for cid in r.interrupted_call_ids:
                call = next(
                    self.by_seq[s]
                    for s in r.seqs
                    if self.by_seq[s].kind == "tool_call" and self.by_seq[s].tool_call_id == cid
                )
                self.interrupted.append((cid, call, False))
        if self.tail_round is not None:
            for cid in self.tail_round.interrupted_call_ids:
                call = next(
                    self.by_seq[s]
                    for s in self.tail_round.seqs
                    if self.by_seq[s].kind == "tool_call" and self.by_seq[s].tool_call_id == cid
                )
                self.interrupted.append((cid, call, True))
        mid = {cid for cid, _, at_tail in self.interrupted if not at_tail}
        self.notes: list[str] = []
        self.plans: list[Plan] = []
        prefix = (
            {id(r) for r in prefix_rounds(rounds, self.metadata_before, self.covered_upto)[1]}
            if self.metadata_before > 0
            else set()
        )
        for r in rounds:
            if id(r) in prefix:
                self.notes += round_notes(r, self.by_seq)
                self.plans.append(Plan(round=r, parts=[], metadata=True))
                continue
            parts, notes = round_parts(r, self.by_seq, mid)
            self.notes += notes
            self.plans.append(Plan(round=r, parts=parts))
        self._drop_harness()
        if self.fmt == "anthropic" and self.plans:  # the tool loop's thinking blocks
            kept = loop_thinking([p.round for p in self.plans], self.by_seq)
            self.plans[-1].parts[:0] = [thinking_part(e, block) for e, block in kept]
        for p in self.plans:
            p.cost = self.stored_cost(p.round) if p.metadata else self.cost(p.parts)
            self.body += p.cost
        self.original_costs = [p.cost for p in self.plans]
        # the protected tail: complete rounds from the end within tail_tokens, at least one
        total = 0
        for p in reversed(self.plans):
            if total > 0 and total + p.cost > self.tail_tokens or p.metadata:
                break
            p.protected = True
            total += p.cost
        self.droppable = [p for p in self.plans if p.round.kind == "api" and not p.protected]
        for i, p in enumerate(self.droppable):
            p.position = i
        self.position_of = {}
        for p in self.plans:
            for s in p.round.seqs:
                self.position_of[self.by_seq[s].entry_hash] = p.position
        self.last_assistant = max(
            (
                e.seq
                for e in self.entries
                if e.role == "assistant" and e.kind in ("message", "tool_call")
            ),
            default=0,
        )
        self.approvals = pending_approvals(self.entries)
        self.summaries = imported_summaries(self.entries)
        self.facts_from(self.ledger)
        self.set_task_text(self.task_state())

    def _drop_harness(self) -> None:
        """Harness records out of the request (docs/design.md 5.2 and 6): a whole message that is
        a harness record (:func:`journal_app.harness.harness_kind`: a format nag, a caveat,
        command markup, an interrupt marker, environment context) is left out of the rounds
        and the tail, except the latest of each kind; identical repeats therefore cost at
        most one message. What was left out is counted in :attr:`harness` (debug trace)."""
        kinds: dict[int, str] = {}
        for i, p in enumerate(self.plans):
            if p.round.kind != "message" or len(p.parts) != 1 or p.parts[0].entry is None:
                continue
            e = p.parts[0].entry
            kind = harness_kind(kind=e.kind, role=e.role, text=e.text, meta=e.meta)
            if kind:
                kinds[i] = kind
        latest = {kind: i for i, kind in kinds.items()}
        kept = set(latest.values())
        dropped: dict[str, int] = {}
        texts: dict[str, set[str]] = {}
        for i, kind in kinds.items():
            shown = self.plans[i].parts[0].entry
            assert shown is not None
            texts.setdefault(kind, set()).add(shown.text)
            if i in kept:
                continue
            self.plans[i].parts = []
            dropped[kind] = dropped.get(kind, 0) + 1
        #: what :meth:`_drop_harness` left out: ``{"dropped", "by_kind", "kept_seqs",
        #: "distinct_texts"}``
        self.harness: dict[str, Any] = {
            "dropped": sum(dropped.values()),
            "by_kind": dict(sorted(dropped.items())),
            "kept_seqs": sorted(self.plans[i].round.first_seq for i in kept),
            "distinct_texts": {k: len(v) for k, v in sorted(texts.items())},
        }

    def _show_pins(self) -> None:
        """Show each pin as the ledger says (docs/design.md 5.2): an active pin through
        :func:`ledger_app.pins.pin_shown_text` (attachments as receipts, words verbatim); a
        closed request as one line ("done at seq N: first line ..., evidence sha256:..."),
        never as current. Re-run after a fold (a request may have closed); recounts the
        rounds that changed and the savings of pins left out before the checkpoint."""
        skippable: list[tuple[int, int]] = []
        for p in self.plans:
            if p.round.kind != "message":
                continue
            changed = False
            for part in p.parts:
                e = part.entry
                if e is None or e.entry_hash not in self.pin_hashes:
                    continue
                fact = self.facts.pins.get(e.entry_hash)
                if fact is not None and is_closed_request(fact):
                    text, pin, form = done_request_line(fact, self.by_hash), False, "done"
                elif fact is None or fact.get("lifecycle", "active") == "active":
                    # a pin not folded yet is shown as its fold will record it
                    shown = pin_shown_text(fact if fact is not None else self.pin_of(e))
                    text, pin, form = shown, True, "verbatim"
                else:
                    text, pin, form = e.text, True, "verbatim"
                if (part.text, part.pin, part.form) != (text, pin, form):
                    part.text, part.pin, part.form = text, pin, form
                    changed = True
            if changed:
                self.set_cost(p)
            if p.parts and all(
                q.entry is not None and q.entry.entry_hash in self.inactive_pins for q in p.parts
            ):
                skippable.append((p.round.first_seq, p.cost))
        # pins no longer active before the last folded round are left out (final_parts): the
        # plan counts that saving, as a prefix sum by seq
        skippable.sort()
        self._skip_seqs = [seq for seq, _ in skippable]
        self._skip_sums = [0]
        for _, cost in skippable:
            self._skip_sums.append(self._skip_sums[-1] + cost)

    def pin_of(self, e: EntryView) -> dict[str, Any]:
        """The pin fact of entry ``e`` as a fold records it (:func:`ledger_app.pin_facts.pin_fact`:
        its kind and attachments), remembered for the build."""
        fact = self._pin_facts.get(e.entry_hash)
        if fact is None:
            fact = self._pin_facts[e.entry_hash] = pin_fact(e)
        return fact

    def skipped_cost(self, dropped: int) -> int:
        """Tokens of the inactive pins (closed requests, retired pins) left out of the request
        when ``dropped`` droppable rounds are folded out (those before the last of them)."""
        if dropped <= 0 or not self._skip_seqs:
            return 0
        last = self.droppable[min(dropped, len(self.droppable)) - 1].round.last_seq
        return self._skip_sums[bisect.bisect_left(self._skip_seqs, last)]

    def facts_from(self, ledger: Mapping[str, Any]) -> None:
        """Read the ledger's facts (after a fold grew it, or new rounds became droppable)."""
        self.facts = Checkpoint(
            ledger,
            self.position_of,
            [p.round for p in self.droppable],
            self.meter,
            lambda f: fact_line(f, self.scan),
            by_seq=self.by_seq,
            summaries=self.summaries,
            clean=self.redacted,
            by_hash=self.by_hash,
            end_status=self.end_status,
            deliverable_tokens=max(1, self.budget_limit // DELIVERABLE_SHARE),
        )
        if self.soft_checkpoint:
            self.facts.make_soft()
        # open requests past the latest few are the record's lines, not verbatim messages:
        # what every context carries stays bounded however many are open (docs/design.md 5.5;
        # ledger_app.pins.open_requests_split); they stay active in the ledger
        _, listed, counted = open_requests_split(list(self.facts.pins.values()))
        older = {str(f["support"][0]["entry"]) for f in [*listed, *counted] if f.get("support")}
        self.inactive_pins = self.facts.inactive_pins | older
        self._show_pins()
        closed = {h for h, f in self.facts.pins.items() if is_closed_request(f)}
        #: the hashes of done requests: never the current goal, never shown as current
        self.done_requests = closed
        # among the pin sources: every user message current_goal accepts is one (an
        # authoritative message, not derived, no harness record, with text)
        self.goal = current_goal([e for e in self.pin_entries if e.entry_hash not in closed])
        if hasattr(self, "task_text"):
            self.set_task_text(self.task_state())

    def set_task_text(self, text: str) -> None:
        """Set the task state message and its cost (counted once)."""
        self.task_text = text
        self.task_cost = self.text_cost(text)

    # ---------------------------------------------------------------- costs

    def cost(self, parts: Sequence[Part], redacted: bool = False) -> int:
        """Tokens of ``parts`` assembled in the target format, call ids counted; with
        ``redacted``, as they will be sent: secrets redacted except in pins (plan against
        the final bytes). Only rounds still shown are scanned (:meth:`settle`):
        scanning a whole long session for secrets would cost more than the build."""
        shown: Sequence[Part] = parts
        if redacted:
            shown = []
            for part in parts:
                if part.pin:
                    shown.append(part)
                else:
                    q = copy.copy(part)
                    q.text = self.redacted(part.text)
                    shown.append(q)
        a = assemble(shown, self.fmt, self.ids)
        return sum(self.meter.message(m) for m in a.messages) + sum(
            self.meter.per_message + self.meter.text(b["text"]) for b in a.system
        )

    def stored_cost(self, r: Round) -> int:
        """Tokens of a round of the folded prefix as its entries' stored counts say (one
        message each for its messages, calls and results: the stored count of the entry's
        text, 0 when none is stored): what it would cost shown, within the difference
        between an entry's text and the request's form of it (call ids, arguments)."""
        total = 0
        for s in r.seqs:
            e = self.by_seq[s]
            if e.kind in ("message", "tool_call", "tool_result") and not e.derived:
                total += self.meter.per_message + self.token_counts.get(e.entry_hash, 0)
        return total

    def text_cost(self, text: str) -> int:
        """Tokens of one message holding ``text`` (0 for no text)."""
        return self.meter.per_message + self.meter.text(text) if text else 0

    def checkpoint_text(self, dropped: int, fill: int | None) -> tuple[str, list[str], int]:
        """:meth:`Checkpoint.text` of the current ledger."""
        return self.facts.text(dropped, fill)

    def ckpt_cost(self, dropped: int) -> int:
        """:meth:`Checkpoint.cost` of the current ledger."""
        return self.facts.cost(dropped)

    def body_cost(self) -> int:
        """Tokens of the rounds still shown (a running sum)."""
        return self.body

    def settle(self) -> int:
        """Count every round still shown as it will be sent (secrets redacted), once each;
        returns how many tokens the plan grew by."""
        before = self.body
        for p in self.plans:
            if not p.dropped and not p.settled:
                p.settled = True
                self.set_cost(p)
        return self.body - before

    def set_cost(self, p: Plan) -> None:
        """Count the parts of ``p`` again after one of them changed, keeping the running sum."""
        new = self.cost(p.parts, redacted=p.settled)
        if not p.dropped:
            self.body += new - p.cost
        p.cost = new

    def set_dropped(self, p: Plan, dropped: bool) -> None:
        """Leave ``p`` out of the verbatim part (or bring it back), keeping the running sums."""
        if p.dropped == dropped:
            return
        p.dropped = dropped
        sign = 1 if dropped else -1
        self.body -= sign * p.cost
        if p.position >= 0:
            self.n_dropped += sign

    def planned(self, dropped: int, body: int) -> int:
        """The request's tokens with ``dropped`` rounds left out and ``body`` tokens of rounds
        shown (P2/P3 facts not counted: they only fill room)."""
        return (
            self.fixed
            + self.correction
            + body
            - self.skipped_cost(dropped)
            + self.ckpt_cost(dropped)
            + self.task_cost
        )

    def total(self, dropped: int | None = None) -> int:
        """The request's tokens as planned (P2/P3 facts not counted: they only fill room).
        Constant time: every term is a running sum or remembered."""
        k = self.n_dropped if dropped is None else dropped
        return self.planned(k, self.body)

    # ---------------------------------------------------------------- task state

    def task_state(self) -> str:
        """The task state message (:func:`task_state_text`) of the current ledger."""
        unfinished = (
            [self.by_seq[s] for s in self.tail_round.seqs if self.by_seq[s].kind == "tool_result"]
            if self.tail_round is not None
            else []
        )
        return task_state_text(
            entries=self.entries,
            interrupted=self.interrupted,
            unfinished_results=unfinished,
            approvals=self.approvals,
            obligations=self.facts.obligations,
            goal=self.goal,
            redact=lambda text: redact(text, self.scan)[0],
            fact_line=fact_line,
            done=self.facts.done,
            by_hash=self.by_hash,
            end_status=self.end_status,
        )

    # ---------------------------------------------------------------- decisions

    def decide(
        self, step: int, action: str, reason: str, before: int, after: int, **extra: Any
    ) -> None:
        """Record a decision: its step, action, reason and token effect (the debug trace)."""
        self.decisions.append(
            {
                "step": step,
                "action": action,
                "reason": reason,
                "tokens_before": before,
                "tokens_after": after,
                "effect": after - before,
                **extra,
            }
        )

    def dropped_count(self) -> int:
        """How many droppable rounds are left out (always the oldest ones)."""
        return self.n_dropped

    # ---------------------------------------------------------------- redaction

    def redacted(self, text: str) -> str:
        """``text`` as the model receives it: secrets redacted and hidden reasoning
        (``<thinking>`` blocks in message text) left out, the same verdict as every other
        surface (journal_app.privacy). Pins never come here (they stay verbatim)."""
        out = self.redacteded.get(text)
        if out is None:
            out, kinds = redact(text, self.scan)
            spans = reasoning_spans(out)
            for a, b in reversed(spans):
                out = out[:a] + REASONING_MARK + out[b:]
            self.redacteded[text] = out
            self.redactions += len(kinds) + len(spans)
        return out
