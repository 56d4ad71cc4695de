"""Test runs in tool output: counts, commands and scope (docs/design.md 5.3, offline writer). Pure.

:func:`parse_test_output` reads the counts of the last test summary (pytest, unittest, jest,
vitest, go test, cargo test); :func:`is_test_command` and :func:`is_check_command` tell which
commands a claim "all tests/checks pass" may rest on; :func:`run_scope` names the part of the
suite a command selects (``None`` for a whole suite), so one test file is never read as "all
tests".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


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
