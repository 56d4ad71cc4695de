"""The bounded analyst: claims with exact quotes from hash-verified reads (docs/design.md 7). Pure.

The analyst plans a few lexical queries (:func:`recovery_app.query_plan.plan_queries`), the
service searches and reads what they find, and :func:`analyse` turns the hash-verified reads
into claims, each marked

* ``current``: the latest tool evidence on the matter at the snapshot's revision (current
  *at that revision*, never "the state of the world");
* ``historical``: tool evidence that a later matching tool result followed;
* ``reported``: something a participant said (a message), at any confidence it claims;
* ``unresolved``: a tool call with no verified result in the snapshot.

Every claim cites exact quotes from hash-verified byte ranges, checked by
:func:`recovery_app.citations.check_claims` (the citation's shape and each check are
described there).

A model-backed analyst (:class:`ModelAnalyst`) proposes claims the same way when a model is
configured; its claims pass the same checks, so a quote a model invented is rejected.
Exact quotes with valid hashes do not prove that a claim follows from them (seed 000, "What
each check is worth"); recovered facts entering the ledger still go through its verifier.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from journal_app.privacy import filter_text
from recovery_app.citations import STATUSES, ReadView, citation, string_leaves
from recovery_app.lexical import Query, QueryInvalid, first_match, parse_query

#: the most characters of one quote :func:`quote_for` takes
QUOTE_CHARS = 240
INSTRUCTIONS = (
    "You answer a question about an agent's own past from raw journal entries only. "
    "Compacted context (summaries, checkpoints, ledger notes) can be stale, wrong or "
    "truncated: never cite it and never treat its repetition as confirmation. Make claims "
    "only from the entries given, each with exact quotes copied character for character from "
    "one entry. Mark each claim 'current' (latest tool evidence at this journal revision, "
    "not the state of the world), 'historical' (later evidence followed), 'reported' "
    "(someone said it; saying is not doing) or 'unresolved' (no evidence settles it). "
    "A tool that ran is not proof that its wider goal succeeded."
)


def quote_for(read: ReadView, query: Query | None) -> str:
    """An exact quote from ``read`` around ``query``'s first match (or its first line).

    The quote is one line of one string value of the content, at most :data:`QUOTE_CHARS`
    characters, clear of anything the read filter removes. ``""`` when no such quote exists.
    """
    if read.kind == "reasoning" or read.derived:
        return ""
    for leaf in string_leaves(read):
        span = first_match(query, leaf) if query is not None else None
        if span is None and query is not None:
            continue
        if span is None:
            span = (len(leaf) - len(leaf.lstrip()), len(leaf) - len(leaf.lstrip()))
        removed = filter_text(leaf).spans
        lo = leaf.rfind("\n", 0, span[0]) + 1
        hi = leaf.find("\n", span[1])
        hi = len(leaf) if hi < 0 else hi
        for a, b in removed:
            if b <= span[0]:
                lo = max(lo, b)
            elif a >= span[1]:
                hi = min(hi, a)
            else:
                lo = hi = -1
                break
        if lo < 0:
            continue
        if hi - lo > QUOTE_CHARS:
            lo = max(lo, span[0] - QUOTE_CHARS // 3)
            hi = min(hi, lo + QUOTE_CHARS)
        quote = leaf[lo:hi].strip()
        if quote:
            return quote
    return ""


def analyse(queries: Sequence[str], reads: Sequence[ReadView]) -> list[dict[str, Any]]:
    """Deterministic lexical claims from verified reads (no model).

    One claim per event: a tool call with its result (quotes from both), a lone tool result,
    or a message. Status: ``reported`` for messages; for tool evidence ``current`` when its
    result is the latest verified tool result matching any of the same queries,
    ``historical`` when a later one exists, ``unresolved`` for a call without a verified
    result. Claims are ordered by seq.

    Args:
        queries: the normalised queries that were searched.
        reads: verified reads (unverified ones are ignored); ``matched`` lists the queries
            that found each.
    """
    ok = [r for r in reads if r.verified and not r.derived and r.kind != "reasoning"]
    by_call: dict[str, ReadView] = {r.tool_call_id: r for r in ok if r.kind == "tool_result"}
    parsed = {}
    for q in queries:
        try:
            parsed[q] = parse_query(q)
        except QueryInvalid:
            continue
    latest: dict[str, int] = {}
    for r in ok:
        if r.kind == "tool_result":
            for q in r.matched or []:
                latest[q] = max(latest.get(q, 0), r.seq)
    claims: list[dict[str, Any]] = []
    used: set[str] = set()
    for r in sorted(ok, key=lambda r: r.seq):
        if r.entry_hash in used:
            continue
        query = next((parsed[q] for q in r.matched if q in parsed), None)
        if (
            r.kind == "tool_result"
            and r.tool_call_id
            and any(c.kind == "tool_call" and c.tool_call_id == r.tool_call_id for c in ok)
        ):
            continue  # claimed with its call
        quote = quote_for(r, query)
        cite = citation(r, quote) if quote else None
        if cite is None:
            continue
        used.add(r.entry_hash)
        if r.kind == "message":
            claims.append(_claim(f"{r.role} said: {quote}", "reported", [cite], r, query))
            continue
        if r.kind == "tool_call":
            result = by_call.get(r.tool_call_id)
            if result is None:
                text = (
                    f"`{r.tool_name}` was called with: {quote}; no verified result in the snapshot"
                )
                claims.append(_claim(text, "unresolved", [cite], r, query))
                continue
            cites = [cite]
            rq = quote_for(result, query) or quote_for(result, None)
            rc = citation(result, rq) if rq else None
            if rc is not None:
                cites.append(rc)
                used.add(result.entry_hash)
            outcome = "failed" if result.is_error else "completed"
            text = f"`{r.tool_name}` was called with: {quote}; it {outcome} (seq {result.seq})"
            claims.append(_claim(text, _status(result, latest), cites, result, query))
            continue
        what = "failed" if r.is_error else "returned"
        text = f"`{r.tool_name or 'tool'}` {what}: {quote}"
        claims.append(_claim(text, _status(r, latest), [cite], r, query))
    return claims


def _status(result: ReadView, latest: dict[str, int]) -> str:
    later = [latest[q] for q in result.matched if q in latest and latest[q] > result.seq]
    return "historical" if later else "current"


def _claim(
    text: str, status: str, cites: list[dict[str, Any]], r: ReadView, query: Query | None
) -> dict[str, Any]:
    return {
        "claim": text,
        "status": status,
        "citations": cites,
        "query": query.text if query else "",
        "kind": r.kind,
        "is_error": r.is_error,
    }


class AnalystModel(Protocol):
    """A model that proposes claims. ``requests`` counts the calls made (for receipts)."""

    id: str
    requests: int

    def propose(self, question: str, reads: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Claims ``[{"claim", "status", "citations": [{"entry", "quote"}]}]`` from ``reads``."""
        ...


def model_reads(reads: Sequence[ReadView]) -> list[dict[str, Any]]:
    """What a model is shown of the verified reads: filtered text only, with seq and hash."""
    out = []
    for r in reads:
        if not r.verified or r.derived:
            continue
        text = "\n".join(string_leaves(r))
        out.append(
            {
                "entry": r.entry_hash,
                "seq": r.seq,
                "kind": r.kind,
                "role": r.role,
                "tool": r.tool_name,
                "is_error": r.is_error,
                "text": filter_text(text, kind=r.kind).text,
            }
        )
    return out


CLAIMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "claims": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "claim": {"type": "string"},
                    "status": {"type": "string", "enum": list(STATUSES)},
                    "citations": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "entry": {"type": "string"},
                                "quote": {"type": "string"},
                            },
                            "required": ["entry", "quote"],
                        },
                    },
                },
                "required": ["claim", "status", "citations"],
            },
        }
    },
    "required": ["claims"],
}


class ModelAnalyst:
    """Claims from a chat model through the project's model client (structured JSON output).

    ``client`` is a :class:`ledger_app.model_client.ModelClient` (anything with its
    ``complete(role=, messages=, schema_name=, schema=, timeout_s=)`` returning an object
    with ``.text`` and ``.record``). Only used when a model is configured; the offline
    default is :func:`analyse`. ``bounded``: :meth:`propose` takes the time left of the
    recovery budget (``timeout_s``); ``calls`` holds every call's record (its usage goes
    into the receipt and the fold's usage); ``errors`` why a call gave nothing.
    """

    bounded = True

    def __init__(self, client: Any, model: str = "") -> None:
        self.client = client
        self.id = f"model:{model}" if model else "model"
        self.requests = 0
        self.calls: list[Any] = []
        self.errors: list[str] = []

    def propose(
        self,
        question: str,
        reads: Sequence[dict[str, Any]],
        *,
        timeout_s: float | None = None,
    ) -> list[dict[str, Any]]:
        """One model call within ``timeout_s`` seconds (the recovery budget's remainder);
        returns its ``claims`` (``[]`` when the reply is not that JSON, or the call failed:
        the reason is in :attr:`errors`; a model that cannot answer in time never holds up
        the fold)."""
        from ledger_app.model_client import ModelError

        self.requests += 1
        payload = {"question": question, "entries": list(reads)}
        try:
            completion = self.client.complete(
                role="analyst",
                messages=[
                    {"role": "system", "content": INSTRUCTIONS},
                    {"role": "user", "content": json.dumps(payload, ensure_ascii=False)},
                ],
                schema_name="recovery_claims",
                schema=CLAIMS_SCHEMA,
                timeout_s=timeout_s,
            )
        except ModelError as exc:
            record = getattr(exc, "record", None)
            if record is not None:
                self.calls.append(record)
            self.errors.append(str(exc)[:300])
            return []
        record = getattr(completion, "record", None)
        if record is not None:
            self.calls.append(record)
        try:
            data = json.loads(getattr(completion, "text", "") or "{}")
        except ValueError:
            return []
        claims = data.get("claims") if isinstance(data, dict) else None
        return [c for c in claims if isinstance(c, dict)] if isinstance(claims, list) else []

    def usage(self) -> dict[str, Any]:
        """Totals over :attr:`calls`: calls, input/output tokens, seconds."""
        return {
            "calls": len(self.calls),
            "input_tokens": sum(int(getattr(c, "input_tokens", 0)) for c in self.calls),
            "output_tokens": sum(int(getattr(c, "output_tokens", 0)) for c in self.calls),
            "total_s": round(sum(float(getattr(c, "total_s", 0.0)) for c in self.calls), 3),
        }
