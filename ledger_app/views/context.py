"""The context page: the three views of one state side by side (docs/design.md 6 and 8)."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from journal_app import selectors as journal_selectors
from journal_app.content import without_terminal_escapes
from journal_app.privacy import filter_text
from journal_app.toolcall import call_parts
from journal_app.views.htmx import HtmxHttpRequest, partial
from journal_app.views.scope_urls import scope_kwargs
from ledger_app.context import capped
from ledger_app.selectors import presenters
from ledger_app.services.context import context_preview
from ledger_app.services.context_explain import context_failure_explain
from ledger_app.services.context_records import MAX_TOKENS, VIEWS, ContextError
from ledger_app.views.scope import scope_context

CONTEXT_FORMATS = ("openai", "anthropic")
BUDGETS = ("working_budget", "hard_limit", "tail_tokens", "output_reserve")


def _int_param(request: HttpRequest, name: str, what: str = "tokens") -> int | None:
    """The whole number in GET parameter ``name`` (commas and underscores allowed), ``None``
    when empty. Raises ``ValueError`` naming the parameter: not a whole number of ``what``,
    negative, or (tokens) over :data:`~ledger_app.services.context_records.MAX_TOKENS`, the
    API's bound."""
    value = request.GET.get(name, "").strip().replace(",", "").replace("_", "")
    if value == "":
        return None
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{name}: {value!r} is not a whole number of {what}") from None
    if number < 0:
        raise ValueError(f"{name}: {number} is negative")
    if what == "tokens" and number > MAX_TOKENS:
        raise ValueError(f"{name}: {number:,} is over {MAX_TOKENS:,} tokens (the API's bound)")
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


#: Items (messages, frontend items, decisions) per page of the open view.
PER_PAGE = 50
#: Characters of one text shown; the rest is counted, never sent (a tool result can be MBs).
TEXT_SHOWN = 2_000


def _filtered(text: Any) -> str:
    """``text`` as the page shows it: secrets and hidden reasoning filtered by the one
    detector (:func:`journal_app.privacy.filter_text`). The model view holds pins verbatim
    (what the model is sent, docs/design.md 5.2); this page is a display surface."""
    return filter_text("" if text is None else str(text)).text


def _capped_filtered(items: list[Any], cap: int) -> tuple[list[str], int]:
    """:func:`ledger_app.context.capped`, each kept item filtered (:func:`_filtered`)."""
    kept, more = capped(items, cap)
    return [_filtered(x) for x in kept], more


def _clipped(text: Any) -> dict[str, Any]:
    """``{"text", "more"}``: ``text`` filtered (:func:`_filtered`), then cut to
    :data:`TEXT_SHOWN` characters, and how many characters were left out."""
    text = _filtered(text)
    if len(text) <= TEXT_SHOWN:
        return {"text": text, "more": 0}
    return {"text": text[:TEXT_SHOWN], "more": len(text) - TEXT_SHOWN}


def _page_rows(view: str, result: Any, rows: list[dict[str, Any]]) -> list[Any]:
    """The open view's rows: model messages, frontend items or trace decisions."""
    if view == "model":
        return rows
    if view == "frontend":
        return list((result.frontend_view or {}).get("items") or [])
    return list(result.debug_trace.get("decisions") or [])


def _frontend_call(item: dict[str, Any]) -> list[Any]:
    """The readable parts of a frontend item that is a tool call whose (filtered) arguments
    are whole JSON (:func:`journal_app.toolcall.call_parts`: commands as shell, patches as
    diffs, other values pretty-printed); ``[]`` otherwise (the text is shown as it is)."""
    if item.get("kind") != "tool_call":
        return []
    try:
        arguments = json.loads(str(item.get("text") or ""))
    except ValueError:
        return []
    return call_parts({"name": item.get("tool") or "", "arguments": arguments})


@login_required
def context_views(
    request: HtmxHttpRequest, tenant: str, session: str, lane: str, branch: str
) -> HttpResponse:
    """The three context views of one state (docs/design.md 6 and 8), one open at a time, paged.

    GET parameters (tokens): ``working_budget``, ``hard_limit``, ``tail_tokens``,
    ``revision`` (default: the head), ``format`` (``openai`` or ``anthropic``), ``view``
    (``model``, ``frontend`` or ``debug``: the view shown open; the others are collapsed to
    their counts) and ``page`` (of the open view, :data:`PER_PAGE` items; each text cut to
    :data:`TEXT_SHOWN` characters with the count of the rest). A budget not given is the
    settings' default, applied by :func:`ledger_app.services.context.context_preview`
    (the same defaults as a fold's invariants panel); the form then shows the budgets used.
    The frontend view (a privacy scan of every entry) is built only when it is the open one.

    The form is a plain GET form: every control, the open view and the page are in the URL,
    so Back and Forward restore the controls and the result together and the permalink
    names the current view. Writes nothing. A bad parameter answers 400 with the
    form and the message. The page's size is bounded by the budgets and the page size, not
    by the session.
    """
    journal = journal_selectors.get_journal_for_user(request.user, tenant, session, lane, branch)
    view = request.GET.get("view", "") or "model"
    if view not in VIEWS:
        view = "model"
    form = {
        **{name: request.GET.get(name, "") for name in BUDGETS},
        "revision": request.GET.get("revision", ""),
        "format": request.GET.get("format", "") or "openai",
        "view": view,
    }
    error = ""
    result = None
    try:
        if form["format"] not in CONTEXT_FORMATS:
            raise ValueError(
                f"format: {form['format']!r} is not one of {', '.join(CONTEXT_FORMATS)}"
            )
        budgets = {name: _int_param(request, name) for name in BUDGETS}
        revision = _int_param(request, "revision", "entries (a seq)")
        result = context_preview(
            journal=journal,
            revision=revision,
            target_format=form["format"],
            views=("model", "debug", "frontend") if view == "frontend" else ("model", "debug"),
            **{k: v for k, v in budgets.items() if v is not None},
        )
    except (ValueError, ContextError) as exc:
        error = str(exc)
    trace = result.debug_trace if result else {}
    used = trace.get("budgets") if isinstance(trace.get("budgets"), dict) else {}
    for name in BUDGETS:
        if not form[name] and used.get(name) is not None:
            form[name] = str(used[name])
    model_rows = _model_rows(result.model_view) if result else []
    page = None
    if result is not None:
        page = Paginator(_page_rows(view, result, model_rows), PER_PAGE).get_page(
            request.GET.get("page") or "1"
        )
    shown: list[Any] = []
    for row in page.object_list if page is not None else []:
        if view == "model":
            shown.append({**row, "parts": [{**p, **_clipped(p["text"])} for p in row["parts"]]})
        elif view == "frontend":
            # a test runner's colours left out of what is shown (journal_app.content)
            text = without_terminal_escapes(str(row.get("text") or ""))
            shown.append({**row, **_clipped(text), "call_parts": _frontend_call(row)})
        else:
            shown.append({**row, **_clipped_reason(row)})
    validation = result.to_dict(cap=PER_PAGE)["validation"] if result else {}
    counts = {
        "model": len(model_rows),
        "frontend": len(result.frontend_view.get("items") or [])
        if result is not None and result.frontend_view is not None
        else None,
        "debug": len(trace.get("decisions") or []),
    }
    context = {
        **scope_context(journal),
        "form": form,
        "view": view,
        "tabs": [
            {"name": "model", "label": "Model view", "count": counts["model"]},
            {"name": "frontend", "label": "Frontend view", "count": counts["frontend"]},
            {"name": "debug", "label": "Debug trace", "count": counts["debug"]},
        ],
        "defaults": {
            "hard_limit": settings.LEDGER_WINDOW_TOKENS,
            "working_budget": settings.LEDGER_FOLD_THRESHOLD_TOKENS,
        },
        "formats": CONTEXT_FORMATS,
        "error": error,
        "result": result,
        "page": page,
        "shown": shown,
        "counts": counts,
        "frontend": (result.frontend_view or {}) if result else {},
        "trace": trace,
        "notes": _capped_filtered(trace.get("notes") or [], PER_PAGE),
        "artifacts": capped(trace.get("artifacts") or [], PER_PAGE),
        "reports": presenters.reports(validation),
        "all_ok": bool(validation) and all(r.get("ok") for r in validation.values()),
        "record": {
            k: _capped_filtered(v, 20) for k, v in (trace.get("continuation_record") or {}).items()
        },
        "explain": context_failure_explain(
            journal=journal,
            revision=result.revision,
            failure=result.failure,
            scale=float(((trace.get("tokens") or {}).get("calibration") or {}).get("scale") or 1),
        )
        if result is not None and result.failure
        else None,
        "context_url": reverse("ledger:context", kwargs=scope_kwargs(journal)),
        "permalink": request.build_absolute_uri(request.get_full_path()),
    }
    return render(
        request,
        partial(request, "ledger_app/context.html", "context-views"),
        context,
        status=400 if error else 200,
    )


def _clipped_reason(decision: dict[str, Any]) -> dict[str, Any]:
    """A decision's reason cut like a text (:func:`_clipped`), as ``reason``/``reason_more``."""
    cut = _clipped(decision.get("reason"))
    return {"reason": cut["text"], "reason_more": cut["more"]}
