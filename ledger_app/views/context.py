"""The context page: the three views of one state side by side (DESIGN.md 6 and 8)."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from journal_app import selectors as journal_selectors
from journal_app.views import HtmxHttpRequest, scope_kwargs
from ledger_app.context_service import ContextError, context_preview
from ledger_app.selectors import presenters
from ledger_app.views.common import partial, scope_context

CONTEXT_FORMATS = ("openai", "anthropic")
BUDGETS = ("working_budget", "hard_limit", "tail_tokens")


def _int_param(request: HttpRequest, name: str) -> int | None:
    value = request.GET.get(name, "").strip().replace(",", "").replace("_", "")
    if value == "":
        return None
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{name}: {value!r} is not a whole number of tokens") from None
    if number < 0:
        raise ValueError(f"{name}: {number} is negative")
    return number


def _parts(content: Any) -> list[dict[str, str]]:
    """A message's content as labelled text parts (OpenAI strings, Anthropic blocks)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"label": "", "text": content}]
    if not isinstance(content, list):
        return [{"label": "", "text": json.dumps(content, ensure_ascii=False, indent=1)}]
    parts = []
    for block in content:
        if not isinstance(block, dict):
            parts.append({"label": "", "text": str(block)})
        elif block.get("type") == "text":
            parts.append({"label": "", "text": str(block.get("text", ""))})
        elif block.get("type") == "tool_use":
            parts.append(
                {
                    "label": f"tool use {block.get('id', '')}: {block.get('name', '')}",
                    "text": json.dumps(block.get("input"), ensure_ascii=False),
                }
            )
        elif block.get("type") == "tool_result":
            inner = block.get("content")
            text = inner if isinstance(inner, str) else json.dumps(inner, ensure_ascii=False)
            error = " (error)" if block.get("is_error") else ""
            parts.append(
                {"label": f"tool result {block.get('tool_use_id', '')}{error}", "text": text}
            )
        else:
            parts.append(
                {"label": str(block.get("type", "")), "text": json.dumps(block, ensure_ascii=False)}
            )
    return parts


def _model_rows(view: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The model view's messages for display: role, tool call id, parts."""
    if not view:
        return []
    rows = []
    if view.get("system"):
        rows.append({"role": "system", "ref": "", "parts": _parts(view["system"])})
    for m in view.get("messages", []):
        if not isinstance(m, dict):
            continue
        parts = _parts(m.get("content"))
        for call in m.get("tool_calls") or []:
            fn = call.get("function", {}) if isinstance(call, dict) else {}
            parts.append(
                {
                    "label": f"tool call {call.get('id', '')}: {fn.get('name', '')}",
                    "text": str(fn.get("arguments", "")),
                }
            )
        rows.append({"role": m.get("role", ""), "ref": m.get("tool_call_id", ""), "parts": parts})
    return rows


@login_required
def context_views(
    request: HtmxHttpRequest, tenant: str, session: str, lane: str, branch: str
) -> HttpResponse:
    """The three context views of one state side by side (DESIGN.md 6 and 8).

    GET parameters (tokens): ``working_budget``, ``hard_limit``, ``tail_tokens``,
    ``revision`` (default: the head) and ``format`` (``openai`` or ``anthropic``). A budget
    not given is the settings' default, applied by
    :func:`ledger_app.context_service.context_preview` (hard limit ``LEDGER_WINDOW_TOKENS``,
    working budget ``LEDGER_FOLD_THRESHOLD_TOKENS``; the tail a quarter of the budget), the
    same defaults as a fold's invariants panel; the form then shows the budgets used.
    Writes nothing. Shows the model view, the frontend view, the debug trace (each compaction
    decision, reason, token effect) and the validation of each invariant. A bad parameter
    answers 400 with the form and the message; an htmx request gets only ``#context-views``.
    """
    journal = journal_selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    form = {
        **{name: request.GET.get(name, "") for name in BUDGETS},
        "revision": request.GET.get("revision", ""),
        "format": request.GET.get("format", "") or "openai",
    }
    error = ""
    result = None
    try:
        if form["format"] not in CONTEXT_FORMATS:
            raise ValueError(
                f"format: {form['format']!r} is not one of {', '.join(CONTEXT_FORMATS)}"
            )
        budgets = {name: _int_param(request, name) for name in BUDGETS}
        revision = _int_param(request, "revision")
        result = context_preview(
            journal=journal,
            revision=revision,
            target_format=form["format"],
            **{k: v for k, v in budgets.items() if v is not None},
        )
    except (ValueError, ContextError) as exc:
        error = str(exc)
    trace = result.debug_trace if result else {}
    used = trace.get("budgets") if isinstance(trace.get("budgets"), dict) else {}
    for name in BUDGETS:
        if not form[name] and used.get(name) is not None:
            form[name] = str(used[name])
    context = {
        **scope_context(journal),
        "form": form,
        "defaults": {
            "hard_limit": settings.LEDGER_WINDOW_TOKENS,
            "working_budget": settings.LEDGER_FOLD_THRESHOLD_TOKENS,
        },
        "formats": CONTEXT_FORMATS,
        "error": error,
        "result": result,
        "model_rows": _model_rows(result.model_view) if result else [],
        "frontend": result.frontend_view if result else {},
        "trace": trace,
        "reports": presenters.reports(result.validation) if result else [],
        "context_url": reverse("ledger:context", kwargs=scope_kwargs(journal)),
        "permalink": request.build_absolute_uri(request.get_full_path()),
    }
    return render(
        request,
        partial(request, "ledger_app/context.html", "context-views"),
        context,
        status=400 if error else 200,
    )
