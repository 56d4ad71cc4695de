"""The model writer: writer, verifier, exactly one repair, labelled fallback (docs/design.md 5.3). Pure.

The writer model proposes a delta as structured output (:mod:`ledger_app.proposals`); every
item is judged by the rules (:func:`ledger_app.offline.check_item`, plus a dry run of the
reducer) *and* by a separate verifier model call that returns an entailment and a temporal
verdict per item. An item stands only when every judge accepts it. A reply that is not valid
JSON for the schema is a rejection of the whole answer, not a crash. Any rejection gets
**exactly one** repair: the writer is called again with the rejected items and the reasons.
If the repair is rejected too, no more model calls are made for this fold: it **falls back**
to mechanical facts (tool outcomes; the service adds the pins), with the outcome ``fallback``
and the note :data:`~ledger_app.model_writer.records.FALLBACK_NOTE`. Outcomes: ``accepted``
(nothing rejected), ``repaired``, ``fallback``. A model that cannot be reached (after the
client's retries) or refuses the request raises
:class:`~ledger_app.model_writer.records.WriterFailed`: nothing of the fold is kept. Failed
tool calls and interrupted calls are always recorded by code, in every outcome, so a failure
is in the ledger whatever the writer says.

What the models are sent is built by :mod:`ledger_app.model_writer.messages` (secrets and
hidden reasoning filtered there).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger_app.entry_view import EntryView
from ledger_app.mechanical_writer import MechanicalWriter
from ledger_app.model_client import (
    CallRecord,
    ModelClient,
    ModelConfig,
    ModelRequestRefused,
    ModelUnavailable,
    context_overflow,
)
from ledger_app.model_writer import window
from ledger_app.model_writer.judges import (
    EvidenceFn,
    FoldContext,
    closure_judgement,
    default_evidence,
    dry_run,
    earlier_entries,
    lifecycle_ops,
    rules_judgement,
    with_rules,
)
from ledger_app.model_writer.messages import (
    WRITER_EXAMPLE,
    load_prompt,
    repair_request,
    writer_messages,
)
from ledger_app.model_writer.records import (
    FALLBACK_NOTE,
    Composition,
    ItemRecord,
    Judgement,
    RoundRecord,
    WriterFailed,
)
from ledger_app.model_writer.verifier import VerifierRound, verify_items
from ledger_app.offline import EvidenceIndex, OfflineWriter, check_item
from ledger_app.proposals import (
    ProposedEnd,
    ProposedFact,
    WriterProposal,
    duplicate_keys,
    parse_reply,
    writer_schema,
)

#: The rubric versions a model writer uses unless told otherwise (``ledger_app/prompts/``);
#: v2 adds requests vs governing text, closes with evidence, decision content, consequential
#: v3: one worked example per fact kind; every verdict names the seq and quote it rests on
WRITER_PROMPT, VERIFIER_PROMPT = "writer-v3", "verifier-v3"


class _Split(Exception):
    """A slice to split and try again: ``reason`` (recorded), ``records`` of the refused calls."""

    def __init__(self, reason: str, records: list[CallRecord]) -> None:
        super().__init__(reason)
        self.reason, self.records = reason, records


@dataclass
class _SliceResult:
    """One slice's outcome (``accepted``, ``repaired``, ``fallback``), ops, fallback reason."""

    outcome: str
    ops: list[dict[str, Any]] = field(default_factory=list)
    fallback_reason: str = ""


#: how a fold's ``writer`` names the model writer: ``model:<WRITER_MODEL>``
MODEL_WRITER_PREFIX = "model:"


def is_model_writer(writer: str) -> bool:
    """Whether a fold's or an attempt's ``writer`` (its id) is the model writer's
    (:data:`MODEL_WRITER_PREFIX`), which proposes items to a verifier; the offline and
    mechanical writers do not."""
    return writer.startswith(MODEL_WRITER_PREFIX)


class ModelWriter:
    """The writer and verifier models behind one :class:`ModelClient` (module docstring).

    Args:
        config: endpoint and model names (:meth:`ModelConfig.from_settings`).
        client: an existing client (tests, benchmarks); default: one built from ``config``.
        writer_prompt / verifier_prompt: prompt versions under ``ledger_app/prompts/``.

    Raises:
        ModelNotConfigured: ``config`` names no endpoint or writer model.
    """

    calls_models = True
    #: the active facts the lifecycle rules read (:func:`~ledger_app.model_writer.judges.lifecycle_ops`:
    #: open request parts, unused approvals, a request's parts), as the offline writer
    #: declares them; the fold service loads them with the state a model is shown
    state_prefixes = OfflineWriter.state_prefixes
    state_pin_ids = staticmethod(OfflineWriter.state_pin_ids)

    def __init__(
        self,
        config: ModelConfig,
        *,
        client: ModelClient | None = None,
        writer_prompt: str = WRITER_PROMPT,
        verifier_prompt: str = VERIFIER_PROMPT,
    ) -> None:
        self.config = config
        self.client = client or ModelClient(config)
        self.writer_prompt = load_prompt(writer_prompt)
        self.verifier_prompt = load_prompt(verifier_prompt)
        self.id = f"{MODEL_WRITER_PREFIX}{config.writer_model}"[:100]
        self.label = f"model writer {config.writer_model}, verifier {config.verifier}"
        self.prompt_version = writer_prompt

    # the Writer protocol, for callers that only want ops
    def propose(self, entries: Sequence[EntryView], state: dict[str, Any]) -> list[dict[str, Any]]:
        """Ops of :meth:`compose` for a fold numbered after ``state`` (covered entries only)."""
        number = int(state.get("folds", 0)) + 1
        revision = max((e.seq for e in entries), default=0)
        return self.compose(
            entries=entries, state=state, ctx=FoldContext(number=number, revision=revision)
        ).ops

    def manifest_writer(self) -> dict[str, Any]:
        """The writer as the manifest records it: id, label, model, endpoint, prompt hash."""
        return {
            "id": self.id,
            "label": self.label,
            "kind": "model",
            "model": self.config.writer_model,
            "base_url": self.config.base_url,
            "prompt_version": self.writer_prompt.version,
            "prompt_sha256": self.writer_prompt.sha256,
        }

    def manifest_verifier(self) -> dict[str, Any]:
        """The verifier as the manifest records it: model, prompt version and hash."""
        return {
            "id": f"model:{self.config.verifier}+rules"[:100],
            "label": f"verifier model {self.config.verifier} and the mechanical rules",
            "kind": "model",
            "model": self.config.verifier,
            "prompt_version": self.verifier_prompt.version,
            "prompt_sha256": self.verifier_prompt.sha256,
        }

    def compose(
        self, *, entries: Sequence[EntryView], state: dict[str, Any], ctx: FoldContext
    ) -> Composition:
        """Propose, verify, repair once, fall back (module docstring), slice by slice.

        The covered entries are cut at round boundaries into slices whose writer prompt, with
        the ledger state and the output reserve, fits the writer's window
        (:func:`~ledger_app.model_writer.window.slices`); each slice is composed on its own
        and the ops are joined. A slice the server says does not fit (context overflow), or
        whose answer was cut at ``max_tokens``, is split in two and tried again (at most
        :data:`~ledger_app.model_writer.window.MAX_SLICES` slices); a single round that still
        does not fit gets the labelled mechanical fallback. Every split and its reason is in
        the composition's note. Outcome: ``fallback`` if any slice fell back, else
        ``repaired`` if any was repaired, else ``accepted``.

        Raises:
            WriterFailed: a model call failed after the client's retries, or was refused
                (other than for a context overflow).
        """
        calls: list[CallRecord] = []
        rounds: list[RoundRecord] = []
        evidence = ctx.evidence or default_evidence(entries, ctx.number)
        plan = window.Plan.for_writer(self.config, self.writer_prompt, self.client.mode, state, ctx)
        queue = deque(window.slices(entries, plan) if not plan.too_small else [])
        notes: list[str] = []
        results: list[_SliceResult] = []
        counter = itertools.count()
        if plan.too_small and entries:
            notes.append(plan.too_small)
            results.append(self._fallback_slice(entries, state, rounds, counter, plan.too_small))
        if len(queue) > 1:
            notes.append(
                f"writer window {plan.window:,} tokens: {len(queue)} slices "
                + ", ".join(window.span(part) for part in queue)
            )
        while queue:
            part = queue.popleft()
            try:
                results.append(
                    self._compose_slice(part, state, ctx, evidence, plan, calls, rounds, counter)
                )
            except _Split as split:
                calls.extend(split.records)
                halves = window.split(part)
                if halves is None or len(results) + len(queue) + 2 > window.MAX_SLICES:
                    reason = f"{window.span(part)} {split.reason}, and cannot be split further"
                    notes.append(reason)
                    results.append(self._fallback_slice(part, state, rounds, counter, reason))
                    continue
                notes.append(f"{window.span(part)} split in two: {split.reason}")
                queue.extendleft(reversed(halves))
            except (ModelUnavailable, ModelRequestRefused) as exc:
                calls.append(exc.record)
                raise WriterFailed(
                    str(exc),
                    calls=calls,
                    writer=self.manifest_writer(),
                    verifier=self.manifest_verifier(),
                    rounds=rounds,
                ) from exc
        outcomes = {r.outcome for r in results}
        outcome = next((o for o in ("fallback", "repaired") if o in outcomes), "accepted")
        ops = [op for r in results for op in r.ops]
        fallback_reasons = [r.fallback_reason for r in results if r.fallback_reason]
        note = "; ".join(notes)
        if outcome == "fallback":
            note = "mechanical facts only" + (" for part of the range" if len(results) > 1 else "")
            note += ": " + FALLBACK_NOTE + (f" ({'; '.join(notes)})" if notes else "")
        return Composition(
            ops=ops,
            outcome=outcome,
            writer=self.manifest_writer(),
            verifier=self.manifest_verifier(),
            rounds=rounds,
            calls=calls,
            note=note,
            fallback_reason="; ".join(fallback_reasons)[:2000],
        )

    def _compose_slice(
        self,
        entries: Sequence[EntryView],
        state: dict[str, Any],
        ctx: FoldContext,
        evidence: EvidenceFn,
        plan: window.Plan,
        calls: list[CallRecord],
        rounds: list[RoundRecord],
        counter: Iterator[int],
    ) -> _SliceResult:
        """Propose, verify, repair once, fall back, for one slice.

        Raises:
            _Split: the slice does not fit (context overflow) or its answer was cut.
            ModelUnavailable / ModelRequestRefused: as :meth:`ModelClient.complete`.
        """
        messages = writer_messages(
            self.writer_prompt, entries, state, ctx, state_tokens=plan.state_tokens
        )
        mark = len(rounds)
        first = self._round(
            next(counter), "proposal", messages, entries, state, ctx, evidence, calls, rounds, plan
        )
        if first.cut and len(window.rounds_of(entries)) > 1:
            del rounds[mark:]
            raise _Split(f"the answer was cut at max_tokens ({plan.output_tokens})", [])
        if first.clean:
            return _SliceResult("accepted", with_rules(entries, state, first.ops))
        repair_messages = [*messages, {"role": "user", "content": repair_request(first)}]
        second = self._round(
            next(counter),
            "repair",
            repair_messages,
            entries,
            state,
            ctx,
            evidence,
            calls,
            rounds,
            plan,
        )
        if second.clean:
            kept = [i.op for i in first.items if i.accepted] + second.ops
            return _SliceResult("repaired", with_rules(entries, state, kept))
        reasons = "; ".join(
            [second.error or second.verifier_error]
            if (second.error or second.verifier_error)
            else [f"{i.key}: {r}" for i in second.rejected for r in i.reasons]
        )
        return self._fallback_slice(
            entries, state, rounds, counter, f"the repair was rejected too: {reasons}"
        )

    def _fallback_slice(
        self,
        entries: Sequence[EntryView],
        state: dict[str, Any],
        rounds: list[RoundRecord],
        counter: Iterator[int],
        reason: str,
    ) -> _SliceResult:
        # the mechanical facts, and the lifecycle rules: a fallback fold still concludes
        fallback = MechanicalWriter().propose(entries, state) + lifecycle_ops(entries, state)
        rounds.append(RoundRecord(round=next(counter), kind="fallback", ops=fallback))
        return _SliceResult("fallback", fallback, reason[:2000])

    # ------------------------------------------------------------------ one round

    def _round(
        self,
        number: int,
        kind: str,
        messages: list[dict[str, str]],
        entries: Sequence[EntryView],
        state: dict[str, Any],
        ctx: FoldContext,
        evidence: EvidenceFn,
        calls: list[CallRecord],
        rounds: list[RoundRecord],
        plan: window.Plan,
    ) -> RoundRecord:
        """One writer answer, judged; appended to ``rounds`` before the verifier is called,
        so a verifier failure still leaves the writer's answer on record.

        Raises:
            _Split: the server refused the prompt as longer than the window.
        """
        try:
            reply = self.client.complete(
                role="writer",
                messages=messages,
                schema_name="ledger_delta",
                schema=writer_schema(),
                round=number,
                example=WRITER_EXAMPLE,
                max_tokens=plan.output_tokens,
            )
        except ModelRequestRefused as exc:
            if context_overflow(exc.__cause__ or exc):
                raise _Split(
                    f"does not fit the writer's window: {exc}"[:300], [exc.record]
                ) from exc
            raise
        calls.append(reply.record)
        record = RoundRecord(round=number, kind=kind, raw=reply.text)
        rounds.append(record)
        if reply.record.status == "malformed":
            cause = reply.record.errors[-1] if reply.record.errors else "malformed response body"
            record.error = f"the writer's answer is not valid: {cause}"
            return record
        if reply.record.truncated:
            record.cut = True
            record.error = (
                f"the writer's answer was cut at max_tokens ({reply.record.max_tokens}): "
                "finish_reason length; answer with fewer, shorter items"
            )
            return record
        proposal, error = parse_reply(reply.text, WriterProposal)
        if proposal is None:
            record.error = f"the writer's answer is not valid: {error}"
            return record
        record.parsed = proposal.model_dump()
        seqs = {s for f in proposal.facts for s in f.support} | {
            s for e in proposal.ends for s in e.evidence
        }
        ends_targets = [{"id": e.fact_id} for e in proposal.ends]
        extra = earlier_entries(ctx, ends_targets, state, entries, seqs)
        index = EvidenceIndex(entries, extra)
        by_seq = {e.seq: e for e in index.by_hash.values() if e.seq <= ctx.revision}
        dupes = set(duplicate_keys(proposal))
        ended: set[str] = set()  # closed by an earlier item of this answer (a request's parts)
        items: list[ProposedFact | ProposedEnd] = [*proposal.facts, *proposal.ends]
        for item in items:
            rec = self._translate(item, number, ctx, by_seq)
            if item.key in dupes:
                rec.judgements.append(
                    Judgement("parser", "not_entailed", f"key {item.key!r} is used twice")
                )
            if rec.op:
                rec.judgements.append(
                    rules_judgement(
                        check_item(rec.op, index, state),
                        closure_judgement(rec.op, index, state, ended),
                    )
                )
                if rec.op.get("op") == "close":
                    ended.add(str(rec.op.get("id", "")))
                rec.judgements.append(dry_run(rec.op, state, ctx, evidence))
            record.items.append(rec)
        judged = [r for r in record.items if r.op]
        if judged:
            verifier = VerifierRound(
                self.client, self.config, self.verifier_prompt, index, state, ctx, record,
                calls, number,
            )  # fmt: skip
            verify_items(verifier, judged)
        record.ops = [r.op for r in record.items if r.accepted]
        return record

    def _translate(
        self,
        item: ProposedFact | ProposedEnd,
        round_no: int,
        ctx: FoldContext,
        by_seq: dict[int, EntryView],
    ) -> ItemRecord:
        cited = item.support if isinstance(item, ProposedFact) else item.evidence
        missing = [s for s in cited if s not in by_seq]
        hashes = [by_seq[s].entry_hash for s in cited if s in by_seq]
        if isinstance(item, ProposedFact):
            claim = item.text
        else:
            claim = f"{item.op} {item.fact_id}" + (f": {item.reason}" if item.reason else "")
        rec = ItemRecord(key=item.key, op={}, claim=claim, support=hashes)
        if missing:
            rec.judgements.append(
                Judgement(
                    "parser",
                    "not_entailed",
                    f"cited seq {missing[0]} is not an entry of this scope at or before "
                    f"revision {ctx.revision}",
                )
            )
            return rec
        if isinstance(item, ProposedFact):
            fact: dict[str, Any] = {
                "id": f"w{ctx.number}.{round_no}.{item.key}",
                "category": item.category,
                "priority": item.priority,
                "confidence": item.confidence,
                "text": item.text,
                "support": [{"entry": h} for h in dict.fromkeys(hashes)],
                "author": "writer",
            }
            if item.consequential:
                fact["consequential"] = True
            if item.decision_text is not None and item.category == "decision":
                fact["decision_text"] = item.decision_text
            if item.supersedes:
                rec.op = {"op": "supersede", "id": item.supersedes, "fact": fact}
            else:
                rec.op = {"op": "add", "fact": fact}
        else:
            rec.op = {
                "op": item.op,
                "id": item.fact_id,
                "evidence": list(dict.fromkeys(hashes)),
                "reason": item.reason,
            }
            if item.op == "close":
                rec.op["seq"] = max(cited)  # "done / used at seq N": its last evidence
        return rec
