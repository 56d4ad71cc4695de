"""The frontend view: the user-safe history of a session (docs/design.md sections 6 and 9, seed 001).

Pure module: no Django, no database. Built from the journal's entries on its own, never from
the model view (seed 001: "Keep model context separate from frontend history"). Every text
it shows (message text, tool call arguments, tool results and their previews) goes through
:func:`journal_app.privacy.filter_text`, the same filter recovery reads, ``/validate`` and
export use, so its check (:func:`ledger_app.validation.validate_frontend`, built on
:func:`journal_app.privacy.findings`) gives the same verdict on the same text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from journal_app import privacy
from journal_app.artifacts import make_preview, media_type_of
from ledger_app.context.entry_text import args_text
from ledger_app.entry_view import EntryView
from ledger_app.fact_text import clip

#: Characters of a call's arguments shown.
ARGS_SHOWN = 2000
_ATTACHMENTS = ("image", "image_url", "document", "file")


class _Labels:
    """What one view filtered: items, labels with their counts, spans replaced."""

    def __init__(self) -> None:
        self.items = 0
        self.spans = 0
        self.labels: dict[str, int] = {}
        self.left_out: dict[str, int] = {}

    def mark(self, item: dict[str, Any], labels: Sequence[str], spans: int) -> None:
        """Mark ``item`` filtered with ``labels`` (nothing when there are none)."""
        if not labels:
            return
        item["filtered"] = True
        item["labels"] = list(labels)
        self.items += 1
        self.spans += spans
        for label in labels:
            self.labels[label] = self.labels.get(label, 0) + 1

    def leave_out(self, why: str) -> None:
        self.left_out[why] = self.left_out.get(why, 0) + 1

    def summary(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "labels": dict(sorted(self.labels.items())),
            "left_out": dict(sorted(self.left_out.items())),
        }


def _merge(*labels: Sequence[str]) -> list[str]:
    out: list[str] = []
    for group in labels:
        out += [x for x in group if x not in out]
    return out


Find = Callable[[str], list[tuple[int, int, str, str]]]


def _filter(text: str, find: Find, kind: str = "message") -> privacy.Filtered:
    """:func:`journal_app.privacy.filter_text` with the findings from ``find`` (a memo)."""
    if kind == "reasoning" or not text:
        return privacy.filter_text(text, kind=kind)
    return privacy.filter_text(text, kind=kind, found=find(text))


def _message_item(e: EntryView, marks: _Labels, find: Find) -> dict[str, Any] | None:
    f = _filter(e.text, find, e.kind)
    item: dict[str, Any] = {"seq": e.seq, "role": e.role, "kind": "message", "text": f.text}
    blocks = e.content.get("blocks")
    blocks = blocks if isinstance(blocks, list) else []
    images = [b for b in blocks if isinstance(b, dict) and b.get("type") in _ATTACHMENTS]
    # thinking blocks are never shown; say so when the message carried any
    hidden = any(isinstance(b, dict) and b.get("type") in privacy.REASONING_KINDS for b in blocks)
    hidden = hidden or any(
        isinstance(e.content.get(k), str) and e.content.get(k) for k in privacy.REASONING_FIELDS
    )
    if images:
        item["attachments"] = [str(b.get("type")) for b in images]
    if not (item["text"] or images):
        return None
    marks.mark(item, _merge(f.labels, ["reasoning"] if hidden else []), len(f.spans))
    return item


def _result_text(
    e: EntryView,
    receipt: Mapping[str, Any] | None,
    preview_tokens_over: int,
    count: Callable[[str], int] | None,
    find: Find,
) -> tuple[privacy.Filtered, dict[str, Any] | None]:
    """The filtered text a result shows and its ``truncated`` figure. The whole output is
    filtered before a preview is cut from it, so a cut can never leave half a secret."""
    text = e.text
    if receipt is not None:
        full = _filter(text, find) if text else privacy.Filtered("")
        if full.filtered:
            shown = make_preview(full.text, str(receipt.get("media_type") or media_type_of(text)))
            full = privacy.Filtered(shown, True, full.labels, full.spans)
        else:
            preview = _filter(str(receipt.get("preview", "")), find)
            full = preview
        return full, {"tokens": (receipt.get("original_size") or {}).get("tokens")}
    if count is not None and count(text) > preview_tokens_over:
        full = _filter(text, find)
        shown = make_preview(full.text, media_type_of(text))
        return privacy.Filtered(shown, full.filtered, full.labels, full.spans), {
            "tokens": count(text)
        }
    return _filter(text, find), None


def frontend_view(
    entries: Sequence[EntryView],
    *,
    receipts: Mapping[str, Mapping[str, Any]] | None = None,
    preview_tokens_over: int = 2000,
    count: Callable[[str], int] | None = None,
    findings: Find | None = None,
) -> dict[str, Any]:
    """The user-safe history (seed 001: "the frontend should receive only user-safe messages
    and approved execution details"), built from the entries on its own.

    Kept: user and assistant messages, tool calls (name and arguments) and their results.
    Left out: system and developer messages (runtime instructions), reasoning entries,
    runtime events, derived records, ids, hashes, references and metadata. Every text shown
    is filtered by :func:`journal_app.privacy.filter_text` (pins included: this view is for
    display, not for the model): secret values and ``<think>``/``<thinking>``/``<reasoning>``
    blocks become ``[filtered: <kind>]`` / ``[filtered: reasoning]``, and the item says
    ``filtered: true`` with its ``labels`` (``"secret: aws-secret-key"``, ``"reasoning"``);
    a message whose thinking blocks were dropped is labelled ``reasoning`` too. A result
    with a receipt, or over ``preview_tokens_over`` tokens, shows a preview of its filtered
    text. ``count`` counts tokens (no counting, no preview, when ``None``). ``findings`` is
    :func:`journal_app.privacy.findings` or a memo of it shared with the view's check
    (:func:`ledger_app.validation.content.memo_findings`): each text is scanned once.

    Returns:
        ``{"items": [{"seq", "role", "kind", "text", "tool"?, "is_error"?, "attachments"?,
        "truncated"?, "status"?, "filtered"?, "labels"?}], "interrupted": [seq, ...],
        "redactions": n (values and blocks replaced), "filtered": {"items": n, "labels":
        {label: items}, "left_out": {"reasoning": n, ...}}}``.
    """
    receipts = receipts or {}
    find = findings or privacy.findings
    items: list[dict[str, Any]] = []
    marks = _Labels()
    returned = {e.tool_call_id for e in entries if e.kind == "tool_result"}
    for e in entries:
        if e.kind == "reasoning" and not e.derived:
            marks.leave_out("reasoning")
            continue
        if e.derived or e.kind == "event" or e.role in ("system", "developer"):
            continue
        if e.kind == "message":
            item = _message_item(e, marks, find)
            if item is not None:
                items.append(item)
        elif e.kind == "tool_call":
            f = _filter(args_text(e), find, "tool_call")
            item = {
                "seq": e.seq,
                "role": "assistant",
                "kind": "tool_call",
                "tool": e.tool_name,
                "text": clip(f.text, ARGS_SHOWN),
                "status": "returned"
                if e.tool_call_id in returned
                else "pending"
                if e.meta.get("pending") is True
                else "did not complete",
            }
            marks.mark(item, f.labels, len(f.spans))
            items.append(item)
        elif e.kind == "tool_result":
            f, truncated = _result_text(
                e, receipts.get(e.entry_hash), preview_tokens_over, count, find
            )
            item = {
                "seq": e.seq,
                "role": "tool",
                "kind": "tool_result",
                "tool": e.tool_name,
                "is_error": e.is_error,
                "text": f.text,
            }
            if truncated is not None:
                item["truncated"] = truncated
            marks.mark(item, f.labels, len(f.spans))
            items.append(item)
    interrupted = [
        e.seq for e in entries if e.kind == "tool_call" and e.tool_call_id not in returned
    ]
    return {
        "items": items,
        "interrupted": interrupted,
        "redactions": marks.spans,
        "filtered": marks.summary(),
    }
