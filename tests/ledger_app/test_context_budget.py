"""The context builder honest about its budget and linear in the session (and 15).

Pure tests (no database): what the plan counts (call ids, redactions, the tools schema, notes),
the last pass, provider figures first, success at a budget implying success at every larger
one, and the work of a build growing linearly with the session (a count, never a time).
"""

from __future__ import annotations

import functools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.generator import session
from journal_app.formats import parse_path
from journal_app.formats.base import message, tool_call, tool_result
from ledger_app.context import build_context
from ledger_app.validation import Meter, validate_request
from tests.ledger_app.test_context import CORPUS_FILES, build, views
from tests.support.offline_fold import offline_fold

SECRET_LINE = "export OPENAI_API_KEY=sk-proj-PLACEHOLDERplaceholderPLACEHOLDER0000"


def checked(entries, result, budget, fmt="openai", tools=None):
    """An ``ok`` build is valid and within ``budget`` by an independent count."""
    if result.status != "ok":
        return False
    view = result.model_view
    request = {k: v for k, v in view.items() if k != "format"}
    extra = {"tools": tools} if tools else {}
    report = validate_request(request, fmt=fmt, working_budget=budget, hard_limit=budget, **extra)
    assert report.ok, [p.message for p in report.problems]
    assert report.tokens == result.report.tokens <= budget
    return True


def secret_session(rounds: int = 14, line: str = SECRET_LINE) -> list:
    items = [message("user", "Set up the deploy keys and run the checks.")]
    for n in range(rounds):
        items += [
            tool_call(f"call_{n:04d}_abcdefghijkl", "exec", {"command": f"cat env{n}"}),
            tool_result(f"call_{n:04d}_abcdefghijkl", f"{line}\n" * 6 + f"step {n}\n"),
        ]
    items.append(message("assistant", "Checked."))
    return views(items)


# ------------------------------------------------------------------ what the plan counts


def test_the_meter_counts_tool_call_ids_in_both_formats():
    meter = Meter()
    cid = "call_Zx81hQ2mPq0LkV7s9"
    openai_call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": cid, "type": "function", "function": {"name": "f", "arguments": ""}}],
    }
    assert meter.message(openai_call) == 4 + meter.text("f") + meter.text(cid)
    assert meter.message({"role": "tool", "tool_call_id": cid, "content": "ok"}) == (
        4 + meter.text("ok") + meter.text(cid)
    )
    use = {"type": "tool_use", "id": cid, "name": "f", "input": {}}
    result = {"type": "tool_result", "tool_use_id": cid, "content": "ok"}
    assert meter.message({"role": "assistant", "content": [use]}) == (
        4 + meter.text(cid) + meter.text("f") + meter.text("{}")
    )
    assert meter.message({"role": "user", "content": [result]}) == (
        4 + meter.text(cid) + meter.text("ok")
    )


def test_redactions_and_call_ids_are_planned_for_so_every_ok_request_fits():
    entries = secret_session()
    fold = functools.lru_cache(maxsize=None)(lambda upto: offline_fold(entries, upto=upto))
    oks = []
    for budget in range(300, 2400, 50):
        result = build(entries, budget, fold=fold)
        oks.append(checked(entries, result, budget))
        if result.status == "ok":
            assert result.debug_trace["redactions"] > 0 or budget < 400
    # once it succeeds it keeps succeeding: the plan counted the redaction marks
    first = oks.index(True)
    assert all(oks[first:]), oks


def test_the_tools_schema_counts_against_the_budget():
    entries = secret_session(4)
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": "Run a shell command in the sandbox and return its output. " * 4,
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
            },
        }
        for i in range(6)
    ]
    plain = build(entries, 100_000)
    schema = Meter().tools(tools)
    assert schema > 200
    with_tools = build(entries, 100_000, tools=tools)
    assert with_tools.report.tokens == plain.report.tokens + schema
    assert with_tools.debug_trace["tokens"]["tools"] == schema
    # a budget the messages alone fit in, but not with the schema: compaction has to happen
    tight = plain.report.tokens + schema // 2
    squeezed = build(entries, tight, tools=tools)
    assert checked(entries, squeezed, tight, tools=tools)
    assert any(d["action"] in ("fold", "shrink") for d in squeezed.debug_trace["decisions"])
    assert squeezed.report.tokens <= tight


# ------------------------------------------------------------------ provider figures first


def with_usage(entries, input_tokens):
    last = max(e.seq for e in entries if e.role == "assistant" and e.kind == "message")
    out = []
    for e in entries:
        if e.seq == last:
            e = e.__class__(
                **{**e.__dict__, "meta": {**e.meta, "usage": {"input_tokens": input_tokens}}}
            )
        out.append(e)
    return out


def test_provider_usage_above_our_estimate_calibrates_the_decisions():
    entries = secret_session(10, line="the build step printed its usual progress line")
    base = build(entries, 100_000)
    own = base.report.tokens
    assert base.debug_trace["tokens"]["calibration"]["applied"] is False
    # the provider counted about twice what we count: a budget that fits by our count alone
    budget = int(own * 1.3)
    ours = build(entries, budget)
    assert ours.status == "ok" and not any(
        d["action"] == "fold" for d in ours.debug_trace["decisions"]
    )
    calibrated_entries = with_usage(entries, own * 2)
    result = build(calibrated_entries, budget)
    cal = result.debug_trace["tokens"]["calibration"]
    assert cal["applied"] and 1.5 < cal["ratio"] < 2.5
    assert result.debug_trace["tokens"]["decisions_source"].startswith("provider-calibrated")
    assert cal["limit"] < budget
    assert any(d["action"] == "calibrate" for d in result.debug_trace["decisions"])
    assert result.status == "ok" and result.report.tokens <= cal["limit"]


def test_provider_usage_below_our_estimate_is_reported_not_applied():
    entries = with_usage(secret_session(10), 50)
    result = build(entries, 100_000)
    cal = result.debug_trace["tokens"]["calibration"]
    assert cal["provider"]["input_tokens"] == 50 and cal["applied"] is False
    assert "our own count decides" in cal["decisions_source"]


# ------------------------------------------------------------------ monotone in the budget


@functools.cache
def corpus_entries(name: str):
    path = next(p for p in CORPUS_FILES if p.name == name)
    return views(parse_path(path).entries)


@functools.cache
def generated_entries(n: int, seed: int):
    return views(session(n, seed=seed, size_scale=0.05))


@functools.cache
def folded(key, upto):
    entries = corpus_entries(key[1]) if key[0] == "corpus" else generated_entries(*key[1:])
    return offline_fold(entries, upto=upto)


def outcome(key, budget: int, fmt: str) -> bool:
    entries = corpus_entries(key[1]) if key[0] == "corpus" else generated_entries(*key[1:])
    result = build_context(
        entries=entries,
        working_budget=budget,
        hard_limit=budget,
        target_format=fmt,
        fold=lambda upto: folded(key, upto),
    )
    return checked(entries, result, budget, fmt)


SMALL_CORPUS = sorted(p.name for p in CORPUS_FILES if p.stat().st_size < 400_000)
SOURCES = st.one_of(
    st.sampled_from([("corpus", name) for name in SMALL_CORPUS]),
    st.tuples(st.just("generated"), st.integers(20, 90), st.integers(0, 3)),
)


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    key=SOURCES,
    budget=st.integers(300, 24_000),
    more=st.integers(1, 6_000),
    fmt=st.sampled_from(["openai", "anthropic"]),
)
def test_success_at_a_budget_implies_success_at_every_larger_budget(key, budget, more, fmt):
    if outcome(key, budget, fmt):
        assert outcome(key, budget + more, fmt), (key, budget, budget + more, fmt)


# ------------------------------------------------------------------ linear in the session


def measured(n: int) -> tuple[int, int]:
    entries = generated_entries(n, 7)
    result = build_context(
        entries=entries,
        working_budget=4_000,
        hard_limit=4_000,
        fold=lambda upto: offline_fold(entries, upto=upto),
    )
    return len(entries), result.debug_trace["tokens"]["measured_texts"]


def test_the_texts_a_build_measures_grow_linearly_with_the_session():
    n1, m1 = measured(400)
    n2, m2 = measured(1_600)
    # four times the entries: about four times the measurements (quadratic would be ~16x)
    assert m2 / m1 <= 1.5 * n2 / n1, (m1, m2)
    assert m2 <= 40 * n2


def test_a_generated_session_that_used_to_fail_above_its_floor_succeeds_at_every_budget():
    # before issue 15 this session succeeded at 575 tokens and failed at 600, 750, 775, 1525;
    # its file writes are P1 since (consequential, docs/design.md 5.5), which raises the floor
    entries = generated_entries(90, 2)
    fold = functools.lru_cache(maxsize=None)(lambda upto: offline_fold(entries, upto=upto))
    budgets = range(200, 4200, 50)
    oks = [checked(entries, build(entries, b, fold=fold), b) for b in budgets]
    assert True in oks
    first = oks.index(True)
    assert all(oks[first:]), [b for b, ok in list(zip(budgets, oks, strict=True))[first:] if not ok]
