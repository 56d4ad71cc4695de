"""What the writer and the verifier models must answer, as pydantic models (docs/design.md 5.3). Pure.

The JSON schemas sent as structured output are generated from these classes
(:func:`writer_schema`, :func:`verifier_schema`), so the schema and the validation can never
disagree. :func:`parse_reply` is the validation fallback for servers without a JSON-schema
mode: whatever came back (JSON mode, or text around a JSON object) is parsed and validated
here, and anything that does not validate is a **rejection** with the reason, never a crash.

Writer items cite journal entries by ``seq`` (numbers are what models copy reliably); the
fold code maps them to entry hashes and refuses any that is not a raw entry of the scope at
or before the fold's revision. A writer never writes a P0 fact: pins are code's.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

WRITER_CATEGORIES = (
    "objective",
    "constraint",
    "decision",
    "verified_state",
    "open_obligation",
    "blocker",
    "history",
)

Category = Literal[
    "objective",
    "constraint",
    "decision",
    "verified_state",
    "open_obligation",
    "blocker",
    "history",
]
Key = Field(
    min_length=1,
    max_length=40,
    pattern=r"^[A-Za-z0-9_.:-]+$",
    description="your own short id for this item, unique in this answer (e.g. f1)",
)


class ProposedFact(BaseModel):
    """One atomic fact the writer proposes (``add``, or ``supersede`` of an active fact)."""

    model_config = ConfigDict(extra="ignore")

    key: str = Key
    supersedes: str | None = Field(
        default=None, description="id of an active, non-P0 ledger fact this fact replaces"
    )
    category: Category
    priority: Literal["P1", "P2", "P3"] = Field(
        description="P1 active work state, P2 useful context, P3 recoverable history"
    )
    confidence: Literal["verified", "reported", "inferred", "uncertain"] = Field(
        description="verified only when a cited tool result demonstrates the claim"
    )
    text: str = Field(min_length=1, max_length=2000, description="the claim, one atomic fact")
    support: list[int] = Field(
        min_length=1, max_length=12, description="seq numbers of the entries that show it"
    )
    consequential: bool = Field(
        default=False,
        description="true when the fact records an action that changed something outside "
        "the conversation (migration, deploy, delete, file or database write, payment, "
        "order, commit, push) or its outcome; such a fact is P1 until superseded",
    )
    decision_text: str | None = Field(
        default=None,
        max_length=2000,
        description="for a decision: exactly what was accepted, copied character for "
        "character from a cited entry (the proposal, the chosen option, or the restated "
        "text the user confirmed); the user's own words when no proposal came before",
    )


class ProposedEnd(BaseModel):
    """Ending an active fact: ``close``, ``cancel``, or ``retire``.

    ``close`` ends an open obligation, a **request** pin (every part of the request carried
    out: cite the results for each part), or a ``decision`` (an approval consumed: cite the
    approved action's successful result); never a governing pin. A close is recorded at the
    seq of its last evidence (docs/design.md 5.5)."""

    model_config = ConfigDict(extra="ignore")

    key: str = Key
    op: Literal["close", "cancel", "retire"]
    fact_id: str = Field(
        min_length=1,
        max_length=100,
        description="id of the ledger fact: an open obligation, a request pin (pin_kind "
        "request) or a decision to close; any non-P0 fact to retire",
    )
    evidence: list[int] = Field(
        min_length=1, max_length=12, description="seq numbers of the entries that show it"
    )
    reason: str = Field(default="", max_length=1000)


class WriterProposal(BaseModel):
    """The writer's whole answer for one fold (or its one repair)."""

    model_config = ConfigDict(extra="ignore")

    facts: list[ProposedFact] = Field(default_factory=list, max_length=200)
    ends: list[ProposedEnd] = Field(default_factory=list, max_length=200)

    @model_validator(mode="before")
    @classmethod
    def _names_facts_or_ends(cls, data: Any) -> Any:
        """An object with other keys and neither ``facts`` nor ``ends`` is an answer in
        another shape (a small model's ``{"delta": [...]}``), not an empty proposal: it is
        rejected naming the keys, so it gets the repair and then the labelled fallback.
        ``{}`` and other extra keys beside ``facts``/``ends`` are still accepted."""
        if isinstance(data, dict) and data and not {"facts", "ends"} & data.keys():
            unknown = ", ".join(sorted(str(k) for k in data)[:5])
            raise ValueError(f"no facts or ends in the answer, only unknown field(s): {unknown}")
        return data


class ItemVerdict(BaseModel):
    """The verifier's two verdicts on one proposed item, each with its reason, and the
    ``seq`` and ``quote`` they rest on (a verdict without them counts as none: the model
    writer checks the quote against the entry's text as shown)."""

    model_config = ConfigDict(extra="ignore")

    key: str = Field(min_length=1, max_length=40)
    seq: int | None = Field(
        default=None, description="seq of the cited entry this verdict rests on"
    )
    quote: str = Field(
        default="",
        max_length=500,
        description="words copied exactly from that entry's text as shown",
    )
    entailment: Literal["entailed", "not_entailed"] = Field(
        description="does the cited evidence itself demonstrate the claim"
    )
    entailment_reason: str = Field(min_length=1, max_length=1000)
    temporal: Literal["valid", "invalid"] = Field(
        description="is the item's effect over time valid (closes nothing still open, ...)"
    )
    temporal_reason: str = Field(min_length=1, max_length=1000)

    @property
    def accepted(self) -> bool:
        return self.entailment == "entailed" and self.temporal == "valid"


class VerifierReport(BaseModel):
    """The verifier's whole answer: one :class:`ItemVerdict` per proposed item."""

    model_config = ConfigDict(extra="ignore")

    verdicts: list[ItemVerdict] = Field(default_factory=list, max_length=400)


def writer_schema() -> dict[str, Any]:
    """JSON schema of :class:`WriterProposal` (structured output of the writer)."""
    return WriterProposal.model_json_schema()


def verifier_schema() -> dict[str, Any]:
    """JSON schema of :class:`VerifierReport` (structured output of the verifier)."""
    return VerifierReport.model_json_schema()


M = TypeVar("M", bound=BaseModel)
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)


def parse_reply(text: str, model: type[M]) -> tuple[M | None, str]:
    """Parse and validate a model's reply.

    Accepts plain JSON, JSON in a Markdown code fence, or the outermost ``{...}`` of a
    reply with prose around it (JSON mode on small local models).

    Returns:
        ``(instance, "")`` or ``(None, reason)``, the reason naming the field at fault, e.g.
        ``"facts.0.support: List should have at least 1 item"`` or ``"not JSON: ..."``.
    """
    if not text or not text.strip():
        return None, "empty reply (no content)"
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        start, end = body.find("{"), body.rfind("}")
        try:
            if start < 0 or end <= start:
                raise ValueError
            data = json.loads(body[start : end + 1])
        except ValueError:
            return None, f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    if not isinstance(data, dict):
        return None, f"expected a JSON object, got {type(data).__name__}"
    try:
        return model.model_validate(data), ""
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        return None, f"{where}: {first['msg']}{more}"


def duplicate_keys(proposal: WriterProposal) -> list[str]:
    """Keys used by more than one item of ``proposal`` (each such item is rejected)."""
    seen: dict[str, int] = {}
    items: list[ProposedFact | ProposedEnd] = [*proposal.facts, *proposal.ends]
    for item in items:
        seen[item.key] = seen.get(item.key, 0) + 1
    return sorted(k for k, n in seen.items() if n > 1)
