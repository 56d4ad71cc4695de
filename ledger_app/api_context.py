"""The HTTP surface of the context builder (docs/design.md section 6): the request for the next model
call, and a validator any runtime can run on a request before sending it.

``POST /sessions/{session}/context``: the three views (model, frontend, debug) built by
:func:`ledger_app.services.context.context_build`; the scope's tenant comes from the key
(``request.auth``, :mod:`journal_app.auth`), lane and branch from the body.

``POST /validate``: every invariant a message list breaks
(:func:`ledger_app.validation.validate_request`). Its body is read here, not by the API's
parser, because a lone UTF-16 surrogate in a string is one of the things it must *report*
(the parser refuses such bodies for every other operation). Malformed JSON raises
:class:`journal_app.errors.MalformedBody` (400) and a body of the wrong shape or with unknown
fields :class:`~ledger_app.services.context_records.ValidateRequestInvalid` (422), as every
other operation's body errors do.

Thin: one service call each. Neither operation builds an error response: domain errors
(:class:`~ledger_app.services.context_records.ContextError` and its subclasses are
``LedgerError`` s, hence ``DomainError`` s) are mapped to HTTP once, in ``config/api.py``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from django.http import HttpRequest
from ninja import Router, Schema
from pydantic import Field, ValidationError

from journal_app.errors import MalformedBody
from journal_app.schemas import ERRORS, MAX_SEQ, SCOPE_PART, ScopePart, StrictIn
from ledger_app.services.context import context_build, request_validate
from ledger_app.services.context_records import MAX_TOKENS, ValidateRequestInvalid

router = Router(tags=["context"])

View = Literal["model", "frontend", "debug"]


#: frontend view items sent by default, and at most (``frontend_limit``): the view's
#: size stays bounded whatever the session's length
FRONTEND_LIMIT = 200
FRONTEND_LIMIT_MAX = 2000


class ContextIn(StrictIn):
    """What to build: the scope's lane and branch, the revision, budgets in tokens, format.

    The frontend view sends ``frontend_limit`` items (default 200, at most 2,000) from
    ``frontend_offset`` (default: the last ones); its ``items_total`` and ``items_offset``
    say where the window is, so a client pages the history with ``frontend_offset``.

    ``hard_limit`` is the model's window; the request must fit in ``hard_limit -
    output_reserve``. ``tail_tokens`` defaults to a quarter of ``working_budget``. ``tools``
    is the tools schema the runtime sends with the request: its tokens count against the
    budget.
    """

    lane: str = Field("main", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
    branch: str = Field("main", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
    revision: int | None = Field(None, ge=0, le=MAX_SEQ)
    working_budget: int = Field(ge=1, le=MAX_TOKENS)
    hard_limit: int = Field(ge=1, le=MAX_TOKENS)
    tail_tokens: int | None = Field(None, ge=0, le=MAX_TOKENS)
    output_reserve: int = Field(0, ge=0, le=MAX_TOKENS)
    target_format: Literal["openai", "anthropic"] = "openai"
    views: list[View] = Field(default_factory=lambda: ["model", "frontend", "debug"])
    tools: list[Any] | None = None
    frontend_limit: int = Field(FRONTEND_LIMIT, ge=1, le=FRONTEND_LIMIT_MAX)
    frontend_offset: int | None = Field(None, ge=0, le=MAX_SEQ)


class ContextOut(Schema):
    """``status`` ``ok`` (``model_view`` is the request to send) or ``failed`` (no request:
    ``failure`` says why, which checkpoint was written and, in ``next_step``, the cause and a
    working budget that would fit). Views not asked for are null and
    not built (the frontend view and its ``validation.frontend`` report only when asked).

    Bounded: ``debug_trace`` keeps at most 100 items of each list (``decisions``:
    the first 50 and the last 50; ``rounds.folded_out``, ``notes``, ``artifacts``,
    ``sources``, ``ledger.facts_left_out``, each report's ``problems``), with
    ``decisions_summary`` (one row per step and action: count and token effect over all
    decisions), ``rounds.folded_out_count``, and ``left_out`` (how many items each cut list
    lost); its ``request`` is ``{"messages": n, "same_as": "model_view"}`` instead of a
    second copy of the model view. ``failure.problems`` and ``validation.*.problems`` keep
    at most 100 with ``problems_left_out``. The UI's context page pages the full lists.
    """

    status: str
    revision: int
    model_view: dict[str, Any] | None
    frontend_view: dict[str, Any] | None
    debug_trace: dict[str, Any] | None
    failure: dict[str, Any] | None
    validation: dict[str, Any]


class ValidateIn(StrictIn):
    """A request to check: ``messages`` (OpenAI list, or Anthropic list with ``system``
    beside it), the format (detected when null) and the budgets to check it against.

    With ``session`` (and ``lane``, ``branch``, ``revision``) it is checked against that
    scope: every pin the session requires must be present verbatim and every artifact
    reference must resolve. ``tools`` (the schema sent with it) counts against the budgets.
    """

    messages: list[Any]
    system: Any = None
    format: Literal["openai", "anthropic"] | None = None
    working_budget: int | None = Field(None, ge=1, le=MAX_TOKENS)
    hard_limit: int | None = Field(None, ge=1, le=MAX_TOKENS)
    output_reserve: int = Field(0, ge=0, le=MAX_TOKENS)
    check_secrets: bool = False
    tools: list[Any] | None = None
    session: str | None = Field(None, pattern=SCOPE_PART)
    lane: str = Field("main", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
    branch: str = Field("main", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
    revision: int | None = Field(None, ge=0, le=MAX_SEQ)


class ProblemOut(Schema):
    check: str
    message: str
    index: int | None
    ref: str
    entry: str


class ValidationOut(Schema):
    """Every problem found, each named by its check and the message (``index``), call id,
    pin or reference (``ref``) it concerns; ``tokens`` is counted by ``token_source``."""

    view: str
    format: str
    ok: bool
    tokens: int | None
    token_source: str
    checks: list[str]
    problems: list[ProblemOut]


@router.post(
    "/sessions/{session}/context",
    response={200: ContextOut, **ERRORS},
    summary="Build the request for the next model call (three views)",
)
def context(request: HttpRequest, session: ScopePart, payload: ContextIn) -> Any:
    """Build the context of the scope (key's tenant, ``session``, lane, branch) as of
    ``revision``: pins verbatim, the ledger checkpoint, artifact receipts and the recent tail,
    compacted in the controlled order and validated; or the explicit failure state."""
    journal = request.auth.journal(session, payload.lane, payload.branch)
    result = context_build(
        journal=journal,
        revision=payload.revision,
        working_budget=payload.working_budget,
        hard_limit=payload.hard_limit,
        tail_tokens=payload.tail_tokens,
        target_format=payload.target_format,
        output_reserve=payload.output_reserve,
        tools=payload.tools,
        views=tuple(payload.views),
    )
    return result.to_dict(
        tuple(payload.views), frontend_window=(payload.frontend_offset, payload.frontend_limit)
    )


def _validate_payload(body: bytes) -> ValidateIn:
    """The ``/validate`` body as :class:`ValidateIn`, lone surrogates kept (see the module)."""
    try:
        data = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise MalformedBody("the body is not valid UTF-8") from None
    except (ValueError, RecursionError) as exc:
        raise MalformedBody(f"malformed JSON: {exc}") from None
    try:
        return ValidateIn.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first.get("loc", ())) or ""
        msg = "unknown field" if first.get("type") == "extra_forbidden" else first.get("msg")
        raise ValidateRequestInvalid(f"{field or 'body'}: {msg}", field) from None


@router.post(
    "/validate",
    response={200: ValidationOut, **ERRORS},
    summary="Check a message list against every invariant before sending it",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": ValidateIn.model_json_schema()}},
        }
    },
)
def validate(request: HttpRequest) -> Any:
    """Return every invariant the request breaks: orphan calls or results, split parallel
    calls, empty or reasoning-only messages, lone surrogates, over budget (and secrets when
    ``check_secrets``); with ``session``, a required pin missing or altered. A request that
    breaks nothing answers ``ok: true``.

    Raises:
        MalformedBody: the body is not UTF-8 JSON (400 ``malformed_json``).
        ValidateRequestInvalid: a missing, unknown or mistyped field, or an output reserve
            not below the hard limit (422 ``validation_error``, ``field`` its path).
        Http404: ``session`` names no journal of the key's tenant.
    """
    payload = _validate_payload(request.body)
    journal = (
        request.auth.journal(payload.session, payload.lane, payload.branch)
        if payload.session is not None
        else None
    )
    request_obj: Any = {"messages": payload.messages}
    if payload.system is not None:
        request_obj["system"] = payload.system
    report = request_validate(
        request=request_obj,
        fmt=payload.format,
        working_budget=payload.working_budget,
        hard_limit=payload.hard_limit,
        output_reserve=payload.output_reserve,
        check_secrets=payload.check_secrets,
        tools=payload.tools,
        journal=journal,
        revision=payload.revision,
    )
    return report.to_dict()
