"""The model writer: writer, verifier, exactly one repair, labelled fallback (DESIGN.md 5.3). Pure.

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

from collections.abc import Sequence
from typing import Any

from ledger_app.mechanical import EntryView
from ledger_app.model_client import (
    CallRecord,
    ModelClient,
    ModelConfig,
    ModelRequestRefused,
    ModelUnavailable,
)
from ledger_app.model_writer.judges import (
    EvidenceFn,
    FoldContext,
    code_ops,
    default_evidence,
    dry_run,
    earlier_entries,
    rules_judgement,
)
from ledger_app.model_writer.messages import (
    load_prompt,
    private,
    repair_request,
    verifier_messages,
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
from ledger_app.offline import EvidenceIndex, check_item
from ledger_app.proposals import (
    ItemVerdict,
    ProposedEnd,
    ProposedFact,
    VerifierReport,
    WriterProposal,
    duplicate_keys,
    parse_reply,
    verifier_schema,
    writer_schema,
)
from ledger_app.writers import MechanicalWriter


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

    def __init__(
        self,
        config: ModelConfig,
        *,
        client: ModelClient | None = None,
        writer_prompt: str = "writer-v1",
        verifier_prompt: str = "verifier-v1",
    ) -> None:
        self.config = config
        self.client = client or ModelClient(config)
        self.writer_prompt = load_prompt(writer_prompt)
        self.verifier_prompt = load_prompt(verifier_prompt)
        self.id = f"model:{config.writer_model}"[:100]
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
        """Propose, verify, repair once, fall back (module docstring).

        Raises:
            WriterFailed: a model call failed after the client's retries, or was refused.
        """
        calls: list[CallRecord] = []
        rounds: list[RoundRecord] = []
        evidence = ctx.evidence or default_evidence(entries, ctx.number)
        messages = writer_messages(self.writer_prompt, entries, state, ctx)
        try:
            first = self._round(
                0, "proposal", messages, entries, state, ctx, evidence, calls, rounds
            )
            if first.clean:
                return self._done("accepted", first.ops, entries, rounds, calls)
            repair_messages = [
                *messages,
                {"role": "assistant", "content": private(first.raw) or "(no content)"},
                {"role": "user", "content": repair_request(first)},
            ]
            second = self._round(
                1, "repair", repair_messages, entries, state, ctx, evidence, calls, rounds
            )
        except (ModelUnavailable, ModelRequestRefused) as exc:
            calls.append(exc.record)
            raise WriterFailed(
                str(exc),
                calls=calls,
                writer=self.manifest_writer(),
                verifier=self.manifest_verifier(),
                rounds=rounds,
            ) from exc
        if second.clean:
            kept = [i.op for i in first.items if i.accepted] + second.ops
            return self._done("repaired", kept, entries, rounds, calls)
        reasons = "; ".join(
            [second.error or second.verifier_error]
            if (second.error or second.verifier_error)
            else [f"{i.key}: {r}" for i in second.rejected for r in i.reasons]
        )
        fallback = MechanicalWriter().propose(entries, state)
        rounds.append(RoundRecord(round=2, kind="fallback", ops=fallback))
        return Composition(
            ops=fallback,
            outcome="fallback",
            writer=self.manifest_writer(),
            verifier=self.manifest_verifier(),
            rounds=rounds,
            calls=calls,
            note="mechanical facts only: " + FALLBACK_NOTE,
            fallback_reason=f"the repair was rejected too: {reasons}"[:2000],
        )

    def _done(
        self,
        outcome: str,
        writer_ops: list[dict[str, Any]],
        entries: Sequence[EntryView],
        rounds: list[RoundRecord],
        calls: list[CallRecord],
    ) -> Composition:
        return Composition(
            ops=code_ops(entries) + writer_ops,
            outcome=outcome,
            writer=self.manifest_writer(),
            verifier=self.manifest_verifier(),
            rounds=rounds,
            calls=calls,
        )

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
    ) -> RoundRecord:
        """One writer answer, judged; appended to ``rounds`` before the verifier is called,
        so a verifier failure still leaves the writer's answer on record."""
        reply = self.client.complete(
            role="writer",
            messages=messages,
            schema_name="ledger_delta",
            schema=writer_schema(),
            round=number,
        )
        calls.append(reply.record)
        record = RoundRecord(round=number, kind=kind, raw=reply.text)
        rounds.append(record)
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
        for item in [*proposal.facts, *proposal.ends]:
            rec = self._translate(item, number, ctx, by_seq)
            if item.key in dupes:
                rec.judgements.append(
                    Judgement("parser", "not_entailed", f"key {item.key!r} is used twice")
                )
            if rec.op:
                rec.judgements.append(rules_judgement(check_item(rec.op, index, state)))
                rec.judgements.append(dry_run(rec.op, state, ctx, evidence))
            record.items.append(rec)
        judged = [r for r in record.items if r.op]
        if judged:
            self._verify(judged, index, state, ctx, record, calls, number)
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
            fact = {
                "id": f"w{ctx.number}.{round_no}.{item.key}",
                "category": item.category,
                "priority": item.priority,
                "confidence": item.confidence,
                "text": item.text,
                "support": [{"entry": h} for h in dict.fromkeys(hashes)],
                "author": "writer",
            }
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
        return rec

    def _verify(
        self,
        items: list[ItemRecord],
        index: EvidenceIndex,
        state: dict[str, Any],
        ctx: FoldContext,
        record: RoundRecord,
        calls: list[CallRecord],
        round_no: int,
    ) -> None:
        reply = self.client.complete(
            role="verifier",
            messages=verifier_messages(self.verifier_prompt, items, index, state, ctx),
            schema_name="ledger_verdicts",
            schema=verifier_schema(),
            round=round_no,
        )
        calls.append(reply.record)
        record.verifier_raw = reply.text
        report, error = parse_reply(reply.text, VerifierReport)
        if report is None:
            record.verifier_error = f"the verifier's answer is not valid: {error}"
            for item in items:
                item.judgements.append(Judgement("verifier", "not_entailed", record.verifier_error))
            return
        verdicts: dict[str, ItemVerdict] = {}
        for v in report.verdicts:
            verdicts.setdefault(v.key, v)
        for item in items:
            v = verdicts.get(item.key)
            if v is None:
                item.judgements.append(
                    Judgement("verifier", "not_entailed", "the verifier returned no verdict")
                )
                continue
            item.judgements.append(
                Judgement(
                    "verifier", v.entailment, v.entailment_reason, v.temporal, v.temporal_reason
                )
            )
