"""The bounded analyst: lexical plans, claims with exact quotes, citation checks (DESIGN.md 7). Pure.

The analyst plans a few lexical queries (:func:`plan_queries`), the service searches and
reads what they find, and :func:`analyse` turns the hash-verified reads into claims, each
marked

* ``current``: the latest tool evidence on the matter at the snapshot's revision (current
  *at that revision*, never "the state of the world");
* ``historical``: tool evidence that a later matching tool result followed;
* ``reported``: something a participant said (a message), at any confidence it claims;
* ``unresolved``: a tool call with no verified result in the snapshot.

Every claim cites exact quotes from hash-verified byte ranges. A citation is
``{"entry": hex, "seq", "range": [start, end], "chunks": [positions], "quote"}``: ``range``
is a byte range of the entry's canonical body, and :func:`check_citation` checks the quote
occurs there byte for byte (in its JSON string form, which is how the body stores it), that
the entry was read and verified in this snapshot, that it is raw (a summary or compaction
marker cited as if it were the original is rejected), that ``chunks`` are the chunks covering
the range, and that the quote holds nothing the read filter removes (secrets, reasoning).

A model-backed analyst (:class:`ModelAnalyst`) proposes claims the same way when a model is
configured; its claims pass the same checks, so a quote a model invented is rejected.
Exact quotes with valid hashes do not prove that a claim follows from them (seed 000, "What
each check is worth"); recovered facts entering the ledger still go through its verifier.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import rfc8785

from journal_app.privacy import filter_text
from recovery_app.lexical import Query, QueryInvalid, first_match, parse_query, tokenize
from recovery_app.triggers import find_identifiers

STATUSES = ("current", "historical", "reported", "unresolved")
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

_STOP = {
    "the",
    "and",
    "for",
    "that",
    "this",
    "with",
    "was",
    "were",
    "have",
    "has",
    "been",
    "may",
    "might",
    "could",
    "should",
    "would",
    "not",
    "but",
    "are",
    "you",
    "your",
    "our",
    "its",
    "from",
    "into",
    "then",
    "than",
    "there",
    "here",
    "what",
    "which",
    "when",
    "where",
    "who",
    "how",
    "why",
    "all",
    "any",
    "can",
    "did",
    "does",
    "done",
    "just",
    "also",
    "about",
    "again",
    "earlier",
    "result",
    "wrong",
    "actually",
    "please",
    "check",
    "sure",
    "think",
    "maybe",
    "last",
    "time",
    "same",
    "method",
    "use",
    "used",
    "one",
    "two",
    "now",
    "some",
    "let",
}


def plan_queries(
    question: str, terms: Sequence[str] = (), suggestions: Sequence[str] = ()
) -> list[list[str]]:
    """Lexical queries by round: most specific first, broader in later rounds.

    Args:
        question: the text that prompted recovery (trigger messages, or the agent's question).
        terms: identifiers from the trigger scan, most specific first.
        suggestions: words from the ledger's own notes that share a token with the question
            (they suggest search terms; they are never evidence).

    Returns:
        Up to three rounds of normalised query strings (see :func:`recovery_app.lexical.parse_query`):
        round 1 the identifiers; round 2 the question's distinctive words (two per query)
        and the suggestions; round 3 single distinctive tokens of the identifiers.
    """
    rounds: list[list[str]] = []
    seen: set[str] = set()

    def add(round_: list[str], raw: str) -> None:
        try:
            text = parse_query(raw).text
        except QueryInvalid:
            return
        if text not in seen:
            seen.add(text)
            round_.append(text)

    first: list[str] = []
    for t in terms:
        add(first, t)
    words = _distinctive(question)
    if not terms and words:
        add(first, " ".join(words[:3]))
    rounds.append(first)
    second: list[str] = []
    for i in range(0, min(len(words), 4), 2):
        add(second, " ".join(words[i : i + 2]))
    for s in suggestions:
        add(second, s)
    rounds.append(second)
    third: list[str] = []
    for t in terms:
        toks = sorted(tokenize(t), key=lambda x: (-any(c.isdigit() for c in x), -len(x)))
        if toks:
            add(third, toks[0])
    rounds.append(third)
    return [r for r in rounds if r]


def _distinctive(text: str) -> list[str]:
    """Words of ``text`` worth searching: not stop words, at least 4 characters, longest first."""
    seen: list[str] = []
    for tok in tokenize(text):
        if len(tok) >= 4 and tok not in _STOP and tok not in seen:
            seen.append(tok)
    return sorted(seen, key=lambda w: (-any(c.isdigit() for c in w), -len(w)))


def suggest_terms(question: str, notes: Iterable[str], limit: int = 2) -> list[str]:
    """Identifiers from ledger notes that share a distinctive word with the question.

    The ledger's own notes may suggest where to look; they are never evidence (DESIGN.md 7).
    """
    wanted = set(_distinctive(question))
    out: list[str] = []
    for note in notes:
        if not wanted & set(tokenize(note)):
            continue
        for _, value in find_identifiers(note):
            value = value.removeprefix("sha256:")
            if value not in out:
                out.append(value)
            if len(out) >= limit:
                return out
    return out


@dataclass
class ReadView:
    """A re-read entry as the analyst sees it. ``verified`` and ``reason`` come from the read check."""

    seq: int
    entry_hash: str
    kind: str
    role: str
    content: dict[str, Any]
    body: str
    chunks: Sequence[tuple[int, int, int]] = ()  # (position, offset, length)
    tool_call_id: str = ""
    tool_name: str = ""
    is_error: bool = False
    derived: bool = False
    verified: bool = True
    reason: str = ""
    matched: list[str] = field(default_factory=list)  # queries that found it


def json_fragment(quote: str) -> bytes:
    """The bytes a quote occupies inside a canonical JSON string (RFC 8785 escaping)."""
    return rfc8785.dumps(quote)[1:-1]


def locate_quote(body: str, quote: str) -> tuple[int, int] | None:
    """Byte range ``(start, end)`` of the first occurrence of ``quote`` in the canonical ``body``."""
    raw = body.encode("utf-8", errors="surrogatepass")
    frag = json_fragment(quote)
    if not frag:
        return None
    i = raw.find(frag)
    return None if i < 0 else (i, i + len(frag))


def covering_chunks(chunks: Sequence[tuple[int, int, int]], start: int, end: int) -> list[int]:
    """Positions of the chunks that hold any byte of ``[start, end)``."""
    return [p for p, off, ln in chunks if off < end and off + ln > start]


def citation(read: ReadView, quote: str) -> dict[str, Any] | None:
    """A citation of ``quote`` in ``read``, or ``None`` when the quote is not in its body."""
    span = locate_quote(read.body, quote)
    if span is None:
        return None
    return {
        "entry": read.entry_hash,
        "seq": read.seq,
        "range": [span[0], span[1]],
        "chunks": covering_chunks(read.chunks, *span),
        "quote": quote,
    }


def check_citation(c: dict[str, Any], reads: dict[str, ReadView]) -> str:
    """Why citation ``c`` is refused, or ``""`` when it holds (see the module docstring)."""
    entry = str(c.get("entry", "")).removeprefix("sha256:")
    read = reads.get(entry)
    quote = c.get("quote")
    if read is None:
        return f"sha256:{entry} was not read and verified in this snapshot"
    if read.derived:
        return (
            f"sha256:{entry} is a summary or compaction marker (derived): citing it as if it "
            "were the original is rejected"
        )
    if not read.verified:
        return f"sha256:{entry} failed verification: {read.reason}"
    if not isinstance(quote, str) or not quote:
        return "a citation needs a non-empty exact quote"
    rng = c.get("range")
    raw = read.body.encode("utf-8", errors="surrogatepass")
    if rng is None:
        if json_fragment(quote) not in raw:
            return f"the quote does not occur byte for byte in sha256:{entry}"
        return "a citation needs the byte range its quote is in"
    if (
        not isinstance(rng, list)
        or len(rng) != 2
        or not all(isinstance(x, int) for x in rng)
        or not 0 <= rng[0] < rng[1] <= len(raw)
    ):
        return f"range {rng!r} is not a byte range of the entry's body (0-{len(raw)})"
    if json_fragment(quote) not in raw[rng[0] : rng[1]]:
        return (
            f"the quote does not occur byte for byte in bytes {rng[0]}-{rng[1]} of sha256:{entry}"
        )
    if sorted(c.get("chunks") or []) != covering_chunks(read.chunks, rng[0], rng[1]):
        return f"chunks {c.get('chunks')!r} are not the chunks covering bytes {rng[0]}-{rng[1]}"
    if filter_text(quote, kind=read.kind).filtered:
        return "the quote holds text the read filter removes (a secret or hidden reasoning)"
    return ""


def check_claims(
    claims: Sequence[dict[str, Any]], reads: dict[str, ReadView]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split ``claims`` into accepted and rejected (with ``reason``), checking every citation."""
    accepted, rejected = [], []
    for claim in claims:
        problem = ""
        if claim.get("status") not in STATUSES:
            problem = f"status {claim.get('status')!r} is not one of {', '.join(STATUSES)}"
        elif not isinstance(claim.get("claim"), str) or not claim["claim"]:
            problem = "a claim needs its text"
        elif not claim.get("citations"):
            problem = "a claim needs at least one citation with an exact quote"
        else:
            for c in claim["citations"]:
                problem = check_citation(c, reads)
                if problem:
                    break
        if problem:
            rejected.append({**claim, "reason": problem})
        else:
            accepted.append(claim)
    return accepted, rejected


def _leaves(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, dict):
        for k in sorted(value):
            yield from _leaves(value[k])


def _strings(read: ReadView) -> list[str]:
    c = read.content
    if read.kind == "tool_call":
        return list(_leaves(c.get("arguments"))) + [str(c.get("name", ""))]
    if read.kind == "tool_result":
        return [str(c.get("output", ""))]
    if read.kind == "message":
        return [str(c.get("text", ""))]
    return list(_leaves(c))


def quote_for(read: ReadView, query: Query | None) -> str:
    """An exact quote from ``read`` around ``query``'s first match (or its first line).

    The quote is one line of one string value of the content, at most :data:`QUOTE_CHARS`
    characters, clear of anything the read filter removes. ``""`` when no such quote exists.
    """
    if read.kind == "reasoning" or read.derived:
        return ""
    for leaf in _strings(read):
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
        text = "\n".join(_strings(r))
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


def shown_text(read: ReadView) -> str:
    """Exactly the text a model is shown of ``read`` (:func:`model_reads`): its string
    leaves joined with newlines, filtered."""
    return filter_text("\n".join(_strings(read)), kind=read.kind).text


def map_quote(read: ReadView, quote: str) -> list[dict[str, Any]] | None:
    """Citations of ``quote`` in ``read``'s bytes: one when it occurs in the body as it is;
    else, when it occurs in the text the model was shown (:func:`shown_text`), one per line
    of it (each line lies inside one string value, byte for byte in the body). ``None``
    when it is in neither (an invented quote, or one holding a filter mark)."""
    whole = citation(read, quote)
    if whole is not None:
        return [whole]
    if not quote or quote not in shown_text(read):
        return None
    parts = [line.strip() for line in quote.split("\n") if line.strip()]
    cites = [citation(read, part) for part in parts]
    if not parts or any(c is None for c in cites):
        return None
    return [c for c in cites if c is not None]


def complete_citations(
    claims: Sequence[dict[str, Any]], reads: dict[str, ReadView]
) -> list[dict[str, Any]]:
    """Fill ``range`` and ``chunks`` of model citations that give only entry and quote.

    A quote is checked against exactly the text the model was shown and mapped back to the
    entry's bytes (:func:`map_quote`: a quote spanning lines of two argument values becomes
    one citation per line). A quote found in neither keeps no range, so
    :func:`check_citation` rejects it.
    """
    out = []
    for claim in claims:
        cites: list[dict[str, Any]] = []
        for c in claim.get("citations") or []:
            if not isinstance(c, dict):
                continue
            entry = str(c.get("entry", "")).removeprefix("sha256:")
            c = {**c, "entry": entry}
            read = reads.get(entry)
            if read is not None and "range" not in c and isinstance(c.get("quote"), str):
                mapped = map_quote(read, c["quote"])
                if mapped is not None:
                    extra = {k: v for k, v in c.items() if k not in mapped[0] and k != "quote"}
                    cites.extend({**m, **extra} for m in mapped)
                    continue
            cites.append(c)
        out.append({**claim, "citations": cites})
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
