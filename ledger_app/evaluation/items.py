"""Eval items: the conversations and the state a faithful ledger must reach on them. Pure.

Two sources, one loader each (the tests, ``manage.py eval_ledger`` and the bench read them
the same way): the compaction failure **cases** (:func:`load_case`, :func:`case_messages`,
:func:`case_item`) and the **scenarios** (:func:`load_scenario`); :func:`load_items` reads
both into :class:`EvalItem` objects. The package docstring (:mod:`ledger_app.evaluation`)
gives the file shapes and the expected-state keys.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from journal_app.tokens import count_tokens

#: a message body that is only a placeholder (``<LOG_A_LARGE>``): cases/README.md
PLACEHOLDER = re.compile(r"^<[^<>]+>$")
#: the budget a context is built at when an item names none, tokens: small, so rounds fold
DEFAULT_BUDGET = 2_000


def expand(placeholder: str, tokens: int) -> str:
    """Text of about ``tokens`` tokens (``journal_app.tokens.count_tokens``) standing for
    ``placeholder``, its name leading each line (cases/README.md, ``token_counter: explicit``).
    """
    line = f"{placeholder.strip('<>')[:30]} line {{i:06d}}: value ok\n"
    per = count_tokens(line.format(i=1))
    return "".join(line.format(i=i) for i in range(max(1, tokens // per)))


def load_case(path: str | Path) -> dict[str, Any]:
    """A case file ``{source, kind, messages, settings, expected}`` (cases/README.md), parsed.

    Raises:
        OSError, json.JSONDecodeError: unreadable file.
    """
    data: dict[str, Any] = json.loads(Path(path).read_text())
    return data


def _replace(value: Any, key: str, new: str) -> None:
    """Replace ``key`` by ``new`` in every string inside ``value`` (in place)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, str) and key in v:
                value[k] = v.replace(key, new)
            else:
                _replace(v, key, new)
    elif isinstance(value, list):
        for v in value:
            _replace(v, key, new)


def case_messages(case: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The messages of a case as an importer reads them, and the exact token figures.

    With ``token_counter: explicit`` each message's ``token_counts[i]`` is its cost; a body
    that is only a placeholder (``<LOG_A_LARGE>``) of more than 50 tokens is replaced by
    :func:`expand` text of that size, so excerpts and receipts of it are counted honestly.
    ``declared_payload_chars`` placeholders become that many ``A`` characters.

    Returns:
        ``(messages, exact)``: a deep copy of the messages with bodies expanded, and
        ``{text: tokens}`` for the texts whose cost the case declares.
    """
    s = case.get("settings", {})
    messages = json.loads(json.dumps(case["messages"]))
    counts = s.get("token_counts")
    exact: dict[str, int] = {}
    for i, m in enumerate(messages):
        content = m.get("content")
        if s.get("token_counter") == "explicit" and counts:
            if isinstance(content, str) and PLACEHOLDER.match(content) and counts[i] > 50:
                m["content"] = content = expand(content, counts[i])
            if isinstance(content, str) and content:
                exact[content] = counts[i]
            for call in m.get("tool_calls") or []:
                exact[call["function"]["arguments"]] = counts[i]
        for key, size in (s.get("declared_payload_chars") or {}).items():
            _replace(m, key, "A" * size)
    return messages, exact


def _repeat(value: Any, i: int) -> Any:
    """``value`` with ``{i}`` replaced by ``i`` in every string."""
    if isinstance(value, str):
        return value.replace("{i}", str(i))
    if isinstance(value, list):
        return [_repeat(v, i) for v in value]
    if isinstance(value, dict):
        return {k: _repeat(v, i) for k, v in value.items()}
    return value


def _unroll(items: Iterable[Any], key: str) -> list[Any]:
    """Items with each ``{"$repeat": N, key: ...}`` unrolled for i = 1..N."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, dict) and "$repeat" in item:
            body = item[key]
            for i in range(1, int(item["$repeat"]) + 1):
                made = _repeat(body, i)
                out.extend(made if isinstance(made, list) else [made])
        else:
            out.append(item)
    return out


@dataclass
class EvalItem:
    """One conversation to fold and score.

    Attributes:
        name: the case's file stem or the scenario's name.
        origin: ``"case"`` or ``"scenario"``.
        fmt: ``"openai"`` or ``"anthropic"`` (the messages' format).
        messages: the messages, placeholders expanded.
        expected: the expected state (module docstring).
        budget_tokens: the context's working budget and hard limit, tokens.
        tail_tokens: the protected tail, tokens (``None``: the builder's default).
        description: one line for the table.
    """

    name: str
    origin: str
    fmt: str
    messages: list[dict[str, Any]]
    expected: dict[str, Any]
    budget_tokens: int = DEFAULT_BUDGET
    tail_tokens: int | None = None
    description: str = ""


class ScenarioInvalid(ValueError):
    """A file in the scenarios folder is not a scenario; the message names the file."""


def load_scenario(path: str | Path) -> EvalItem:
    """A scenario file as an :class:`EvalItem` (format in the module docstring).

    Raises:
        OSError, json.JSONDecodeError: unreadable file; KeyError: no ``messages``.
    """
    data = json.loads(Path(path).read_text())
    messages = _unroll(data["messages"], "messages")
    for placeholder, tokens in (data.get("expand") or {}).items():
        _replace(messages, placeholder, expand(placeholder, int(tokens)))
    expected = {
        k: _unroll(v, "text") if isinstance(v, list) else v
        for k, v in (data.get("expected") or {}).items()
    }
    return EvalItem(
        name=data.get("name") or Path(path).stem,
        origin="scenario",
        fmt=data.get("format", "openai"),
        messages=messages,
        expected=expected,
        budget_tokens=int(data.get("budget_tokens", DEFAULT_BUDGET)),
        tail_tokens=data.get("tail_tokens"),
        description=data.get("description", ""),
    )


def case_item(path: str | Path, extra: Mapping[str, Any] | None = None) -> EvalItem:
    """A case file as an :class:`EvalItem`: its messages (:func:`case_messages`) and the
    expected state it implies (every system and developer message verbatim), merged with
    ``extra`` (the case's entry of the case-expectations file: lists are added to, other
    keys replace; ``budget_tokens`` / ``tail_tokens`` set the build)."""
    case = load_case(path)
    messages, _ = case_messages(case)
    governing = [
        m["content"]
        for m in messages
        if m.get("role") in ("system", "developer") and isinstance(m.get("content"), str)
    ]
    expected: dict[str, Any] = {"governing": governing}
    extra = dict(extra or {})
    budget = int(extra.pop("budget_tokens", DEFAULT_BUDGET))
    tail = extra.pop("tail_tokens", None)
    for key, value in extra.items():
        if isinstance(value, list):
            expected[key] = list(expected.get(key, [])) + value
        else:
            expected[key] = value
    return EvalItem(
        name=Path(path).stem,
        origin="case",
        fmt=case.get("settings", {}).get("format", "openai"),
        messages=messages,
        expected=expected,
        budget_tokens=budget,
        tail_tokens=tail,
        description=case.get("kind", ""),
    )


def load_items(
    cases_dir: str | Path | None, scenarios_dir: str | Path | None, names: Sequence[str] = ()
) -> list[EvalItem]:
    """Every case (``cases_dir/*.json``) and scenario (``scenarios_dir/*.json``), in name
    order, cases first; ``names``: only the items whose name is one of them or starts with
    one (``"07"``). The case-expectations file is ``scenarios_dir/cases.expected.json``
    (``{case stem: expected}``); it is not a scenario.

    Raises:
        LookupError: no item at all in the folders, or ``names`` given and none matches.
        ScenarioInvalid: a scenario file that is not one (named, with why).
    """
    items: list[EvalItem] = []
    extras: dict[str, Any] = {}
    if scenarios_dir is not None and (Path(scenarios_dir) / "cases.expected.json").is_file():
        extras = json.loads((Path(scenarios_dir) / "cases.expected.json").read_text())
    if cases_dir is not None:
        for p in sorted(Path(cases_dir).glob("*.json")):
            items.append(case_item(p, extras.get(p.stem)))
    if scenarios_dir is not None:
        for p in sorted(Path(scenarios_dir).glob("*.json")):
            if p.name != "cases.expected.json":
                try:
                    items.append(load_scenario(p))
                except (KeyError, TypeError, ValueError) as exc:
                    raise ScenarioInvalid(
                        f"{p}: not a scenario ({type(exc).__name__}: {exc}); a scenario is "
                        '{"name", "messages": [...], "expected": {...}} (tests/scenarios/)'
                    ) from exc
    if not items:
        folders = [str(d) for d in (cases_dir, scenarios_dir) if d is not None]
        raise LookupError(f"no case or scenario in {' or '.join(folders) or 'no folder'}")
    if names:
        chosen = [i for i in items if any(i.name == n or i.name.startswith(n) for n in names)]
        if not chosen:
            raise LookupError(
                f"no case or scenario named {', '.join(names)} "
                f"(known: {', '.join(i.name for i in items)})"
            )
        return chosen
    return items
