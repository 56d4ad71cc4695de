"""One entry's page: fields, hashes, body, chunks, and what a support link cites.

The page itself is the audit app's (:func:`audit_app.views.entry_detail`), which adds the
comments it owns; this module builds everything else (:func:`entry_context`). Text, body,
chunks and metadata are shown filtered by :mod:`journal_app.privacy`; the hash badge calls
:func:`journal_app.services.entry_check` at render time, so "hash verified" always means
"recomputed for this response".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import rfc8785
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone

from journal_app import privacy, selectors
from journal_app.content import without_terminal_escapes
from journal_app.hashing import display
from journal_app.models import Entry
from journal_app.services import entry_check
from journal_app.views.query_params import parse_int, parse_range
from journal_app.views.scope_urls import timeline_url
from journal_app.views.timeline_page import ENTRIES_PER_PAGE


@dataclass
class ChunkView:
    """One chunk row and its slice of the body (decoded on its own: cuts are at UTF-8 starts)."""

    position: int
    offset: int
    length: int
    hash: str
    text: str
    highlighted: bool


def _split_quote(text: str, quote: str) -> tuple[str, str, str] | None:
    at = text.find(quote) if quote else -1
    if at < 0:
        return None
    return text[:at], text[at : at + len(quote)], text[at + len(quote) :]


def cited_chunks(request: HttpRequest) -> set[int]:
    """The chunk positions a support link cites: ``?chunk=N`` and/or ``?chunks=A-B`` (a range)
    or ``?chunks=A,B,C``."""
    out: set[int] = set()
    one = parse_int(request.GET.get("chunk"))
    if one is not None:
        out.add(one)
    raw = request.GET.get("chunks", "")
    for part in raw.split(","):
        r = parse_range(part)
        if r is not None and r[1] - r[0] < 10_000:
            out.update(range(r[0], r[1] + 1))
    return out


def _body_spans(entry: Entry) -> list[tuple[int, int, str]]:
    """``(start, end, label)`` character spans of ``entry.body`` shown as marks: what
    :func:`journal_app.privacy.findings` finds in the canonical JSON, plus the JSON strings of
    typed reasoning blocks (``thinking``...); a reasoning entry, or a reasoning block that
    cannot be located in the body, hides the whole body."""
    body = entry.body
    whole = [(0, len(body), "reasoning")]
    if entry.kind == "reasoning":
        return whole
    spans = [
        (a, b, "reasoning" if cat == "reasoning" else f"secret: {k}")
        for a, b, k, cat in privacy.findings(body)
    ]
    for value in _reasoning_values(entry.content):
        encoded = json.dumps(value, ensure_ascii=False)
        at = body.find(encoded)
        if at < 0:
            return whole
        while at >= 0:
            spans.append((at + 1, at + len(encoded) - 1, "reasoning"))
            at = body.find(encoded, at + len(encoded))
    spans.sort(key=lambda x: (x[0], -x[1]))
    merged: list[tuple[int, int, str]] = []
    for a, b, label in spans:
        if merged and a < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]), merged[-1][2])
        else:
            merged.append((a, b, label))
    return merged


def _mark(label: str) -> str:
    if label == "reasoning":
        return privacy.REASONING_MARK
    return privacy.SECRET_MARK.format(kind=label.removeprefix("secret: "))


def _reasoning_values(value: Any) -> list[str]:
    """Strings of typed reasoning blocks and reasoning fields anywhere in ``value``."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            is_block = item.get("type") in privacy.REASONING_KINDS
            for k, v in item.items():
                if isinstance(v, str) and v and (is_block and k != "type"):
                    out.append(v)
                elif isinstance(v, str) and v and k in privacy.REASONING_FIELDS:
                    out.append(v)
                else:
                    stack.append(v)
        elif isinstance(item, list):
            stack.extend(item)
    return out


def _masked(text: str, start: int, spans: list[tuple[int, int, str]]) -> str:
    """``text`` (the body from character ``start``) with each labelled span replaced by its mark,
    written where the span starts; a span's continuation in a later slice is left out."""
    end = start + len(text)
    out: list[str] = []
    pos = start
    for a, b, label in spans:
        if b <= pos or a >= end:
            continue
        out.append(text[pos - start : max(a, pos) - start])
        if a >= start:
            out.append(_mark(label))
        pos = min(b, end)
    out.append(text[pos - start :])
    return "".join(out)


def entry_context(request: HttpRequest, entry: Entry) -> dict[str, Any]:
    """Everything the entry page shows but its comments (the audit app's: the page,
    :func:`audit_app.views.entry_detail`, and the comment view's re-render add them).

    Text, body, chunks and metadata are shown filtered by :mod:`journal_app.privacy` (secrets
    and hidden reasoning replaced by marks; ``filter_labels`` say why); the hash badge is over
    the stored bytes. Tenant admins have a link to the unfiltered bytes (an audited read).
    """
    problems = entry_check(entry, chain=True)
    raw = entry.body.encode("utf-8", errors="surrogatepass")
    shown = privacy.filter_entry(
        kind=entry.kind, content=entry.content, text=entry.text, metadata=entry.meta_dict
    )
    spans = _body_spans(entry)
    chunk_no = parse_int(request.GET.get("chunk"))
    wanted_chunks = cited_chunks(request)
    byte_range = parse_range(request.GET.get("bytes"))
    if byte_range is not None:  # "A-B" is end-exclusive, as support ranges are; "A" one byte
        byte_range = (byte_range[0], max(byte_range[1], byte_range[0] + 1))
    chunks = []
    char_at = 0
    for c in entry.chunks.order_by("position"):
        piece = raw[c.offset : c.offset + c.length].decode("utf-8", errors="replace")
        in_bytes = (
            byte_range is not None
            and c.offset < byte_range[1]
            and byte_range[0] < (c.offset + c.length)
        )
        chunks.append(
            ChunkView(
                position=c.position,
                offset=c.offset,
                length=c.length,
                hash=c.hash,
                text=_masked(piece, char_at, spans) if spans else piece,
                highlighted=c.position in wanted_chunks or in_bytes,
            )
        )
        char_at += len(piece)
    labels = list(shown.labels)
    labels += [x for x in dict.fromkeys(label for _, _, label in spans) if x not in labels]
    body_shown = _masked(entry.body, 0, spans) if spans else entry.body
    quote = request.GET.get("quote", "")
    text = without_terminal_escapes(shown.text)  # a test runner's colours: display only
    quote_in_text = _split_quote(text, quote)
    quote_in_body = None if quote_in_text else _split_quote(body_shown, quote)
    if quote and not quote_in_text and not quote_in_body:
        # a quote is text inside one JSON string of the body (a support item's ``quote``):
        # in the stored bytes its quotes, tabs and backslashes are escaped
        quote_in_body = _split_quote(body_shown, rfc8785.dumps(quote).decode("utf-8")[1:-1])
    # an exact byte range of the body ([start, end), the support item's ``range``), shown
    # exactly when nothing is masked
    bytes_in_body = None
    if byte_range is not None and not spans and not quote_in_body and byte_range[0] < len(raw):
        start, end = byte_range[0], min(byte_range[1], len(raw))
        bytes_in_body = (
            raw[:start].decode("utf-8", errors="replace"),
            raw[start:end].decode("utf-8", errors="replace"),
            raw[end:].decode("utf-8", errors="replace"),
        )
    finer = bool(wanted_chunks or byte_range or quote)
    cited_whole = request.GET.get("cited") == "entry" and not finer
    previous_hash, next_hash = selectors.neighbour_hashes(entry)
    journal = entry.journal
    return {
        "entry": entry,
        "journal": journal,
        "session": journal.session,
        "tenant": journal.session.tenant,
        "timeline_url": timeline_url(journal)
        + f"?page={(entry.seq - 1) // ENTRIES_PER_PAGE + 1}#seq-{entry.seq}",
        "problems": problems,
        "verified": not problems,
        "checked_at": timezone.now(),
        "text": text,
        "filtered": bool(labels),
        "filter_labels": labels,
        "metadata": json.dumps(shown.metadata, indent=2, ensure_ascii=False, sort_keys=True),
        "chunks": chunks,
        "chunk_no": chunk_no,
        "cited_chunks": sorted(wanted_chunks),
        "chunk_missing": bool(wanted_chunks) and not any(c.highlighted for c in chunks),
        "byte_range": byte_range,
        "bytes_in_body": bytes_in_body,
        "cited_whole": cited_whole,
        "full_url": reverse("journal:entry", args=[display(entry.entry_hash)])
        + (("?" + request.GET.urlencode()) if request.GET else ""),
        "quote": quote,
        "quote_in_text": quote_in_text,
        "quote_in_body": quote_in_body,
        "previous_hash": display(previous_hash) if previous_hash else None,
        # the call of a result, the results of a call: a failed result links to its command
        "paired": [
            {"seq": seq, "hash": display(h), "kind": kind}
            for seq, h, kind in selectors.paired_entries(entry)
        ],
        "exit_code": entry.content.get("exit_code") if entry.kind == "tool_result" else None,
        "next_hash": display(next_hash) if next_hash else None,
        "comment_url": reverse("journal:entry_comment", args=[display(entry.entry_hash)]),
        "permalink": request.build_absolute_uri(
            reverse("journal:entry", args=[display(entry.entry_hash)])
        )
        + (("?" + request.GET.urlencode()) if request.GET else ""),
    }
