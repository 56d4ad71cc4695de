"""The verifier's rubric applied mechanically (docs/design.md 5.3). Pure.

:func:`check_item` judges the offline writer's items and every model writer item alike:

* a universal claim ("all tests pass") backed by scoped evidence (one test file) is not
  entailed; nor is a universal test claim citing no test run at all;
* a success claim citing a failed result is not entailed;
* evidence made stale by a later failed run of the same command is temporally invalid;
* completion evidence older than the obligation it would close is temporally invalid;
* a success claim (deployed, passed, fixed, live, ...) not written from a tool outcome needs a
  cited execution result that did not fail: a read, a search or a message (the assistant's own
  words) never suffices, whatever the verifier model says;
* a success claim naming an environment (production, live, released) needs a cited execution
  result that names that environment: staging evidence does not support a production claim
  (:func:`environment_problem`);
* a claim naming test files is supported by a scoped test run only within its scope: a run
  of ``tests/test_refunds.py`` does not show ``tests/test_orders.py`` passing
  (:func:`scope_problem`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger_app.entry_view import EntryView
from ledger_app.fact_text import clip, redact
from ledger_app.mechanical import is_routine_read
from ledger_app.offline.evidence import EvidenceIndex
from ledger_app.offline.heuristics import TEST_WORDS, is_success_claim, is_universal
from ledger_app.offline.testruns import RunCounts, is_test_command, run_scope
from ledger_app.outcomes import read_outcome


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
    """The verifier's rubric applied mechanically to one op (docs/design.md 5.3, module docstring).

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
        # a reported history fact ("Assistant concluded (seq 9): deployed ...") records who
        # said what; it claims nothing, so the success-claim rules do not apply to it
        attribution = fact.get("category") == "history" and fact.get("confidence") == "reported"
        claim = is_success_claim(fact) and not attribution
        if claim:
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
                    f"`{redact(run_scope(journal.command(r)) or '')}`"
                    + (f" {run.summary()}" if run else "")
                    for r, run in tests
                )
                entail.append(
                    "a universal claim is not entailed by scoped evidence: the cited run "
                    f"covers only {scopes}"
                )
        if claim and not fact.get("outcome") and OVERCLAIM.search(text):
            if not any(_executed(journal, r) for r in results):
                entail.append(
                    "a success claim (deployed, passed, fixed, live) needs an execution result "
                    "that shows it; it cites only "
                    + (_kinds(journal, cited) or "nothing from the journal")
                )
        if claim and not fact.get("outcome"):
            executed = [r for r in results if _executed(journal, r)]
            env = environment_problem(text, [_run_text(journal, r) for r in executed])
            if env and executed:
                entail.append(env)
            scoped = [run_scope(journal.command(r)) for r, _ in tests]
            if tests and all(scoped):
                problem = scope_problem(text, [s for s in scoped if s])
                if problem:
                    entail.append(problem)
        if claim and not fact.get("outcome"):
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


#: Words of a success claim that only an execution result can support.
OVERCLAIM = re.compile(
    r"\b(?:deploy(?:ed|ment succeeded)|pass(?:es|ed|ing)?|fixed|resolved|is live|went live|"
    r"(?:now )?live\b|succeed(?:s|ed)|green|works|working|merged|released|published|shipped)\b",
    re.I,
)


#: Environments a claim or a result can name: production (live, released) and the others.
PRODUCTION = re.compile(r"\b(?:prod|production|live|released?|publish(?:ed)?)\b", re.I)
PRODUCTION_RESULT = re.compile(r"\b(?:prod|production|live|release[sd]?|publish(?:ed)?)\b", re.I)
NON_PRODUCTION = re.compile(
    r"\b(?:staging|stage|stg|preview|dev|development|sandbox|qa|uat|test(?:ing)? env\w*)\b",
    re.I,
)
#: A test file named in a claim or a run's scope (``tests/test_x.py``, ``a.test.tsx``).
TEST_FILE = re.compile(
    r"[\w./-]*(?:\btest_\w+\.py|\w+_test\.(?:py|go)|\w+\.(?:test|spec)\.[jt]sx?)\b"
)


def environment_problem(claim: str, results: Sequence[str]) -> str:
    """Why execution results ``results`` (each its command and output) do not support an
    environment named by ``claim``; ``""`` when they do or the claim names none.

    A claim naming production (production, prod, live, released, published) needs a result
    naming production; a result naming only staging (or dev, preview, QA...) is another
    environment. Table-driven tests: ``tests/ledger_app/test_rules_environments.py``.
    """
    if not PRODUCTION.search(claim):
        return ""
    if any(PRODUCTION_RESULT.search(r) for r in results):
        return ""
    named = sorted({m.group(0).lower() for r in results for m in NON_PRODUCTION.finditer(r)})
    where = f"they name {', '.join(named)}" if named else "they name no environment"
    return (
        "a claim about production (production, live, released) needs an execution result "
        f"naming that environment; {where}"
    )


def scope_problem(claim: str, scopes: Sequence[str]) -> str:
    """Why scoped test runs (``scopes``, e.g. ``["tests/test_refunds.py"]``) do not cover
    the test files ``claim`` names; ``""`` when every named file is in a scope, or the
    claim names none."""
    named = {m.group(0).strip("./") for m in TEST_FILE.finditer(claim)}
    outside = sorted(f for f in named if not any(f in s or s.endswith(f) for s in scopes))
    if not outside:
        return ""
    covered = "; ".join(f"`{clip(redact(s), 80)}`" for s in scopes)
    return (
        f"a scoped test run supports claims within its scope only: it covers {covered}, "
        f"not {', '.join(outside)}"
    )


def _run_text(journal: EvidenceIndex, result: EntryView) -> str:
    """A result's command and output, as the environment rule reads them."""
    return f"{journal.command(result)}\n{result.content.get('output', '') or result.text}"


def _executed(journal: EvidenceIndex, result: EntryView) -> bool:
    """A result of a call that ran something (not a read or a search) and did not fail."""
    call = journal.call_of(result)
    if call is None or journal.failed(result) or is_routine_read(call):
        return False
    args = call.content.get("arguments")
    seen = read_outcome(
        tool_name=call.tool_name,
        arguments=args if isinstance(args, dict) else {},
        command=journal.command(call),
        output=str(result.content.get("output", "")),
        is_error=result.is_error,
        result_content=result.content,
    )
    return seen.kind in ("success", "submitted")


def _kinds(journal: EvidenceIndex, cited: Sequence[EntryView]) -> str:
    """What a claim cites, named by kind: ``a read or search result (sha256:...)``, ..."""
    names = []
    for v in cited:
        if v.kind != "tool_result":
            names.append(f"a {v.role} {v.kind} (sha256:{v.entry_hash})")
        elif journal.failed(v):
            names.append(f"a failed result (sha256:{v.entry_hash})")
        else:
            names.append(f"a read or search result (sha256:{v.entry_hash})")
    return "; ".join(names)


def _counted(text: str, runs: Sequence[RunCounts | None]) -> bool:
    """The claim names the number of tests, and a cited run shows exactly that many."""
    named = {int(n) for n in re.findall(r"\b(\d+)\s+(?:\w+\s+)?(?:tests?|specs?)\b", text)}
    return any(run is not None and {run.total, run.passed} & named for run in runs)


def _describe_result(journal: EvidenceIndex, result: EntryView) -> str:
    cmd = journal.command(result)
    run = journal.test_run(result)
    what = f"`{clip(redact(cmd), 80)}`" if cmd else f"`{result.tool_name or 'tool'}`"
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
