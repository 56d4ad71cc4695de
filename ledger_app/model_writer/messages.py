"""What the writer and the verifier models are sent (docs/design.md 5.3). Pure.

The rubric (a versioned file under ``ledger_app/prompts/``, :func:`load_prompt`) is the
system message; the user message is JSON built here from the covered entries, the ledger
state, the items to judge, or the repair feedback.

Privacy (docs/design.md 6, 7 and 9): a request leaves the machine, so every text that
comes from the journal passes through :func:`journal_app.privacy.filter_text` before it is
clipped and sent: entry text (messages, tool arguments, tool output), the ledger state's fact
texts, the items to judge and the repair feedback (claims, reasons). Secret values and
hidden reasoning become ``[filtered: ...]`` marks. Pins included: a pin stays verbatim in the
ledger (docs/design.md 5.2), but its copy in a prompt is filtered like any other text, because
the rule is about what leaves the machine, not about who wrote it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from journal_app.privacy import filter_text
from journal_app.tokens import count_tokens
from ledger_app.entry_view import EntryView
from ledger_app.model_writer.judges import FoldContext
from ledger_app.model_writer.records import ItemRecord, RoundRecord
from ledger_app.offline import EvidenceIndex
from ledger_app.offline.turns import instruction_parts

PROMPTS = Path(__file__).resolve().parent.parent / "prompts"
ENTRY_TEXT_LIMIT = 1500
EVIDENCE_TEXT_LIMIT = 3000
STATE_FACT_LIMIT = 300

#: The compact example shown with the schema when the server does not enforce it
#: (``json_object``/``none`` modes): the field names a small model must copy.
WRITER_EXAMPLE: dict[str, Any] = {
    "facts": [
        {
            "key": "f1",
            "category": "verified_state",
            "priority": "P1",
            "confidence": "verified",
            "text": "8 tests in tests/test_refunds.py passed",
            "support": [5],
        }
    ],
    "ends": [{"key": "e1", "op": "close", "fact_id": "pin:3f2a", "evidence": [5], "reason": "ran"}],
}
VERIFIER_EXAMPLE: dict[str, Any] = {
    "verdicts": [
        {
            "key": "f1",
            "seq": 5,
            "quote": "8 passed in 0.12s",
            "entailment": "entailed",
            "entailment_reason": "seq 5 shows '8 passed' for tests/test_refunds.py",
            "temporal": "valid",
            "temporal_reason": "it closes nothing",
        }
    ]
}


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


def private(text: str, *, kind: str = "message") -> str:
    """``text`` as a prompt may carry it: secrets and hidden reasoning replaced by marks.

    Args:
        text: any text from the journal or the ledger (entry text, fact text, a reason).
        kind: the entry's kind; a whole ``"reasoning"`` entry becomes the reasoning mark.

    Returns:
        :func:`journal_app.privacy.filter_text`'s text (unchanged when nothing is private).
    """
    return filter_text(text, kind=kind).text


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + f" …[{len(text) - limit} characters omitted]… " + text[-half:]


def entry_json(e: EntryView, limit: int) -> dict[str, Any]:
    """One entry as the models see it: seq, kind, role, tool, call id, error flags, and its
    text filtered (:func:`private`) then clipped to ``limit`` characters (none when 0)."""
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
        d["text"] = _clip(private(e.text, kind=e.kind), limit)
    return d


def state_json(state: dict[str, Any], token_limit: int = 0) -> list[dict[str, Any]]:
    """The active facts of ``state`` (at most ``STATE_FACT_LIMIT``, by priority then fold),
    texts filtered (:func:`private`, pins included) then clipped (pins 500, others 300).

    ``token_limit`` (o200k_base tokens; 0: none) stops the list once the facts' JSON would
    pass it, keeping the first facts (P0 first): the writer's window bounds the state too."""
    facts = [f for f in state.get("facts", {}).values() if f.get("lifecycle") == "active"]
    facts.sort(key=lambda f: (f.get("priority", "P9"), f.get("origin_fold", 0)))
    out: list[dict[str, Any]] = []
    used = 0
    for f in facts[:STATE_FACT_LIMIT]:
        shown = _fact_json(f)
        if token_limit:
            used += count_tokens(json.dumps(shown, ensure_ascii=False)) + 1
            if used > token_limit:
                break
        out.append(shown)
    return out


def _fact_json(f: dict[str, Any]) -> dict[str, Any]:
    """One active fact as the writer sees it; a pin names its kind (a request pin lists its
    parts when it has several: each needs its own evidence before a ``close``), a decision
    its exact text, a consequential fact says so (docs/design.md 5.2, 5.5). Texts filtered."""
    out: dict[str, Any] = {
        "id": f["id"],
        "category": f["category"],
        "priority": f["priority"],
        "confidence": f["confidence"],
        "text": _clip(private(f["text"]), 500 if f.get("pin") else 300),
    }
    if f.get("pin"):
        out["pin_kind"] = f.get("pin_kind") or "governing"
        parts = instruction_parts(f["text"]) if out["pin_kind"] == "request" else []
        if len(parts) > 1:
            out["parts"] = [_clip(private(p), 200) for p in parts]
    if f.get("category") == "decision" and f.get("decision_text"):
        out["decision_text"] = _clip(private(str(f["decision_text"])), 500)
    if f.get("consequential"):
        out["consequential"] = True
    return out


def writer_messages(
    prompt: Prompt,
    entries: Sequence[EntryView],
    state: dict[str, Any],
    ctx: FoldContext,
    *,
    state_tokens: int = 0,
) -> list[dict[str, str]]:
    """The writer's request: the rubric, then the fold, the ledger state and the entries.

    ``state_tokens`` bounds the ledger state (:func:`state_json`); when facts are left out,
    ``ledger_omitted`` says how many.

    Returns:
        ``[{"role": "system", ...}, {"role": "user", "content": "...JSON"}]``.
    """
    ledger = state_json(state, state_tokens)
    payload: dict[str, Any] = {"fold": ctx.number, "revision": ctx.revision, "ledger": ledger}
    active = sum(1 for f in state.get("facts", {}).values() if f.get("lifecycle") == "active")
    if active > len(ledger):
        payload["ledger_omitted"] = active - len(ledger)
    payload["entries"] = [entry_json(e, ENTRY_TEXT_LIMIT) for e in entries]
    return [
        {"role": "system", "content": prompt.text},
        {
            "role": "user",
            "content": "Propose the ledger delta for these entries. Answer with JSON only.\n"
            + json.dumps(payload, ensure_ascii=False),
        },
    ]


def repair_request(first: RoundRecord) -> str:
    """The one repair's user message: only the rejected items, each with its claim and
    reasons (never the whole first answer), or, when the answer as a whole did not
    validate, the reason, the first 200 characters of it and the example answer. Claims and
    reasons filtered (:func:`private`: rule reasons quote commands)."""
    if first.error:
        body: dict[str, Any] = {
            "your_answer_was_rejected": private(first.error),
            "it_began": private(first.raw[:200]),
            "answer_like_this": WRITER_EXAMPLE,
        }
    else:
        body = {
            "rejected": [
                {
                    "key": i.key,
                    "claim": private(i.claim),
                    "op": i.op.get("op"),
                    "reasons": [private(r) for r in i.reasons],
                }
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


def verifier_item_json(
    item: ItemRecord, index: EvidenceIndex, facts: dict[str, Any]
) -> dict[str, Any]:
    """One item as the verifier sees it: its claim, target, reason and cited entries (text
    filtered and clipped to ``EVIDENCE_TEXT_LIMIT``: the text its quote is checked against)."""
    op = item.op
    fact = op.get("fact") if isinstance(op.get("fact"), dict) else None
    entry: dict[str, Any] = {"key": item.key, "op": op.get("op")}
    if fact:
        entry.update(
            category=fact["category"],
            priority=fact["priority"],
            confidence=fact["confidence"],
            claim=private(fact["text"]),
        )
    target = facts.get(str(op.get("id", "")))
    if target:
        entry["target"] = {**_fact_json(target), "lifecycle": target["lifecycle"]}
    elif str(op.get("id", "")).startswith("pin:"):
        entry["target"] = {"id": op["id"], "pin": True, "note": "pinned in this fold"}
    if fact and fact.get("decision_text"):
        entry["decision_text"] = private(str(fact["decision_text"]))
    if fact and fact.get("consequential"):
        entry["consequential"] = True
    if op.get("reason"):
        entry["reason"] = private(op["reason"])
    entry["cited"] = [
        entry_json(index.by_hash[h], EVIDENCE_TEXT_LIMIT)
        for h in item.support
        if h in index.by_hash
    ]
    return entry


def verifier_messages(
    prompt: Prompt,
    items: list[ItemRecord],
    index: EvidenceIndex,
    state: dict[str, Any],
    ctx: FoldContext,
) -> list[dict[str, str]]:
    """The verifier's request: the rubric, then each item with its cited entries
    (:func:`verifier_item_json`), the open obligations and the timeline (entries without
    text). Every text filtered."""
    facts = state.get("facts", {})
    rendered = [verifier_item_json(item, index, facts) for item in items]
    obligations = [
        {"id": f["id"], "text": _clip(private(f["text"]), 300)}
        for f in facts.values()
        if f.get("category") == "open_obligation" and f.get("lifecycle") == "active"
    ][:100]
    payload = {
        "revision": ctx.revision,
        "items": rendered,
        "open_obligations": obligations,
        "timeline": [entry_json(e, 0) for e in index.entries],
    }
    return [
        {"role": "system", "content": prompt.text},
        {
            "role": "user",
            "content": "Judge every item. Answer with JSON only.\n"
            + json.dumps(payload, ensure_ascii=False),
        },
    ]


def quote_check(verdict_seq: int | None, quote: str, shown: dict[int, str]) -> str:
    """Why a verdict's ``seq``/``quote`` do not hold (``""`` when they do).

    Args:
        verdict_seq: the seq the verdict names (``None``: none named).
        quote: the words it quotes.
        shown: seq -> the text of each entry cited for the item, exactly as shown.

    Returns:
        ``""``, or a reason: no seq, a seq not cited for the item, no quote, or a quote not
        found in that entry's text (whitespace runs compared as one space).
    """
    if verdict_seq is None:
        return "it names no seq"
    if verdict_seq not in shown:
        return f"seq {verdict_seq} is not one of the item's cited entries"
    words = " ".join(quote.split())
    if len(words) < 3:
        return "it quotes nothing"
    if words not in " ".join(shown[verdict_seq].split()):
        return f"its quote does not occur in seq {verdict_seq}: {words[:80]!r}"
    return ""
