"""The offline writer and the verifier's rules applied mechanically (DESIGN.md 5.3). Pure.

The offline writer is the embedded default when no model is configured. It reads the
covered entries with deterministic rules that go beyond the mechanical fallback:

* **plans and todos** (Claude Code ``TodoWrite``, Codex ``update_plan``, OpenCode
  ``todowrite``, and any call whose arguments hold a ``todos``/``plan`` list of items with a
  ``status``): every item not yet done becomes a P1 ``open_obligation``; an item later marked
  ``completed`` closes it, citing the plan call's successful result. An item that silently
  disappears, or that the agent marks cancelled, stays open (DESIGN.md 5.2: silence does not
  close an obligation, and only an authoritative entry cancels one);
* **test runs** become ``verified_state`` (all passed) or a ``blocker`` (anything failed),
  with the counts parsed from the output (:func:`parse_test_output`: pytest, unittest,
  jest, vitest, go test, cargo test) and the run's scope (:func:`run_scope`: the files or
  selectors named on the command line, ``None`` for a whole suite);
* **failed commands** become P1 blockers with their exit code and first error line; runtime
  error events become blockers too;
* **decisions stated by the user** (:func:`user_decisions`) become P1 ``decision`` facts
  quoting the sentence;
* **assistant success claims** (:func:`assistant_claims`, e.g. "All tests pass") are kept at
  ``reported`` confidence citing the checks that ran since the last user message, and are
  then judged by the same rules as a model writer's facts;
* a later run of the same command **supersedes** the fact of the earlier run, so the
  active ledger shows the latest outcome while the earlier failure stays in the history.

:func:`check_item` is the verifier's rubric applied mechanically, to the offline writer's
items and to every model writer item alike (DESIGN.md 5.3):

* a universal claim ("all tests pass") backed by scoped evidence (one test file) is not
  entailed; nor is a universal test claim citing no test run at all;
* a success claim citing a failed result is not entailed;
* evidence made stale by a later failed run of the same command is temporally invalid;
* completion evidence older than the obligation it would close is temporally invalid.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger_app.facts import Fact
from ledger_app.mechanical import (
    EntryView,
    command_of,
    interrupted_fact,
    is_pin_source,
    is_routine_read,
    outcome_fact,
)

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")

# --------------------------------------------------------------------------- test output


@dataclass(frozen=True)
class RunCounts:
    """Counts parsed from one test run's output. ``total`` is ``None`` when not printed.

    ``packages_ok``/``packages_failed`` count go packages, vitest files and jest suites.
    """

    framework: str
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    total: int | None = None
    packages_ok: int = 0
    packages_failed: int = 0

    @property
    def ok(self) -> bool:
        """Nothing failed and nothing errored."""
        return self.failed == 0 and self.errors == 0 and self.packages_failed == 0

    def summary(self) -> str:
        """e.g. ``"vitest: 1 failed, 6 passed (7 tests)"``."""
        parts = [
            f"{n} {label}"
            for n, label in (
                (self.failed, "failed"),
                (self.errors, "errors" if self.errors != 1 else "error"),
                (self.passed, "passed"),
                (self.skipped, "skipped"),
            )
            if n or label == "passed"
        ]
        total = f" ({self.total} tests)" if self.total is not None else ""
        unit = {"go test": "packages", "vitest": "files", "jest": "suites"}.get(self.framework)
        pkgs = (
            f"; {unit}: {self.packages_ok} ok, {self.packages_failed} failed"
            if unit and (self.packages_ok or self.packages_failed)
            else ""
        )
        return f"{self.framework}: {', '.join(parts)}{total}{pkgs}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "framework": self.framework,
            "passed": self.passed,
            "failed": self.failed,
            "errors": self.errors,
            "skipped": self.skipped,
            "total": self.total,
            "packages_ok": self.packages_ok,
            "packages_failed": self.packages_failed,
            "ok": self.ok,
        }


def _counts(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for n, word in re.findall(r"(\d+) (passed|failed|errors?|skipped|todo|pending)", text):
        key = "errors" if word.startswith("error") else word
        key = "skipped" if key in ("todo", "pending") else key
        out[key] = out.get(key, 0) + int(n)
    return out


def _cargo(text: str) -> RunCounts | None:
    found = re.findall(
        r"test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored", text
    )
    if not found:
        return None
    p, f, i = (sum(int(x[k]) for x in found) for k in range(3))
    return RunCounts("cargo test", passed=p, failed=f, skipped=i, total=p + f + i)


def _go(text: str) -> RunCounts | None:
    ok_pkgs = re.findall(r"(?m)^ok\s+\S+\s+(?:[\d.]+s|\(cached\))", text)
    fail_pkgs = re.findall(r"(?m)^FAIL\s+\S+\s+(?:[\d.]+s|\[build failed\]|\[setup failed\])", text)
    passed = len(re.findall(r"(?m)^\s*--- PASS: ", text))
    failed = len(re.findall(r"(?m)^\s*--- FAIL: ", text))
    skipped = len(re.findall(r"(?m)^\s*--- SKIP: ", text))
    if not (ok_pkgs or fail_pkgs or passed or failed):
        return None
    total = passed + failed + skipped if (passed or failed or skipped) else None
    return RunCounts(
        "go test",
        passed=passed,
        failed=failed,
        skipped=skipped,
        total=total,
        packages_ok=len(ok_pkgs),
        packages_failed=len(fail_pkgs),
    )


def _pytest(text: str) -> RunCounts | None:
    lines = re.findall(
        r"(?m)^=*\s*((?:\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|"
        r"warnings?|rerun)(?:, )?)+) in [\d.]+s",
        text,
    )
    if not lines:
        if re.search(r"(?m)^=*\s*no tests ran in [\d.]+s", text):
            return RunCounts("pytest", total=0)
        return None
    c = _counts(lines[-1])
    if not any(k in c for k in ("passed", "failed", "errors")):
        return None
    p, f, e, s = c.get("passed", 0), c.get("failed", 0), c.get("errors", 0), c.get("skipped", 0)
    return RunCounts("pytest", passed=p, failed=f, errors=e, skipped=s, total=p + f + e + s)


def _unittest(text: str) -> RunCounts | None:
    ran = list(re.finditer(r"(?m)^Ran (\d+) tests? in [\d.]+s", text))
    if not ran:
        return None
    last = ran[-1]
    verdict = re.search(r"(?m)^(OK|FAILED)(?: \(([^)]*)\))?\s*$", text[last.end() :])
    if verdict is None:
        return None
    total = int(last.group(1))
    detail = dict(
        (k.strip(), int(v)) for k, v in re.findall(r"(\w+)=(\d+)", verdict.group(2) or "")
    )
    f, e = detail.get("failures", 0), detail.get("errors", 0)
    s = detail.get("skipped", 0)
    return RunCounts(
        "unittest",
        passed=max(0, total - f - e - s - detail.get("expected failures", 0)),
        failed=f,
        errors=e,
        skipped=s,
        total=total,
    )


def _jest(text: str) -> RunCounts | None:
    tests = re.findall(r"(?m)^Tests:\s+(.*?\d+ total)", text)
    if not tests:
        return None
    c = _counts(tests[-1])
    total = int(re.search(r"(\d+) total", tests[-1]).group(1))  # type: ignore[union-attr]
    suites = re.findall(r"(?m)^Test Suites:\s+(.*?\d+ total)", text)
    sc = _counts(suites[-1]) if suites else {}
    return RunCounts(
        "jest",
        passed=c.get("passed", 0),
        failed=c.get("failed", 0),
        skipped=c.get("skipped", 0),
        total=total,
        packages_ok=sc.get("passed", 0),
        packages_failed=sc.get("failed", 0),
    )


def _vitest(text: str) -> RunCounts | None:
    tests = re.findall(r"(?m)^\s*Tests\s+([^\n]*?)\((\d+)\)\s*$", text)
    if not tests:
        return None
    parts, total = tests[-1]
    c = _counts(parts)
    files = re.findall(r"(?m)^\s*Test Files\s+([^\n]*?)\((\d+)\)\s*$", text)
    fc = _counts(files[-1][0]) if files else {}
    return RunCounts(
        "vitest",
        passed=c.get("passed", 0),
        failed=c.get("failed", 0),
        skipped=c.get("skipped", 0),
        total=int(total),
        packages_ok=fc.get("passed", 0),
        packages_failed=fc.get("failed", 0),
    )


PARSERS = (_cargo, _go, _pytest, _unittest, _jest, _vitest)


def parse_test_output(output: str) -> RunCounts | None:
    """The counts of the last test summary in ``output`` (ANSI colours removed), or ``None``.

    Recognised: pytest (``8 passed, 1 failed in 0.12s``), unittest (``Ran 26 tests in 1.2s``
    + ``OK``/``FAILED (errors=21)``), jest (``Tests: 1 failed, 6 passed, 7 total``), vitest
    (``Tests  1 failed | 6 passed (7)``), go test (``ok``/``FAIL`` package lines, ``--- PASS``),
    cargo test (``test result: ok. 8 passed; 0 failed; ...``, summed over targets).
    """
    text = ANSI.sub("", output).replace("\r\n", "\n")
    for parser in PARSERS:
        run = parser(text)
        if run is not None:
            return run
    return None


TEST_COMMAND = re.compile(
    r"\b(?:pytest|py\.test|unittest|jest|vitest|go test|cargo (?:test|nextest)|"
    r"(?:npm|pnpm|yarn|bun)(?: run)?(?: --filter \S+)? test|manage\.py test|tox|nox|mocha|"
    r"phpunit|rspec|ctest|make (?:test|check))\b|\btest_\w+\.py\b|\b\w+_test\.(?:py|go)\b"
)
CHECK_COMMAND = re.compile(
    r"\b(?:lint|eslint|ruff|flake8|pylint|mypy|pyright|tsc|check-types|typecheck|type-check|"
    r"clippy|golangci-lint|build)\b"
)
_SCOPE_ARG = re.compile(
    r"(?:^|\s)(?:-k\s+\S+|-t\s+\S+|-run\s+\S+|--testNamePattern[=\s]\S+|"
    r"[\w./@-]+(?:\.(?:py|tsx|ts|jsx|js|mjs|cjs|go|rs)(?![\w.])|::[\w\[\]:.-]+)|"
    r"\./(?!\.\.\.(?:\s|$))[\w./-]+)"
)


def _test_segment(command: str) -> str:
    for segment in re.split(r"&&|\|\||;|\|", command):
        if TEST_COMMAND.search(segment):
            return segment.strip()
    return ""


def is_test_command(command: str) -> bool:
    """True when ``command`` runs a test runner (pytest, jest, ``go test``, ``npm test``...)."""
    return bool(_test_segment(command))


def run_scope(command: str) -> str | None:
    """The part of the suite a test command selects, or ``None`` for a whole suite.

    Scoped: test files (``tests/test_refunds.py``, ``NavUser.test.tsx``), node ids
    (``::test_x``), ``-k``/``-t``/``-run`` selectors, a single go package path. ``./...``
    and a bare ``npm test`` are whole suites. Example: ``"cd app && pnpm test
    NavUser.test.tsx"`` -> ``"NavUser.test.tsx"``.
    """
    segment = _test_segment(command)
    if not segment:
        return None
    runner = TEST_COMMAND.search(segment)
    assert runner is not None
    if runner.group(0).endswith((".py", ".go")):  # python test_x.py: the file is the scope
        return runner.group(0)
    args = segment[runner.end() :]
    picked = [m.group(0).strip() for m in _SCOPE_ARG.finditer(" " + args)]
    return " ".join(picked) or None


def is_check_command(command: str) -> bool:
    """Tests, linters, type checks and builds: what a claim "all checks pass" rests on."""
    return is_test_command(command) or bool(CHECK_COMMAND.search(command))


# --------------------------------------------------------------------------- plans, words

PLAN_TOOLS = {"todowrite", "todo_write", "update_plan", "updateplan", "todo", "plan", "write_todos"}
DONE = {"completed", "complete", "done", "finished"}
OPEN = {"pending", "in_progress", "in-progress", "inprogress", "todo", "open", "active"}


def plan_items(call: EntryView) -> list[tuple[str, str]] | None:
    """``[(item text, status)]`` of a plan/todo call, or ``None`` when it is not one.

    Claude Code ``TodoWrite`` ``{"todos": [{"content", "status", "activeForm"}]}``, Codex
    ``update_plan`` ``{"plan": [{"step", "status"}]}``, OpenCode ``todowrite``
    ``{"todos": [{"content", "status", "priority", "id"}]}``.
    """
    args = call.content.get("arguments")
    if not isinstance(args, dict):
        return None
    items = args.get("todos") if isinstance(args.get("todos"), list) else args.get("plan")
    name = call.tool_name.lower().split("__")[-1]
    if not isinstance(items, list) or (name not in PLAN_TOOLS and "todo" not in name):
        return None
    out = []
    for item in items:
        if not isinstance(item, dict):
            continue
        text = item.get("content") or item.get("step") or item.get("title") or item.get("text")
        status = str(item.get("status", "pending")).strip().lower()
        if isinstance(text, str) and text.strip():
            out.append((" ".join(text.split()), status))
    return out


def _sentences(text: str) -> list[str]:
    """Sentences: split at ``.!?`` and at blank lines, list items and headings; wrapped lines
    are joined (a single newline inside a paragraph is not a sentence end)."""
    text = re.sub(r"(?m)^(\s*#+ .*)$", r"\n\1\n", text)  # a heading is its own block
    blocks = re.split(r"\n\s*\n|\n(?=\s*(?:[-*+#>]|\d+[.)])\s)", text)
    out = []
    for block in blocks:
        for part in re.split(r"(?<=[.!?])\s+", " ".join(block.split())):
            part = part.strip(" -*#>")
            if part:
                out.append(part)
    return out


DECISION = re.compile(
    r"\b(?:let'?s (?:go with|use|keep|switch to|stick with|not)|go with|"
    r"we(?:'ll| will| should| are going to) (?:use|go with|keep|switch|stick|not)|"
    r"i(?:'ve| have)? decided|we(?:'ve| have)? decided|use\b[^.!?]*\binstead\b|i want to use|"
    r"i(?:'d| would) (?:like to use|prefer|rather)|i prefer|stick with|switch to|please use|"
    r"(?:yes|ok|okay),? (?:please )?(?:use|go|do|commit|proceed|keep))\b",
    re.I,
)


def user_decisions(entry: EntryView) -> list[str]:
    """Sentences of an authoritative user message that state a decision.

    Examples: "Yes, let's go with the economy class for this option, please.", "We should
    use the initials from the username if name isn't present". Injected context (IDE
    blocks, caveats) and harness-written messages are not read.
    """
    if entry.role != "user" or not is_pin_source(entry) or entry.meta.get("injected"):
        return []
    return [s[:300] for s in _sentences(entry.text) if DECISION.search(s) and len(s) <= 600]


CLAIM = re.compile(
    r"\b(?:all (?:the )?(?:\w+ )?(?:tests?|checks?|specs?|suites?)\b[^.!?\n]*?"
    r"\b(?:pass\w*|green|succeed\w*)|(?:the )?tests? (?:now |all )?pass(?:es|ed|ing)?\b|"
    r"(?:checks?|build|ci|pipeline)\s+(?:is |are )?(?:now )?(?:green|passing|passes|passed)\b|"
    r"deployed\b|deployment (?:is live|succeeded|is complete)|is (?:now )?live\b)",
    re.I,
)
NEGATIVE = re.compile(
    r"\b(?:not|no|never|fail\w*|error\w*|broken|unable|cannot|can't|won't|isn't|aren't|"
    r"doesn't|didn't|wasn't|weren't|yet|most|some|partially|except)\b|n't\b",
    re.I,
)
UNIVERSAL = re.compile(
    r"\b(?:all|every|entire|whole|full)\b[^.!?\n]*\b(?:tests?|checks?|specs?|suites?)\b|"
    r"^(?:assistant reported: )?(?:\W*\w+\W+)?(?:the )?tests? (?:now )?pass|"
    r"\bthe (?:test )?suite (?:now )?pass",
    re.I,
)
SCOPE_WORDS = re.compile(
    r"\b(?:in|of|for|from) (?:that|this|the|one|a single)\b[^.!?\n]*?"
    r"\b(?:file|module|package|directory|selection)\b|"
    r"\S+\.(?:py|ts|tsx|js|jsx|go|rs)\b|\bscoped?\b|\bsingle\b",
    re.I,
)
TEST_WORDS = re.compile(r"\b(?:tests?|specs?|suites?)\b", re.I)


def assistant_claims(entry: EntryView) -> list[str]:
    """Sentences of an assistant message claiming success ("All tests pass.", "Deployed.")."""
    if entry.kind != "message" or entry.role != "assistant":
        return []
    return [
        s[:300]
        for s in _sentences(entry.text)
        if len(s) <= 400 and CLAIM.search(s) and not NEGATIVE.search(s)
    ]


def is_universal(text: str) -> bool:
    """A claim about all tests/checks, without a scope qualifier ("in that file")."""
    return bool(UNIVERSAL.search(text)) and not SCOPE_WORDS.search(text)


def is_success_claim(fact: Fact) -> bool:
    """A fact that asserts something worked (not a blocker or obligation, no failure words)."""
    return fact.get("category") not in ("blocker", "open_obligation") and not NEGATIVE.search(
        str(fact.get("text", ""))
    )


# --------------------------------------------------------------------------- journal reading


class EvidenceIndex:
    """Index over a fold's entries (and earlier cited ones) used by the writer and the rules.

    Args:
        entries: the covered entries in seq order.
        extra: earlier entries of the same scope (cited support), any order.
    """

    def __init__(self, entries: Sequence[EntryView], extra: Iterable[EntryView] = ()) -> None:
        self.entries = list(entries)
        self.by_hash: dict[str, EntryView] = {e.entry_hash: e for e in extra}
        self.by_hash.update({e.entry_hash: e for e in self.entries})
        self.calls: dict[str, EntryView] = {}
        self.results: dict[str, EntryView] = {}
        for e in self.by_hash.values():
            if e.kind == "tool_call" and e.tool_call_id:
                self.calls[e.tool_call_id] = e
            elif e.kind == "tool_result" and e.tool_call_id:
                self.results[e.tool_call_id] = e
        self._runs: dict[str, RunCounts | None] = {}

    def call_of(self, result: EntryView) -> EntryView | None:
        """The tool call a result answers, if it is in the index."""
        return self.calls.get(result.tool_call_id)

    def command(self, view: EntryView) -> str:
        """The shell command of a call, or of a result's call."""
        call = view if view.kind == "tool_call" else self.call_of(view)
        return command_of(call) if call is not None else ""

    def test_run(self, result: EntryView) -> RunCounts | None:
        """Parsed counts of a result when its output holds a test summary (cached)."""
        if result.entry_hash not in self._runs:
            output = result.content.get("output")
            run = parse_test_output(output) if isinstance(output, str) else None
            self._runs[result.entry_hash] = run
        return self._runs[result.entry_hash]

    def failed(self, result: EntryView) -> bool:
        """A result that shows a failure: an error result, or a test run with failures."""
        run = self.test_run(result)
        return result.is_error or (run is not None and not run.ok)


# --------------------------------------------------------------------------- the writer


def _h(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_line(text: str) -> str:
    for line in ANSI.sub("", text).splitlines():
        if line.strip():
            return line.strip()
    return ""


class OfflineWriter:
    """Deterministic rules, no model (see the module docstring). Labelled offline everywhere."""

    id = "offline"
    label = "offline writer (deterministic rules, no model)"
    prompt_version = None
    calls_models = False

    def propose(self, entries: Sequence[EntryView], state: dict[str, Any]) -> list[dict[str, Any]]:
        """Ops (``add``, ``supersede``, ``close``) for the covered ``entries`` (no pins).

        Args:
            entries: the fold's covered entries in seq order.
            state: the ledger state before the fold (to close and supersede earlier facts).

        Returns:
            The ops, in journal order. Assistant claims are included; :func:`check_item`
            decides which of them stand.
        """
        j = EvidenceIndex(entries)
        facts: dict[str, Fact] = state.get("facts", {})
        ops: list[dict[str, Any]] = []
        # latest active fact per repeated command, and per plan item
        by_command: dict[str, str] = {
            f["command_key"]: fid
            for fid, f in facts.items()
            if f.get("lifecycle") == "active" and f.get("command_key")
        }
        todo_state: dict[str, str] = {
            fid: f["lifecycle"] for fid, f in facts.items() if fid.startswith("todo:")
        }
        checks_since_user: dict[str, EntryView] = {}

        for e in j.entries:
            if e.kind == "message" and e.role == "user" and is_pin_source(e):
                checks_since_user = {}
                for n, sentence in enumerate(user_decisions(e)):
                    ops.append(
                        {
                            "op": "add",
                            "fact": {
                                "id": f"decision:{e.entry_hash[:16]}.{n}",
                                "category": "decision",
                                "priority": "P1",
                                "confidence": "reported",
                                "text": f"User decided: {sentence}",
                                "support": [{"entry": e.entry_hash, "quote": sentence}],
                                "author": "offline",
                            },
                        }
                    )
            elif e.kind == "message" and e.role == "assistant":
                for n, sentence in enumerate(assistant_claims(e)):
                    cited = [r.entry_hash for r in checks_since_user.values()]
                    ops.append(
                        {
                            "op": "add",
                            "fact": {
                                "id": f"claim:{e.entry_hash[:16]}.{n}",
                                "category": "verified_state",
                                "priority": "P2",
                                "confidence": "reported",
                                "text": f"Assistant reported: {sentence}",
                                "support": [{"entry": e.entry_hash, "quote": sentence}]
                                + [{"entry": h} for h in cited],
                                "author": "offline",
                            },
                        }
                    )
            elif e.kind == "event" and not e.derived and _is_error_event(e):
                detail = _clip(str(e.content.get("error") or e.content.get("text") or ""), 300)
                ops.append(
                    {
                        "op": "add",
                        "fact": {
                            "id": f"event:{e.entry_hash[:16]}",
                            "category": "blocker",
                            "priority": "P1",
                            "confidence": "reported",
                            "text": f"FAILED: the runtime reported an error: {detail}",
                            "support": [{"entry": e.entry_hash}],
                            "author": "offline",
                            "outcome": "failure",
                        },
                    }
                )
            elif e.kind == "tool_call":
                result = j.results.get(e.tool_call_id)
                items = plan_items(e)
                if items is not None and result is not None and not result.is_error:
                    ops += _plan_ops(e, result, items, todo_state)
                    continue
                if result is None:
                    fact = interrupted_fact(e)
                    fact["author"] = "offline"
                    ops.append({"op": "add", "fact": fact})
                    continue
                fact = self._outcome(j, e, result)
                key = fact.get("command_key")
                previous = by_command.get(key) if key else None
                if previous is not None:
                    ops.append({"op": "supersede", "id": previous, "fact": fact})
                else:
                    ops.append({"op": "add", "fact": fact})
                if key:
                    by_command[key] = fact["id"]
                cmd = command_of(e)
                if cmd and is_check_command(cmd):
                    checks_since_user[cmd] = result
        return ops

    def _outcome(self, j: EvidenceIndex, call: EntryView, result: EntryView) -> Fact:
        cmd = command_of(call)
        run = j.test_run(result)
        if run is not None or (cmd and is_test_command(cmd)):
            return _test_fact(call, result, cmd, run)
        fact = outcome_fact(call, result)
        fact["author"] = "offline"
        if result.is_error:
            detail = _error_line(str(result.content.get("output") or result.text))
            head = fact["text"].split("): ", 1)[0] + ")" if "): " in fact["text"] else ""
            if detail and head and detail not in fact["text"]:
                fact["text"] = f"{head}: {_clip(detail, 200)}"
        if cmd:
            fact["command"] = cmd
            fact["command_key"] = f"{call.tool_name}:{cmd}"
        output = result.content.get("output")
        if not result.is_error and not is_routine_read(call) and isinstance(output, str):
            first = _clip(_first_line(output), 160)
            if first:
                fact["text"] += f"; output begins: {first}"
        return fact


_ERROR_LINE = re.compile(
    r"(?i)\berror\b|\bfail|denied|not found|unable to|cannot|exception|traceback|^E: |fatal"
)


def _error_line(output: str) -> str:
    """The line of a failed command's output that says what went wrong (else the last one)."""
    lines = [ln.strip() for ln in ANSI.sub("", output).splitlines() if ln.strip()]
    for line in lines:
        if _ERROR_LINE.search(line):
            return line
    return lines[-1] if lines else ""


def _is_error_event(e: EntryView) -> bool:
    kind = str(e.content.get("type", ""))
    return bool(e.is_error or e.content.get("is_error") or kind in ("error", "run_error"))


def _test_fact(call: EntryView, result: EntryView, cmd: str, run: RunCounts | None) -> Fact:
    scope = run_scope(cmd) if cmd else None
    where = f" (scope: {scope})" if scope else " (whole suite)" if cmd else ""
    exit_code = result.content.get("exit_code")
    code = f", exit {exit_code}" if exit_code is not None else ""
    what = f"`{_clip(cmd, 160)}`" if cmd else f"`{call.tool_name}`"
    failed = result.is_error or (run is not None and not run.ok)
    counts = run.summary() if run is not None else "no test summary in the output"
    fact: Fact = {
        "id": f"test:{result.entry_hash[:16]}",
        "category": "blocker" if failed else "verified_state",
        "priority": "P1",
        "lifecycle": "active",
        "confidence": "verified",
        "text": ("FAILED: " if failed else "") + f"test run {what}{where}: {counts}{code}",
        "support": [{"entry": call.entry_hash}, {"entry": result.entry_hash}],
        "author": "offline",
        "outcome": "failure" if failed else "success",
        "test": {**(run.to_dict() if run else {}), "scope": scope},
    }
    if cmd:
        fact["command"] = cmd
        fact["command_key"] = f"{call.tool_name}:{cmd}"
    return fact


def _plan_ops(
    call: EntryView, result: EntryView, items: list[tuple[str, str]], todo_state: dict[str, str]
) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    for text, status in items:
        fid = f"todo:{_h(text.lower())}"
        known = todo_state.get(fid)
        if known is None:
            ops.append(
                {
                    "op": "add",
                    "fact": {
                        "id": fid,
                        "category": "open_obligation",
                        "priority": "P1",
                        "confidence": "reported",
                        "text": f"Planned ({call.tool_name}): {text}",
                        "support": [{"entry": call.entry_hash}],
                        "author": "offline",
                        "plan_status": status,
                    },
                }
            )
            todo_state[fid] = "active"
            known = "active"
        if status in DONE and known == "active":
            ops.append(
                {
                    "op": "close",
                    "id": fid,
                    "evidence": [call.entry_hash, result.entry_hash],
                    "reason": f"marked {status} in {call.tool_name}",
                }
            )
            todo_state[fid] = "closed"
    return ops


# --------------------------------------------------------------------------- the rules


@dataclass(frozen=True)
class RuleVerdict:
    """The rules' two verdicts on one item (same shape as the verifier model's)."""

    entailment: str = "entailed"
    entailment_reason: str = "no rule applies"
    temporal: str = "valid"
    temporal_reason: str = "no rule applies"

    @property
    def accepted(self) -> bool:
        return self.entailment == "entailed" and self.temporal == "valid"


def _hashes(items: Iterable[Any]) -> list[str]:
    out = []
    for s in items:
        if isinstance(s, dict) and isinstance(s.get("entry"), str):
            out.append(s["entry"])
        elif isinstance(s, str):
            out.append(s)
    return out


def check_item(
    op: Mapping[str, Any], journal: EvidenceIndex, state: Mapping[str, Any]
) -> RuleVerdict:
    """The verifier's rubric applied mechanically to one op (DESIGN.md 5.3, module docstring).

    Args:
        op: an ``add``/``supersede`` (judged on its fact) or ``close`` op.
        journal: the covered entries plus the earlier entries the op or state cites.
        state: the ledger state before the fold (obligations an op would close).

    Returns:
        :class:`RuleVerdict`; rejection reasons name the entry (``sha256:<hex>``) at fault.
    """
    entail: list[str] = []
    temporal: list[str] = []
    if op.get("op") in ("add", "supersede") and isinstance(op.get("fact"), dict):
        fact = op["fact"]
        cited = [
            journal.by_hash[h] for h in _hashes(fact.get("support", [])) if h in journal.by_hash
        ]
        results = [v for v in cited if v.kind == "tool_result"]
        runs = [(r, journal.test_run(r)) for r in results]
        tests = [
            (r, run) for r, run in runs if run is not None or is_test_command(journal.command(r))
        ]
        text = str(fact.get("text", ""))
        if is_success_claim(fact):
            for r in results:
                if journal.failed(r):
                    entail.append(
                        f"a success claim cannot cite a failed result: sha256:{r.entry_hash} "
                        f"({_describe_result(journal, r)})"
                    )
        if is_universal(text) and TEST_WORDS.search(text) and results:
            if not tests:
                entail.append(
                    "a claim about all tests is not entailed by results that are not test runs"
                )
            elif all(run_scope(journal.command(r)) for r, _ in tests) and not _counted(
                text, [run for _, run in tests]
            ):
                scopes = "; ".join(
                    f"`{run_scope(journal.command(r))}`" + (f" {run.summary()}" if run else "")
                    for r, run in tests
                )
                entail.append(
                    "a universal claim is not entailed by scoped evidence: the cited run "
                    f"covers only {scopes}"
                )
        if is_success_claim(fact) and not fact.get("outcome"):
            # a tool outcome states what happened at its seq; a claim must still hold
            for r in results:
                later = _later_failure(journal, r)
                if later is not None:
                    temporal.append(
                        f"stale evidence: a later run of the same command failed "
                        f"(seq {later.seq}, sha256:{later.entry_hash})"
                    )
    elif op.get("op") == "close":
        target = state.get("facts", {}).get(str(op.get("id", "")))
        opened = [
            journal.by_hash[h].seq
            for h in _hashes((target or {}).get("support", []))
            if h in journal.by_hash
        ]
        evidence = [
            journal.by_hash[h] for h in _hashes(op.get("evidence", [])) if h in journal.by_hash
        ]
        done = [v for v in evidence if v.kind == "tool_result" and not journal.failed(v)]
        if opened and done and max(v.seq for v in done) < max(opened):
            temporal.append(
                "completion evidence predates the obligation it would close (seq "
                f"{max(v.seq for v in done)} < {max(opened)}); a later timestamp is not evidence"
            )
        if evidence and not done:
            entail.append("no cited result demonstrates completion (failed or not a tool result)")
    return RuleVerdict(
        entailment="not_entailed" if entail else "entailed",
        entailment_reason="; ".join(entail) or "no rule applies",
        temporal="invalid" if temporal else "valid",
        temporal_reason="; ".join(temporal) or "no rule applies",
    )


def _counted(text: str, runs: Sequence[RunCounts | None]) -> bool:
    """The claim names the number of tests, and a cited run shows exactly that many."""
    named = {int(n) for n in re.findall(r"\b(\d+)\s+(?:\w+\s+)?(?:tests?|specs?)\b", text)}
    return any(run is not None and {run.total, run.passed} & named for run in runs)


def _describe_result(journal: EvidenceIndex, result: EntryView) -> str:
    cmd = journal.command(result)
    run = journal.test_run(result)
    what = f"`{_clip(cmd, 80)}`" if cmd else f"`{result.tool_name or 'tool'}`"
    code = result.content.get("exit_code")
    detail = (
        run.summary()
        if run is not None
        else ("failed" + (f", exit {code}" if code is not None else ""))
    )
    return f"{what} {detail}"


def _later_failure(journal: EvidenceIndex, result: EntryView) -> EntryView | None:
    cmd = journal.command(result)
    if not cmd or journal.failed(result):
        return None
    for e in journal.entries:
        if (
            e.kind == "tool_result"
            and e.seq > result.seq
            and journal.command(e) == cmd
            and journal.failed(e)
        ):
            return e
    return None
