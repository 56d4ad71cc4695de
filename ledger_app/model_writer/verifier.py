"""The verifier model's calls: verdicts on a round's items, in batches that fit. Pure.

Each proposed item the rules and the reducer's dry run judged is sent to the verifier model
(:func:`verify_items`), which returns an entailment and a temporal verdict per item; a
verdict must name a cited ``seq`` and a ``quote`` found in that entry, else it counts as no
verdict. Called by :class:`ledger_app.model_writer.model_writer.ModelWriter` for every round
(docs/design.md 5.3).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from ledger_app.model_client import (
    CallRecord,
    ModelClient,
    ModelConfig,
    ModelRequestRefused,
    context_overflow,
)
from ledger_app.model_writer import window
from ledger_app.model_writer.judges import FoldContext
from ledger_app.model_writer.messages import (
    VERIFIER_EXAMPLE,
    Prompt,
    quote_check,
    verifier_item_json,
    verifier_messages,
)
from ledger_app.model_writer.records import ItemRecord, Judgement, RoundRecord
from ledger_app.offline import EvidenceIndex
from ledger_app.proposals import ItemVerdict, VerifierReport, parse_reply, verifier_schema


@dataclass
class VerifierRound:
    """What every verifier call of one round shares.

    Attributes:
        client, config, prompt: the verifier's model client, the model settings and the
            verifier rubric (:class:`~ledger_app.model_writer.messages.Prompt`).
        index, state, ctx: what the items are judged against (the cited entries, the
            ledger state, the fold's context).
        record: the round; its ``verifier_raw`` and ``verifier_error`` are filled.
        calls: the fold's call records; each verifier call is appended.
        round_no: the round number sent with each call.
    """

    client: ModelClient
    config: ModelConfig
    prompt: Prompt
    index: EvidenceIndex
    state: dict[str, Any]
    ctx: FoldContext
    record: RoundRecord
    calls: list[CallRecord]
    round_no: int


def verify_items(run: VerifierRound, items: list[ItemRecord]) -> None:
    """Append the verifier's verdicts on ``items`` to their judgements, in batches that fit its window
    (:func:`~ledger_app.model_writer.window.verifier_batches`); a batch the server
    refuses as too long is split in two (a single item that does not fit gets no
    verdict, labelled). Each verdict must name a cited ``seq`` and a ``quote`` found in
    that entry's text as shown (:func:`quote_check`), else it counts as no verdict.

    Args:
        run: what the round's verifier calls share (:class:`VerifierRound`).
        items: the round's items that have an op.

    Raises:
        ModelUnavailable / ModelRequestRefused: as :meth:`ModelClient.complete` (a refusal
            for context overflow splits the batch instead).
    """
    queue = deque(
        window.verifier_batches(
            items, run.index, run.state, run.ctx, run.config, run.prompt, run.client.mode
        )
    )
    while queue:
        batch = queue.popleft()
        try:
            _verify_batch(run, batch)
        except ModelRequestRefused as exc:
            if not context_overflow(exc.__cause__ or exc):
                raise
            run.calls.append(exc.record)
            if len(batch) > 1:
                half = len(batch) // 2
                queue.extendleft([batch[half:], batch[:half]])
                continue
            for item in batch:
                item.judgements.append(
                    Judgement(
                        "verifier",
                        "not_entailed",
                        "no verdict: the item and its evidence do not fit the verifier's window",
                    )
                )


def _verify_batch(run: VerifierRound, items: list[ItemRecord]) -> None:
    record, index, state = run.record, run.index, run.state
    reply = run.client.complete(
        role="verifier",
        messages=verifier_messages(run.prompt, items, index, state, run.ctx),
        schema_name="ledger_verdicts",
        schema=verifier_schema(),
        round=run.round_no,
        example=VERIFIER_EXAMPLE,
        max_tokens=window.output_tokens(run.config, "verifier"),
    )
    run.calls.append(reply.record)
    record.verifier_raw = (
        f"{record.verifier_raw}\n{reply.text}" if record.verifier_raw else reply.text
    )
    if reply.record.status == "malformed":
        cause = reply.record.errors[-1] if reply.record.errors else "malformed response body"
        error = f"the verifier's answer is not valid: {cause}"
    elif reply.record.truncated:
        error = (
            f"the verifier's answer was cut at max_tokens ({reply.record.max_tokens}): "
            "finish_reason length"
        )
    else:
        report, why = parse_reply(reply.text, VerifierReport)
        error = "" if report is not None else f"the verifier's answer is not valid: {why}"
    if error:
        record.verifier_error = error
        for item in items:
            item.judgements.append(Judgement("verifier", "not_entailed", error))
        return
    assert report is not None
    verdicts: dict[str, ItemVerdict] = {}
    for reported in report.verdicts:
        verdicts.setdefault(reported.key, reported)
    for item in items:
        v = verdicts.get(item.key)
        if v is None:
            item.judgements.append(
                Judgement("verifier", "not_entailed", "the verifier returned no verdict")
            )
            continue
        shown = {
            c["seq"]: c.get("text", "")
            for c in verifier_item_json(item, index, state.get("facts", {}))["cited"]
        }
        missing = quote_check(v.seq, v.quote, shown)
        if missing:
            said = f"{v.entailment}/{v.temporal}: {v.entailment_reason}"[:300]
            item.judgements.append(
                Judgement(
                    "verifier",
                    "not_entailed",
                    f"no verdict: the verifier did not name the seq and quote it rests on "
                    f"({missing}); it said {said}",
                )
            )
            continue
        item.judgements.append(
            Judgement(
                "verifier",
                v.entailment,
                f"{v.entailment_reason} [seq {v.seq}: {v.quote!r}]",
                v.temporal,
                v.temporal_reason,
            )
        )
