"""Every invariant a request for the next model call must hold (docs/design.md section 6, seed 001).

Pure package: no Django, no database. It checks a message list in either target format,
OpenAI Chat Completions (``[{"role", "content", "tool_calls"?, "tool_call_id"?}]``) or
Anthropic Messages (``{"system"?, "messages": [...]}`` or a bare message list with typed
``text`` / ``tool_use`` / ``tool_result`` / ``thinking`` blocks), and returns every problem,
each named by its check and by the message, call, pin, reference or entry it concerns.

Modules, one reason to change each:

* :mod:`.report`: :class:`Problem`, :class:`ValidationReport`, :class:`Expectations`.
* :mod:`.pairing`: the pairing core of calls and results, shared by both formats.
* :mod:`.structure`: format detection and per-message checks of each format.
* :mod:`.content`: pins, goal, task state, artifacts; secrets, hidden reasoning and private
  metadata through :mod:`journal_app.privacy` (the one detector).
* :mod:`.budget`: the token :class:`Meter` and the budget checks.

Checks (the names are the ``check`` field of a :class:`Problem`):

========================  ==============================================================
malformed_message         not an object, unknown role, content of the wrong type
lone_surrogate            a string holds an unpaired UTF-16 surrogate (no UTF-8 form)
empty_message             no content at all (``""``, ``null``, ``[]``, an empty text block)
reasoning_only_message    an assistant message holding only hidden reasoning
duplicate_tool_call_id    two tool calls share an id
orphan_tool_call          a tool call with no result (one of N parallel calls, or alone)
orphan_tool_result        a tool result whose call is not right before it
split_parallel_calls      the results of calls issued together are not all right after them
tool_result_out_of_place  a single call's result exists but not right after the call
within_working_budget     the request is over the working budget (tokens)
within_hard_limit         the request is over the hard limit minus the output reserve
pin_verbatim              a pin (P0 instruction) is not present byte for byte
current_user_goal         the latest user message is not present verbatim
task_state                an interrupted call or a pending approval is not in the task state
artifact_reference        an ``artifact://`` reference does not resolve
artifact_hash             the artifact's stored bytes or stated hash do not match
no_secrets                a secret (provider key, credential) is present
no_hidden_reasoning       hidden reasoning in the client-visible (frontend) view
no_private_metadata       private tool or runtime metadata in the client-visible view
========================  ==============================================================

Secrets and hidden reasoning (docs/design.md sections 6, 7 and 9; case 20) are found by
:mod:`journal_app.privacy`; ``secret_spans``, ``redact`` and ``memo_scanner`` are kept here as
thin wrappers over it for existing importers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ledger_app.validation.budget import Meter, budget_problems, memo_counter
from ledger_app.validation.content import (
    ARTIFACT_REF,
    REDACTED,
    HiddenTexts,
    Scanner,
    content_problems,
    memo_findings,
    memo_scanner,
    message_texts,
    redact,
    secret_spans,
    validate_frontend,
)
from ledger_app.validation.report import (
    ARTIFACT_CHECKS,
    BUDGET_CHECKS,
    FORMATS,
    FRONTEND_KEYS,
    RECEIPT_MARK,
    TASK_STATE_MARK,
    ArtifactInfo,
    EntryNames,
    Expectations,
    Problem,
    ValidationReport,
)
from ledger_app.validation.structure import (
    anthropic_structure,
    detect_format,
    openai_structure,
    split_request,
)

__all__ = [
    "ARTIFACT_CHECKS",
    "ARTIFACT_REF",
    "BUDGET_CHECKS",
    "FORMATS",
    "FRONTEND_KEYS",
    "RECEIPT_MARK",
    "REDACTED",
    "TASK_STATE_MARK",
    "ArtifactInfo",
    "Expectations",
    "HiddenTexts",
    "Meter",
    "Problem",
    "Scanner",
    "ValidationReport",
    "budget_problems",
    "detect_format",
    "memo_counter",
    "memo_findings",
    "memo_scanner",
    "message_texts",
    "redact",
    "secret_spans",
    "split_request",
    "validate_frontend",
    "validate_request",
]

STRUCTURE_CHECKS = [
    "malformed_message",
    "lone_surrogate",
    "empty_message",
    "reasoning_only_message",
    "duplicate_tool_call_id",
    "orphan_tool_call",
    "orphan_tool_result",
    "split_parallel_calls",
    "tool_result_out_of_place",
]


def validate_request(
    request: Any,
    *,
    fmt: str | None = None,
    working_budget: int | None = None,
    hard_limit: int | None = None,
    output_reserve: int = 0,
    meter: Meter | None = None,
    expect: Expectations | None = None,
    resolve_artifact: Callable[[str], ArtifactInfo | None] | None = None,
    check_secrets: bool = False,
    view: str = "model",
    scan: Scanner | None = None,
    check_reasoning: bool | None = None,
    tools: Any = None,
) -> ValidationReport:
    """Check a request for the next model call against every invariant (docs/design.md section 6).

    Args:
        request: an OpenAI message list, ``{"messages": [...]}``, or an Anthropic
            ``{"system", "messages"}`` object (or its bare message list). Any JSON value is
            accepted: what is not a request is reported, never raised.
        fmt: ``"openai"`` / ``"anthropic"``, or ``None`` to detect (:func:`detect_format`).
        working_budget / hard_limit: tokens; each check runs only when given. The hard
            check is against ``hard_limit - output_reserve`` (case 14).
        meter: how tokens are counted (default :class:`Meter`).
        expect: what the journal says must be present (pins, goal, task state) and which
            entry each message came from; ``None`` runs the structural checks only.
        resolve_artifact: ``reference -> ArtifactInfo | None``; references are checked only
            when ``expect`` is given.
        check_secrets: also run ``no_secrets`` over every text (pins exempt).
        check_reasoning: also run ``no_hidden_reasoning`` (``<think>``/``<thinking>``/
            ``<reasoning>`` blocks in a text). ``None``: with ``check_secrets``, in every
            view but ``"model"`` (the model may receive its own reasoning; a client may not).
        tools: the ``tools`` (schema) input sent with the request; its tokens count against
            the budgets. ``None``: none.
        scan: the secret scanner (default :func:`journal_app.privacy.secret_spans`; a builder passes its
            memoized one so a text it already scanned is not scanned twice).

    Returns:
        :class:`ValidationReport` with every problem found.
    """
    meter = meter or Meter()
    fmt, messages, system, problems = split_request(request, fmt)
    if fmt not in FORMATS:
        problems.append(Problem("malformed_message", f"unknown format {fmt!r}", None, "format"))
        fmt = "openai"
    names = EntryNames(expect)
    checks = list(STRUCTURE_CHECKS)
    if fmt == "anthropic":
        problems += anthropic_structure(messages, system, names)
    else:
        problems += openai_structure(messages, names)
    tokens = meter.request(messages, system, tools)
    if working_budget is not None:
        checks.append("within_working_budget")
    if hard_limit is not None:
        checks.append("within_hard_limit")
    problems += budget_problems(tokens, working_budget, hard_limit, output_reserve)
    if check_reasoning is None:
        check_reasoning = check_secrets and view != "model"
    if expect is not None:
        checks += ["pin_verbatim", "current_user_goal", "task_state", *ARTIFACT_CHECKS]
    if check_secrets:
        checks.append("no_secrets")
    if check_reasoning:
        checks.append("no_hidden_reasoning")
    if expect is not None or check_secrets or check_reasoning:
        problems += content_problems(
            messages,
            system,
            expect if expect is not None else Expectations(),
            names,
            resolve_artifact if expect is not None else None,
            check_secrets,
            scan or secret_spans,
            check_reasoning,
            check_present=expect is not None,
        )
    return ValidationReport(
        view=view,
        format=fmt,
        problems=problems,
        checks=checks,
        tokens=tokens,
        token_source=meter.label,
    )
