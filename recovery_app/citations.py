"""Claims' citations: exact quotes at byte ranges of hash-verified reads, and their checks. Pure.

A citation is ``{"entry": hex, "seq", "range": [start, end], "chunks": [positions],
"quote"}``: ``range`` is a byte range of the entry's canonical body, and
:func:`check_citation` checks the quote occurs there byte for byte (in its JSON string form,
which is how the body stores it), that the entry was read and verified in this snapshot,
that it is raw (a summary or compaction marker cited as if it were the original is
rejected), that ``chunks`` are the chunks covering the range, and that the quote holds
nothing the read filter removes (secrets, reasoning). :func:`check_claims` applies it to
every citation of every claim, whoever wrote the claims (:mod:`recovery_app.analyst`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import rfc8785

from journal_app.privacy import filter_text

#: a claim's status (:mod:`recovery_app.analyst` says what each means)
STATUSES = ("current", "historical", "reported", "unresolved")


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


def string_leaves(read: ReadView) -> list[str]:
    """The string values of ``read``'s content a quote may come from: a call's argument
    values and its tool name, a result's output, a message's text, any other entry's string
    leaves (in key order)."""
    c = read.content
    if read.kind == "tool_call":
        return list(_leaves(c.get("arguments"))) + [str(c.get("name", ""))]
    if read.kind == "tool_result":
        return [str(c.get("output", ""))]
    if read.kind == "message":
        return [str(c.get("text", ""))]
    return list(_leaves(c))


def shown_text(read: ReadView) -> str:
    """Exactly the text a model is shown of ``read`` (:func:`model_reads`): its string
    leaves joined with newlines, filtered."""
    return filter_text("\n".join(string_leaves(read)), kind=read.kind).text


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
