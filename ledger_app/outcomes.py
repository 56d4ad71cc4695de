"""What a tool result showed, and where: tool outcome semantics and exact support. Pure.

Issue 15, items 5 and 6. :func:`read_outcome` reads one tool call and its result the way a
careful reader would, instead of "ran (exit 0); output N characters":

* **semantics per tool** (item 5): ``rg``/``grep``/``git grep`` exit 1 (and a search tool's
  "No files found") is *no match*, a finding, not a failure; an edit the harness refused
  ("introduced new syntax error(s)", "Edit was not applied") is *rejected*, not "ran"; a
  rejected ``ExitPlanMode`` is a blocker that the later approved plan supersedes; an
  ``AskUserQuestion`` answer is the user's decision; a ``submit`` call (or mini-swe-agent's
  ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``) ends the run as *submitted*;
* **content** (item 6): a read names the path and the line range it showed, a search its
  match count and first match, an edit the path and the lines it replaced, any other command
  its decisive line (the error line of a failure, else the last line of the output).

:func:`support_item` turns a quote into a support item naming the byte range of the quote in
the entry's canonical body (RFC 8785, as stored) and the chunks that hold it
(``{"entry", "quote", "range": [start, end], "chunks": [positions]}``, the citation shape of
:mod:`recovery_app.analyst`), so the UI opens the entry at the evidence. A quote holding a
secret is left out (the range still points at the evidence): facts never copy secrets.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import rfc8785

from journal_app.chunking import DEFAULT_CHUNK_BYTES, chunk_bounds
from journal_app.hashing import canonical_body
from journal_app.privacy import filter_text

#: Longest quote a support item carries (characters).
QUOTE_CHARS = 200

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_SEARCH_PROGRAMS = re.compile(r"^(?:rg|grep|egrep|fgrep|ag|ack|git\s+grep)\b")
_SEARCH_TOOLS = {"grep", "glob", "search", "search_dir", "search_file", "find_file", "codesearch"}
_READ_TOOLS = {"read", "read_file", "view", "open", "cat"}
_EDIT_TOOLS = {"edit", "multiedit", "write", "str_replace", "insert", "create", "apply_patch"}
_EDIT_TOOLS |= {"str_replace_editor", "edit_file", "write_file", "replace"}
_NO_MATCH = re.compile(r"^\s*(?:No (?:files|matches) found|No matches found for)", re.I)
_REJECTED_EDIT = re.compile(
    r"introduced new syntax error|Your proposed edit has introduced|edit was not applied|"
    r"(?:was|were) NOT (?:applied|written)|No replacement was performed|"
    r"String to replace not found|old_string.{0,40}not found|patch rejected",
    re.I,
)
_PLAN_APPROVED = re.compile(r"User has approved your plan|plan (?:was )?approved", re.I)
_USER_REJECTED = re.compile(
    r"doesn't want to proceed|tool use was rejected|rejected by (?:the )?user"
)
SUBMIT_TOOLS = {"submit", "finish", "attempt_completion", "task_complete", "complete_task"}
SUBMIT_COMMAND = re.compile(r"COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT|MINI_SWE_AGENT_FINAL_OUTPUT")
_LINE_NO = re.compile(r"^\s*(\d+)(?:→|\t|:| )")
_SED_RANGE = re.compile(r"sed -n\s+['\"]?(\d+)(?:,(\d+))?p")
_ERROR = re.compile(
    r"(?i)\berror\b|\bfail|denied|not found|no such file|unable to|cannot|exception|traceback|fatal"
)
# Codex's sandbox wrapper around a non-zero exit that printed nothing (rg/grep: no match)
_SANDBOX_EMPTY = re.compile(r"exit code: 1, stdout: ?, stderr: ?$")
_ANSWER = re.compile(r'"([^"]+)"\s*=\s*"([^"]*)"')


@dataclass
class Outcome:
    """What one tool result showed (see :func:`read_outcome`).

    Attributes:
        kind: ``success``, ``read``, ``search``, ``failure``, ``no_match``, ``rejected``, ``plan_approved``,
            ``plan_rejected``, ``answered``, ``submitted``.
        summary: what it showed, in words (no secrets: every journal string is redacted).
        quote: the exact text of the result (or call) the summary rests on, ``""`` for none.
        quote_in_call: the quote is in the call's arguments, not the result.
        path: the file the call read or changed, ``""`` for none.
    """

    kind: str
    summary: str
    quote: str = ""
    quote_in_call: bool = False
    path: str = ""


def _redact(text: str) -> str:
    """``text`` with secrets and hidden reasoning replaced (:func:`journal_app.privacy.filter_text`):
    a fact is read by operators and by the model, and neither may see either."""
    return filter_text(text).text


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# harness lines around a command's output: SWE-agent's status lines after every observation,
# mini-swe-agent's <returncode>/<output> wrapper
_PROMPT = re.compile(
    r"^\((?:Open file|Current directory): .*\)$|^bash-\$$|^<returncode>-?\d+</returncode>$|"
    r"^</?output>$"
)
_WRAPPER = re.compile(r"^<output>|</output>$")


def _lines(text: str) -> list[str]:
    out = []
    for ln in _ANSI.sub("", text).splitlines():
        ln = ln.rstrip()
        if ln.strip() and not _PROMPT.match(ln.strip()):
            ln = _WRAPPER.sub("", ln)
            if ln.strip():
                out.append(ln)
    return out


def _name(tool_name: str) -> str:
    return tool_name.lower().split("__")[-1]


def _args(content: dict[str, Any]) -> dict[str, Any]:
    args = content.get("arguments")
    return args if isinstance(args, dict) else {}


def is_edit_tool(tool_name: str) -> bool:
    """Whether a tool edits or writes files (``Edit``, ``apply_patch``, ``str_replace_editor``...)."""
    return _name(tool_name) in _EDIT_TOOLS


def path_of(args: dict[str, Any]) -> str:
    """The file path of a call's arguments (``file_path``, ``path``, ...), ``""`` for none."""
    for key in ("file_path", "path", "filePath", "filename", "file"):
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def _last_segment(command: str) -> str:
    return re.split(r"\|\||&&|[|;]", command)[-1].strip()


def _exit(result_content: dict[str, Any], output: str) -> int | None:
    code = result_content.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    found = re.match(r"\s*(?:Error: )?Exit code (\d+)", output)
    return int(found.group(1)) if found else None


def _decisive(lines: list[str], failed: bool) -> str:
    if failed:
        for i, line in enumerate(lines):
            if _ERROR.search(line):
                if line.strip().endswith(":") and i + 1 < len(lines):
                    return lines[i + 1].strip()  # "ERROR:" heads the line that says what
                return line.strip()
    return lines[-1].strip() if lines else ""


def _line_range(lines: list[str]) -> tuple[int, int] | None:
    numbers = [int(m.group(1)) for ln in lines if (m := _LINE_NO.match(ln))]
    return (numbers[0], numbers[-1]) if len(numbers) >= 2 else None


def read_outcome(
    *,
    tool_name: str,
    arguments: dict[str, Any],
    command: str,
    output: str,
    is_error: bool,
    result_content: dict[str, Any],
) -> Outcome:
    """What one tool result showed, by the rules of the module docstring.

    Args:
        tool_name: the call's tool name (``Read``, ``shell``, ``mcp__x__grep``, ...).
        arguments: the call's arguments (``{}`` when not an object).
        command: the shell command of the call, ``""`` when it has none.
        output: the result's output text.
        is_error: the result's error flag as the importer stored it.
        result_content: the result's content (``exit_code`` when the format records one).

    Returns:
        An :class:`Outcome`. ``summary`` is ready to follow "`tool` on `path` " in a fact.
    """
    name = _name(tool_name)
    code = _exit(result_content, output)
    lines = _lines(output)
    path = path_of(arguments)
    if name in SUBMIT_TOOLS or SUBMIT_COMMAND.search(command):
        head = lines[0] if lines else ""
        return Outcome("submitted", "submitted the run's final output", head[:QUOTE_CHARS])
    if name == "exitplanmode":
        if _PLAN_APPROVED.search(output) and not is_error:
            plan = str(arguments.get("plan") or "")
            first = next((ln.strip() for ln in plan.splitlines() if ln.strip()), "")
            return Outcome(
                "plan_approved",
                f"the user approved the plan: {_clip(_redact(first), 200)}",
                first[:QUOTE_CHARS],
                quote_in_call=True,
            )
        if is_error or _USER_REJECTED.search(output):
            why = lines[0] if lines else ""
            return Outcome("plan_rejected", "the user rejected the plan", why[:QUOTE_CHARS])
    if name == "askuserquestion" and not is_error:
        answers = _ANSWER.findall(output)
        said = "; ".join(f"{q} -> {a}" for q, a in answers) or _clip(output, 300)
        return Outcome(
            "answered",
            f"the user answered: {_clip(_redact(said), 400)}",
            (answers[0][1] if answers else (lines[0] if lines else ""))[:QUOTE_CHARS],
        )
    rejected = _REJECTED_EDIT.search(output)
    if rejected and (name in _EDIT_TOOLS or "apply_patch" in command):
        line = next((ln for ln in lines if _REJECTED_EDIT.search(ln)), rejected.group(0))
        return Outcome(
            "rejected",
            f"the edit was rejected, nothing changed: {_clip(_redact(line), 200)}",
            line.strip()[:QUOTE_CHARS],
            path=path,
        )
    search_cmd = bool(command) and bool(_SEARCH_PROGRAMS.match(_last_segment(command)))
    if (
        search_cmd and code == 1 and (_SANDBOX_EMPTY.search(output) or not _ERROR.search(output))
    ) or ((name in _SEARCH_TOOLS or search_cmd) and not is_error and _NO_MATCH.match(output)):
        return Outcome("no_match", "found no match", (lines[0] if lines else "")[:QUOTE_CHARS])
    if is_error or (code is not None and code != 0):  # a non-zero exit is a failure
        line = _decisive(lines, True)
        detail = f": {_clip(_redact(line), 200)}" if line else ""
        return Outcome("failure", f"failed{detail}", line[:QUOTE_CHARS], path=path)
    if name in _SEARCH_TOOLS or search_cmd:
        found = re.match(r"Found (\d+) (?:files?|matches?)", lines[0]) if lines else None
        count = int(found.group(1)) if found else len(lines)
        first = lines[1] if found and len(lines) > 1 else (lines[0] if lines else "")
        summary = f"found {count} match{'es' if count != 1 else ''}" + (
            f", first: {_clip(_redact(first), 160)}" if first else ""
        )
        return Outcome("search", summary, first.strip()[:QUOTE_CHARS])
    sed = _SED_RANGE.search(command) if command else None
    if name in _READ_TOOLS or sed or arguments.get("command") == "view":
        span = _line_range(lines)
        if span is None and sed:
            span = (int(sed.group(1)), int(sed.group(2) or sed.group(1)))
        where = f" lines {span[0]}-{span[1]}" if span else f" ({len(lines)} lines)"
        first = lines[0].strip() if lines else ""
        return Outcome("read", f"showed{where}", first[:QUOTE_CHARS], path=path)
    if name in _EDIT_TOOLS or "apply_patch" in command:
        old, new = (
            arguments.get("old_string", arguments.get("old_str")),
            arguments.get("new_string", arguments.get("new_str", arguments.get("content"))),
        )
        change = ""
        if isinstance(new, str):
            n_new = len(new.splitlines()) or 1
            change = (
                f": replaced {len(old.splitlines()) or 1} line(s) with {n_new}"
                if isinstance(old, str)
                else f": wrote {n_new} line(s)"
            )
        quote = (
            next((ln.strip() for ln in (new or "").splitlines() if ln.strip()), "")
            if (isinstance(new, str))
            else (lines[0] if lines else "")
        )
        return Outcome(
            "success",
            f"changed the file{change}",
            quote[:QUOTE_CHARS],
            quote_in_call=isinstance(new, str),
            path=path,
        )
    line = _decisive(lines, False)
    if not lines:
        summary = "printed nothing"
    elif len(lines) <= 3:
        summary = "printed: " + _clip(_redact(" / ".join(ln.strip() for ln in lines)), 240)
    else:
        summary = f"printed {len(lines)} lines, last: {_clip(_redact(line), 200)}"
    return Outcome("success", summary, line[:QUOTE_CHARS], path=path)


def support_item(
    *,
    entry_hash: str,
    content: dict[str, Any],
    quote: str = "",
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> dict[str, Any]:
    """A support item citing ``quote`` in an entry, with its byte range and chunks.

    Args:
        entry_hash: the entry's hash (hex).
        content: the entry's content (its canonical JSON is the stored body).
        quote: exact text of the entry (inside one JSON string of the body); ``""`` for none.
        chunk_bytes: the journal's chunk size in bytes (docs/design.md section 4).

    Returns:
        ``{"entry", "quote", "range", "chunks"}``; ``{"entry"}`` alone when the quote is
        empty or not in the body. A quote holding a secret or hidden reasoning keeps its range, drops its text.
    """
    item: dict[str, Any] = {"entry": entry_hash}
    quote = quote.strip()
    if not quote:
        return item
    fragment = rfc8785.dumps(quote)[1:-1]
    body = canonical_body(content)
    start = body.find(fragment)
    if start < 0:
        return item
    end = start + len(fragment)
    if not filter_text(quote).filtered:
        item["quote"] = quote
    item["range"] = [start, end]
    item["chunks"] = [
        i
        for i, (off, ln) in enumerate(chunk_bounds(body, chunk_bytes))
        if off < end and off + ln > start
    ]
    return item


def first_text(value: Any) -> str:
    """The first non-empty line of ``value``'s text (a string, or JSON of anything else)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
