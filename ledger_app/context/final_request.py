"""The final request of a build: its parts, its assembly, the last pass and its validation.

Pure module: no Django, no database (docs/design.md section 6, step 5 "rebuild and validate").
Each function reads a :class:`~ledger_app.context.build_state.Builder` as the compaction steps
left it: :func:`final_parts` puts the shown rounds, the ledger checkpoint and the task state
in order (secrets redacted except in pins); :func:`request` assembles them in the target
format; :func:`rebuild` counts the built request as it will be sent, trims the P2/P3 facts
while it is over the limit, and validates it (:func:`validate`: every invariant, and that
no done request is shown as current). Only :func:`rebuild` changes the builder (its
correction and decisions).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ledger_app.context.assembly import CONTINUED, Assembled, Part, assemble, starts_with_assistant
from ledger_app.context.build_state import Builder
from ledger_app.context.inputs import TARGETS, ArtifactResolver
from ledger_app.context.projection import receipt_again
from ledger_app.pins import expected_text, pin_shown_text
from ledger_app.validation import (
    BUDGET_CHECKS,
    ArtifactInfo,
    Expectations,
    Problem,
    ValidationReport,
    budget_problems,
    message_texts,
    validate_request,
)

#: Tokens kept back when filling the checkpoint with P2/P3 facts.
FILL_MARGIN = 8
#: P2/P3 facts fill at most 1/FILL_SHARE of the budget: a fixed share, not the room the
#: tail leaves, keeps the checkpoint the same from call to call between folds.
FILL_SHARE = 8
#: The context-side check that a done request is never shown as current (docs/design.md 5.2).
DONE_REQUEST_CHECK = "done_request_current"
#: Tries of the last pass (fewer P2/P3 facts) before the compaction steps run again.
LAST_PASS_TRIES = 4


def final_parts(b: Builder, fill: int | None) -> tuple[list[Part], list[str]]:
    """The request's parts in order (secrets redacted except in pins, a repeated receipt
    shortened, the checkpoint after the last dropped round, the task state last) and
    the ids of P2/P3 facts left out."""
    k = b.dropped_count()
    ckpt, left, _ = b.checkpoint_text(k, fill)
    last_dropped = max((i for i, p in enumerate(b.plans) if p.dropped), default=-1)
    parts: list[Part] = []
    first_receipt: dict[str, int] = {}
    for i, p in enumerate(b.plans):
        if not p.dropped:
            for part in p.parts:
                if (
                    p.round.kind == "message"
                    and part.entry is not None
                    and part.entry.entry_hash in b.inactive_pins
                    and i < last_dropped
                ):
                    continue  # a retired pin or a done request: the record lists it
                q = copy.copy(part)
                if not q.pin:
                    q.text = b.redacted(q.text)
                if q.form == "receipt" and q.entry is not None:
                    receipt = b.receipts[q.entry.entry_hash]
                    if q.reference in first_receipt:
                        q.text = b.redacted(
                            receipt_again(receipt, q.entry.seq, first_receipt[q.reference])
                        )
                    else:
                        first_receipt[q.reference] = q.entry.seq
                parts.append(q)
        if i == last_dropped and ckpt:
            parts.append(Part(role="user", kind="text", text=ckpt))
    if last_dropped < 0 and ckpt:  # imported summaries only: after the system text
        at = next((j for j, q in enumerate(parts) if q.role not in ("system", "developer")), 0)
        parts.insert(at, Part(role="user", kind="text", text=ckpt))
    if b.task_text:
        parts.append(Part(role="user", kind="text", text=b.task_text))
    return parts, left


def expectations(b: Builder, a: Assembled) -> Expectations:
    """What the journal and ledger say the request must hold (pins, goal, interrupted
    calls, approvals), for :func:`validate_request`."""
    pins: list[tuple[str, str, str]] = []
    for e in b.pin_entries:
        if e.entry_hash in b.inactive_pins:
            continue
        fid = b.pin_of(e)["id"]
        ledger_pin = b.facts.pins.get(e.entry_hash)
        # governing text verbatim as the context shows it (attachments as receipts)
        shown = pin_shown_text(ledger_pin if ledger_pin is not None else b.pin_of(e))
        pins.append((fid, e.entry_hash, shown))
        if ledger_pin is not None and ledger_pin.get("text") != expected_text(ledger_pin, e.text):
            # a ledger pin that differs from what its entry gives (harness blocks out,
            # docs/design.md 5.2): the journal's bytes are required
            pins.append((str(ledger_pin.get("id")), e.entry_hash, e.text))
    goal = None
    if b.goal is not None:
        ledger_goal = b.facts.pins.get(b.goal.entry_hash) or b.pin_of(b.goal)
        shown = pin_shown_text(ledger_goal)
        goal = (b.goal.entry_hash, shown)
    return Expectations(
        pins=pins,
        goal=goal,
        interrupted=[(cid, call.entry_hash) for cid, call, _ in b.interrupted],
        approvals=[(key, ev.entry_hash) for key, ev in b.approvals],
        sources=a.sources,
        calls=a.calls,
        results=a.results,
        secrets_exempt=frozenset(text for _, _, text in pins),
    )


def resolver(b: Builder) -> ArtifactResolver:
    """The artifact resolver: the store's, or the receipts themselves when none."""
    if b.resolve is not None:
        return b.resolve
    known = {
        str(r.get("reference")): ArtifactInfo(
            str(r.get("content_hash", "")).removeprefix("sha256:")
        )
        for r in b.receipts.values()
    }
    return known.get


def request(b: Builder, fill: int | None) -> tuple[dict[str, Any], Assembled, list[str]]:
    """The model view (``{"format", "messages", "system"?}``), its assembly and the
    ids of facts left out, with ``fill`` tokens for P2/P3 facts."""
    parts, left = final_parts(b, fill)
    if b.fmt == "anthropic" and starts_with_assistant(parts):
        # the Messages API requires a user turn first; say why there is none
        parts.insert(0, Part(role="user", kind="text", text=CONTINUED))
    a = assemble(parts, b.fmt, b.ids)
    if b.fmt == "anthropic":
        view: dict[str, Any] = {"format": TARGETS["anthropic"], "messages": a.messages}
        if a.system:
            view["system"] = a.system
    else:
        view = {"format": TARGETS["openai"], "messages": a.messages}
    return view, a, left


def validate(b: Builder, view: Mapping[str, Any], a: Assembled) -> ValidationReport:
    """Every invariant of docs/design.md 6 step 5 on the model view, secrets included, the
    ``tools`` schema counted against the budgets."""
    report = validate_request(
        {k: v for k, v in view.items() if k != "format"},
        fmt=b.fmt,
        working_budget=b.working,
        hard_limit=b.hard,
        output_reserve=b.reserve,
        meter=b.meter,
        expect=expectations(b, a),
        resolve_artifact=resolver(b),
        check_secrets=True,
        scan=b.scan,
        tools=b.tools,
    )
    report.checks.append(DONE_REQUEST_CHECK)
    report.problems += done_request_problems(b, a)
    return report


def done_request_problems(b: Builder, a: Assembled) -> list[Problem]:
    """``done_request_current``: a closed request's text shown whole in a message (as if
    it were current, docs/design.md 5.2); its one line ("done at seq N ...") is what is shown."""
    if not b.done_requests:
        return []
    texts = {t for m in a.messages for t in message_texts(m)}
    texts |= {str(block.get("text", "")) for block in a.system}
    # the same words asked again in an open request are that request, shown as current
    current = {
        pin_shown_text(f)
        for h, f in b.facts.pins.items()
        if h not in b.done_requests and f.get("lifecycle", "active") == "active"
    } | {e.text for e in b.pin_entries if e.entry_hash not in b.facts.pins}
    problems = []
    for h in sorted(b.done_requests):
        e = b.by_hash.get(h)
        if e is not None and e.text in texts and e.text not in current:
            problems.append(
                Problem(
                    DONE_REQUEST_CHECK,
                    f"the request at seq {e.seq} is done but shown whole, as if current",
                    None,
                    str(b.facts.pins[h].get("id")),
                    f"sha256:{h}",
                )
            )
    return problems


def counted(b: Builder, a: Assembled) -> int:
    """Tokens of an assembled request by our own count (what validation will say)."""
    return b.meter.request(a.messages, a.system, b.tools)


def rebuild(b: Builder) -> tuple[dict[str, Any] | None, Assembled, list[str], ValidationReport]:
    """Build and validate the request; a plan already over the limit is not built (its
    validation can only fail on the budget, and redacting it would be wasted work).

    The last pass: the built request is counted as it will be sent; while it
    is over the builder's ``limit`` the room for P2/P3 facts shrinks by the excess, down to none
    (each try is one assembly and one count, at most :data:`LAST_PASS_TRIES`). What is
    still over after that is kept in its ``correction``, so the compaction steps can run
    again against the real figure.
    """
    b.settle()
    planned = b.total()
    if planned > b.limit:
        return _not_built(b, planned)
    fill = fill_room(b)
    view, a, left = request(b, fill)
    tokens = counted(b, a)
    tries = 0
    while tokens > b.limit and fill > 0 and tries < LAST_PASS_TRIES:
        tries += 1
        before = tokens
        fill = max(0, fill - (tokens - b.limit) - FILL_MARGIN)
        view, a, left = request(b, fill)
        tokens = counted(b, a)
        b.decide(
            5,
            "trim",
            f"the built request is {before} tokens, over the limit {b.limit}: fewer "
            f"P2/P3 facts in the checkpoint (room {fill} tokens)",
            before,
            tokens,
        )
    if tokens > b.limit:
        excess = tokens - b.total()
        if excess > 0:
            b.correction += excess
    return view, a, left, validate(b, view, a)


def _not_built(
    b: Builder, planned: int
) -> tuple[dict[str, Any] | None, Assembled, list[str], ValidationReport]:
    problems = budget_problems(planned, b.working, b.hard, b.reserve)
    if not problems:  # within the budgets, over the provider-calibrated limit
        problems = [
            Problem(
                "within_working_budget",
                f"the request is {planned} tokens, over {b.limit}: the working budget "
                "calibrated by the provider's figures",
                None,
                "tokens",
            )
        ]
    report = ValidationReport(
        view="model",
        format=b.fmt,
        problems=problems,
        checks=list(BUDGET_CHECKS),
        tokens=planned,
        token_source=b.meter.label + " (planned, not built)",
    )
    return None, Assembled([], [], [], {}, {}), [], report


def fill_room(b: Builder) -> int:
    """Tokens for P2/P3 facts: the room left (a few kept back: the omission note changes
    length), at most 1/:data:`FILL_SHARE` of the budget, so that the checkpoint does not
    change with the tail while that much room is left (docs/design.md 6)."""
    room = max(0, b.limit - b.total() - FILL_MARGIN)
    return min(room, fill_share(b))


def fill_share(b: Builder) -> int:
    """The most tokens P2/P3 facts fill (:func:`fill_room`): 1/:data:`FILL_SHARE` of the
    budget. Step 4 (:func:`ledger_app.context.compaction.cut`) keeps that much free, so
    the facts shown change with the fold, not with the tail."""
    return b.budget_limit // FILL_SHARE
