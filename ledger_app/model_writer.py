"""Writer, verifier, exactly one repair, and the labelled fallback (DESIGN.md 5.3). Pure.

:func:`compose` is what the fold service calls to get a fold's non-pin ops from any writer,
with the record of how they were reached (a :class:`Composition`):

* **model writer** (:class:`ModelWriter`): the writer model proposes a delta as structured
  output (:mod:`ledger_app.proposals`); every item is judged by the rules
  (:func:`ledger_app.offline.check_item`, plus a dry run of the reducer) *and* by a separate
  verifier model call that returns an entailment and a temporal verdict per item. An item
  stands only when every judge accepts it. A reply that is not valid JSON for the schema is a
  rejection of the whole answer, not a crash. Any rejection gets **exactly one** repair: the
  writer is called again with the rejected items and the reasons. If the repair is rejected
  too, no more model calls are made for this fold: it **falls back** to mechanical facts
  (tool outcomes; the service adds the pins), with the outcome ``fallback`` and the note
  :data:`FALLBACK_NOTE`. Outcomes: ``accepted`` (nothing rejected), ``repaired``,
  ``fallback``. A model that cannot be reached (after the client's retries) or refuses the
  request raises :class:`WriterFailed`: nothing of the fold is kept.
  Failed tool calls and interrupted calls are always recorded by code, in every outcome, so
  a failure is in the ledger whatever the writer says.
* **offline writer** (:class:`ledger_app.offline.OfflineWriter`): its items go through the
  same rules; the ones rejected are dropped and recorded. Outcome ``accepted``.
* any other :class:`ledger_app.writers.Writer`: its ops unchanged (the mechanical writer's
  outcome is ``fallback``, as the first fold of the skeleton).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger_app import reducer
from ledger_app.mechanical import EntryView, interrupted_fact, outcome_fact
from ledger_app.model_client import (
    CallRecord,
    ModelClient,
    ModelConfig,
    ModelRequestRefused,
    ModelUnavailable,
)
from ledger_app.offline import EvidenceIndex, OfflineWriter, RuleVerdict, check_item
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
from ledger_app.writers import MechanicalWriter, Writer

FALLBACK_NOTE = "retrieve raw journal evidence before relying on omitted state"
PROMPTS = Path(__file__).parent / "prompts"
ENTRY_TEXT_LIMIT = 1500
EVIDENCE_TEXT_LIMIT = 3000
STATE_FACT_LIMIT = 300


@dataclass(frozen=True)
class Prompt:
    """A versioned rubric file: ``version`` (file stem), ``text``, ``sha256`` of its bytes."""

    version: str
    text: str
    sha256: str


def load_prompt(version: str) -> Prompt:
    """Read ``ledger_app/prompts/<version>.md``; its hash goes into every manifest.

    Raises:
        FileNotFoundError: no such prompt version.
    """
    raw = (PROMPTS / f"{version}.md").read_bytes()
    return Prompt(version, raw.decode("utf-8"), hashlib.sha256(raw).hexdigest())


class WriterFailed(Exception):
    """The writer or verifier model could not be used for this fold (unreachable, refused).

    Attributes: ``calls`` (:class:`CallRecord` list, the failed one last), ``writer`` and
    ``verifier`` (manifest dicts), ``rounds`` (what was received before the failure).
    """

    def __init__(
        self,
        message: str,
        *,
        calls: list[CallRecord],
        writer: dict[str, Any],
        verifier: dict[str, Any],
        rounds: list[RoundRecord],
    ) -> None:
        super().__init__(message)
        self.calls, self.writer, self.verifier, self.rounds = calls, writer, verifier, rounds


@dataclass
class Judgement:
    """One judge's two verdicts on one item. ``judge``: parser, rules, reducer or verifier."""

    judge: str
    entailment: str
    entailment_reason: str
    temporal: str = "valid"
    temporal_reason: str = ""

    @property
    def accepted(self) -> bool:
        return self.entailment == "entailed" and self.temporal == "valid"

    def to_dict(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "entailment": self.entailment,
            "entailment_reason": self.entailment_reason,
            "temporal": self.temporal,
            "temporal_reason": self.temporal_reason,
        }


@dataclass
class ItemRecord:
    """One proposed item, the op it became (``{}`` if none could be built), and its verdicts."""

    key: str
    op: dict[str, Any]
    claim: str
    support: list[str] = field(default_factory=list)
    judgements: list[Judgement] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return bool(self.op) and all(j.accepted for j in self.judgements)

    @property
    def reasons(self) -> list[str]:
        """Every rejection reason, prefixed with its judge (``"verifier: ..."``)."""
        out = []
        for j in self.judgements:
            if j.entailment != "entailed":
                out.append(f"{j.judge}: {j.entailment_reason}")
            if j.temporal != "valid":
                out.append(f"{j.judge} (temporal): {j.temporal_reason}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "op": self.op,
            "claim": self.claim,
            "support": self.support,
            "accepted": self.accepted,
            "verdicts": [j.to_dict() for j in self.judgements],
        }


@dataclass
class RoundRecord:
    """One writer answer: ``round`` 0 (proposal) or 1 (repair); ``kind`` proposal, repair,
    offline or fallback; ``raw`` the reply verbatim; ``error`` why it did not validate."""

    round: int
    kind: str
    raw: str = ""
    parsed: dict[str, Any] | None = None
    error: str = ""
    verifier_raw: str = ""
    verifier_error: str = ""
    items: list[ItemRecord] = field(default_factory=list)
    ops: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rejected(self) -> list[ItemRecord]:
        return [i for i in self.items if not i.accepted]

    @property
    def clean(self) -> bool:
        """Valid reply and nothing rejected."""
        return not self.error and not self.verifier_error and not self.rejected


@dataclass
class Composition:
    """What :func:`compose` returns: the writer ops of one fold and how they were reached."""

    ops: list[dict[str, Any]]
    outcome: str
    writer: dict[str, Any]
    verifier: dict[str, Any]
    rounds: list[RoundRecord] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    note: str = ""
    fallback_reason: str = ""

    def review(self) -> dict[str, Any]:
        """Manifest summary: counts and every rejected item with its reasons."""
        items = [i for r in self.rounds for i in r.items]
        return {
            "rounds": len([r for r in self.rounds if r.kind != "fallback"]),
            "proposed": len(items),
            "accepted": sum(1 for i in items if i.accepted),
            "rejected": sum(1 for i in items if not i.accepted)
            + sum(1 for r in self.rounds if r.error or r.verifier_error),
            "repair": any(r.kind == "repair" for r in self.rounds),
            "fallback_reason": self.fallback_reason,
            "rejections": [
                {"round": r.round, "key": "(answer)", "claim": "", "reasons": [r.error]}
                for r in self.rounds
                if r.error
            ]
            + [
                {"round": r.round, "key": i.key, "claim": i.claim, "reasons": i.reasons}
                for r in self.rounds
                for i in r.items
                if not i.accepted
            ],
        }

    def usage(self) -> dict[str, Any]:
        """Totals over the model calls: calls, input/output tokens, latency (seconds)."""
        return {
            "calls": len(self.calls),
            "input_tokens": sum(c.input_tokens for c in self.calls),
            "output_tokens": sum(c.output_tokens for c in self.calls),
            "latency_s": round(sum(c.latency_s for c in self.calls), 3),
            "total_s": round(sum(c.total_s for c in self.calls), 3),
        }


Resolver = Callable[[Iterable[int], Iterable[str]], list[EntryView]]
EvidenceFn = Callable[[Sequence[dict[str, Any]]], dict[str, dict[str, Any]]]


@dataclass
class FoldContext:
    """What a writer may know of the fold besides its entries.

    ``resolve(seqs, hashes)`` returns earlier raw entries of the same scope at or before
    ``revision`` (cited support); ``evidence(ops)`` builds the reducer's evidence index for
    ops (DESIGN.md 5.2). Defaults: nothing earlier, covered entries only.
    """

    number: int
    revision: int
    resolve: Resolver | None = None
    evidence: EvidenceFn | None = None


def _default_evidence(entries: Sequence[EntryView], number: int) -> EvidenceFn:
    index = {
        e.entry_hash: {
            "seq": e.seq,
            "kind": e.kind,
            "role": e.role,
            "is_error": e.is_error,
            "derived": e.derived,
            "fold": number,
        }
        for e in entries
    }
    return lambda ops: index


def code_ops(entries: Sequence[EntryView]) -> list[dict[str, Any]]:
    """What code records in every model fold: failed calls (blockers) and interrupted calls."""
    results = {e.tool_call_id: e for e in entries if e.kind == "tool_result"}
    ops = []
    for e in entries:
        if e.kind != "tool_call":
            continue
        result = results.get(e.tool_call_id)
        if result is None:
            ops.append({"op": "add", "fact": interrupted_fact(e)})
        elif result.is_error:
            ops.append({"op": "add", "fact": outcome_fact(e, result)})
    return ops


def _dry_run(
    op: dict[str, Any], state: dict[str, Any], ctx: FoldContext, evidence: EvidenceFn
) -> Judgement:
    try:
        red = reducer.apply_delta(
            state, {"fold": ctx.number, "evidence": evidence([op]), "ops": [op]}
        )
    except reducer.DeltaInvalid as exc:
        return Judgement("reducer", "not_entailed", str(exc))
    if red.rejected:
        return Judgement("reducer", "not_entailed", red.rejected[0].reason)
    return Judgement("reducer", "entailed", "the reducer's rules accept it")


def _rules(verdict: RuleVerdict) -> Judgement:
    return Judgement(
        "rules",
        verdict.entailment,
        verdict.entailment_reason,
        verdict.temporal,
        verdict.temporal_reason,
    )


def compose(
    writer: Writer | ModelWriter,
    *,
    entries: Sequence[EntryView],
    state: dict[str, Any],
    ctx: FoldContext,
) -> Composition:
    """The non-pin ops of one fold from ``writer``, with the record of how they were reached.

    Args:
        writer: a :class:`ModelWriter`, an :class:`~ledger_app.offline.OfflineWriter`, or any
            writer with ``propose``.
        entries: the covered entries in seq order.
        state: the ledger state before the fold (not modified).
        ctx: fold number, revision, and access to earlier entries.

    Returns:
        :class:`Composition`.

    Raises:
        WriterFailed: a model writer's model was unreachable or refused the request.
    """
    if isinstance(writer, ModelWriter):
        return writer.compose(entries=entries, state=state, ctx=ctx)
    info = {
        "id": writer.id,
        "label": writer.label,
        "kind": "offline" if isinstance(writer, OfflineWriter) else writer.id,
        "prompt_version": writer.prompt_version,
    }
    if isinstance(writer, OfflineWriter):
        return _compose_offline(writer, entries, state, ctx, info)
    ops = writer.propose(entries, state)
    outcome = "fallback" if writer.id == "mechanical" else "accepted"
    return Composition(
        ops=ops,
        outcome=outcome,
        writer=info,
        verifier={"id": "reducer-rules", "prompt_version": None},
        note=("mechanical facts only: " + FALLBACK_NOTE) if outcome == "fallback" else "",
    )


def _compose_offline(
    writer: OfflineWriter,
    entries: Sequence[EntryView],
    state: dict[str, Any],
    ctx: FoldContext,
    info: dict[str, Any],
) -> Composition:
    ops = writer.propose(entries, state)
    index = EvidenceIndex(entries, _earlier(ctx, ops, state, entries))
    items: list[ItemRecord] = []
    kept: list[dict[str, Any]] = []
    dropped: set[str] = set()
    for n, op in enumerate(ops):
        target = str(op.get("id", ""))
        if target in dropped and op.get("op") == "supersede":
            op = {"op": "add", "fact": op["fact"]}  # what it replaced was not recorded
        fact = op.get("fact") if isinstance(op.get("fact"), dict) else None
        record = ItemRecord(
            key=(fact or {}).get("id") or f"{op.get('op')}:{op.get('id', n)}",
            op=op,
            claim=(fact or {}).get("text", "") or f"{op.get('op')} {op.get('id', '')}",
            support=[s["entry"] for s in (fact or {}).get("support", [])]
            or list(op.get("evidence", [])),
            judgements=[_rules(check_item(op, index, state))],
        )
        if target in dropped and op.get("op") in ("close", "cancel", "retire"):
            record.judgements.append(
                Judgement("rules", "not_entailed", f"fact {target!r} was not recorded")
            )
        items.append(record)
        if record.accepted:
            kept.append(op)
        elif fact is not None:
            dropped.add(str(fact.get("id", "")))
    return Composition(
        ops=kept,
        outcome="accepted",
        writer=info,
        verifier={
            "id": "offline-rules",
            "label": "the verifier's rules applied mechanically (no model)",
            "prompt_version": None,
        },
        rounds=[RoundRecord(round=0, kind="offline", items=items, ops=kept)],
        note="offline writer: deterministic rules over the journal, no model output",
    )


def _earlier(
    ctx: FoldContext,
    ops: Sequence[dict[str, Any]],
    state: dict[str, Any],
    entries: Sequence[EntryView],
    seqs: Iterable[int] = (),
) -> list[EntryView]:
    """Earlier entries the ops (or the facts they end) cite, through ``ctx.resolve``."""
    if ctx.resolve is None:
        return []
    covered = {e.entry_hash for e in entries}
    facts = state.get("facts", {})
    hashes: set[str] = set()
    for op in ops:
        fact = op.get("fact")
        if isinstance(fact, dict):
            hashes |= {s.get("entry") for s in fact.get("support", []) if isinstance(s, dict)}
        hashes |= {h for h in op.get("evidence", []) if isinstance(h, str)}
        target = facts.get(str(op.get("id", "")))
        if target:
            hashes |= {s["entry"] for s in target.get("support", [])}
    wanted = {h for h in hashes if isinstance(h, str)} - covered
    seq_set = set(seqs) - {e.seq for e in entries}
    if not wanted and not seq_set:
        return []
    return ctx.resolve(sorted(seq_set), sorted(wanted))


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + f" …[{len(text) - limit} characters omitted]… " + text[-half:]


def _entry_json(e: EntryView, limit: int) -> dict[str, Any]:
    d: dict[str, Any] = {"seq": e.seq, "kind": e.kind, "role": e.role}
    if e.tool_name:
        d["tool"] = e.tool_name
    if e.tool_call_id:
        d["call_id"] = e.tool_call_id
    if e.kind == "tool_result":
        d["is_error"] = e.is_error
        if e.content.get("exit_code") is not None:
            d["exit_code"] = e.content["exit_code"]
    if e.derived:
        d["derived"] = True
    if limit > 0:
        d["text"] = _clip(e.text, limit)
    return d


def _state_json(state: dict[str, Any]) -> list[dict[str, Any]]:
    facts = [f for f in state.get("facts", {}).values() if f.get("lifecycle") == "active"]
    facts.sort(key=lambda f: (f.get("priority", "P9"), f.get("origin_fold", 0)))
    return [
        {
            "id": f["id"],
            "category": f["category"],
            "priority": f["priority"],
            "confidence": f["confidence"],
            "text": _clip(f["text"], 500 if f.get("pin") else 300),
        }
        for f in facts[:STATE_FACT_LIMIT]
    ]


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
        evidence = ctx.evidence or _default_evidence(entries, ctx.number)
        messages = self._writer_messages(entries, state, ctx)
        try:
            first = self._round(
                0, "proposal", messages, entries, state, ctx, evidence, calls, rounds
            )
            if first.clean:
                return self._done("accepted", first.ops, entries, rounds, calls)
            repair_messages = [
                *messages,
                {"role": "assistant", "content": first.raw or "(no content)"},
                {"role": "user", "content": self._repair_request(first)},
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
        extra = _earlier(ctx, ends_targets, state, entries, seqs)
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
                rec.judgements.append(_rules(check_item(rec.op, index, state)))
                rec.judgements.append(_dry_run(rec.op, state, ctx, evidence))
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
            messages=self._verifier_messages(items, index, state, ctx),
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

    # ------------------------------------------------------------------ messages

    def _writer_messages(
        self, entries: Sequence[EntryView], state: dict[str, Any], ctx: FoldContext
    ) -> list[dict[str, str]]:
        payload = {
            "fold": ctx.number,
            "revision": ctx.revision,
            "ledger": _state_json(state),
            "entries": [_entry_json(e, ENTRY_TEXT_LIMIT) for e in entries],
        }
        return [
            {"role": "system", "content": self.writer_prompt.text},
            {
                "role": "user",
                "content": "Propose the ledger delta for these entries. Answer with JSON only.\n"
                + json.dumps(payload, ensure_ascii=False),
            },
        ]

    def _repair_request(self, first: RoundRecord) -> str:
        if first.error:
            body: dict[str, Any] = {"your_answer_was_rejected": first.error}
        else:
            body = {
                "rejected": [
                    {"key": i.key, "claim": i.claim, "op": i.op.get("op"), "reasons": i.reasons}
                    for i in first.rejected
                ],
                "accepted_keys": [i.key for i in first.items if i.accepted],
            }
        return (
            "Repair. Some of your answer was rejected; this is the one repair you get. Answer "
            "with replacements for the rejected items only, narrowed to what the cited "
            "evidence shows, or leave them out. JSON only, same schema.\n"
            + json.dumps(body, ensure_ascii=False)
        )

    def _verifier_messages(
        self,
        items: list[ItemRecord],
        index: EvidenceIndex,
        state: dict[str, Any],
        ctx: FoldContext,
    ) -> list[dict[str, str]]:
        facts = state.get("facts", {})
        rendered = []
        for item in items:
            op = item.op
            fact = op.get("fact") if isinstance(op.get("fact"), dict) else None
            entry: dict[str, Any] = {"key": item.key, "op": op.get("op")}
            if fact:
                entry.update(
                    category=fact["category"],
                    priority=fact["priority"],
                    confidence=fact["confidence"],
                    claim=fact["text"],
                )
            target = facts.get(str(op.get("id", "")))
            if target:
                entry["target"] = {
                    "id": target["id"],
                    "category": target["category"],
                    "text": _clip(target["text"], 500),
                    "lifecycle": target["lifecycle"],
                }
            if op.get("reason"):
                entry["reason"] = op["reason"]
            entry["cited"] = [
                _entry_json(index.by_hash[h], EVIDENCE_TEXT_LIMIT)
                for h in item.support
                if h in index.by_hash
            ]
            rendered.append(entry)
        obligations = [
            {"id": f["id"], "text": _clip(f["text"], 300)}
            for f in facts.values()
            if f.get("category") == "open_obligation" and f.get("lifecycle") == "active"
        ][:100]
        payload = {
            "revision": ctx.revision,
            "items": rendered,
            "open_obligations": obligations,
            "timeline": [_entry_json(e, 0) for e in index.entries],
        }
        return [
            {"role": "system", "content": self.verifier_prompt.text},
            {
                "role": "user",
                "content": "Judge every item. Answer with JSON only.\n"
                + json.dumps(payload, ensure_ascii=False),
            },
        ]
