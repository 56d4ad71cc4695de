"""A generated session with source times and provider usage, shaped like an agent's run:
used by the 20k browser walk (tests/browser/test_daily_walk_20k.py) and by
scripts/page_timings.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from journal_app.formats.base import ParsedEntry, message, tool_call, tool_result

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


def timed_items(n: int) -> list[ParsedEntry]:
    """A generated session of ``n`` entries with source times and provider usage: per step an
    assistant message (a model call of 1-3 s, priced), a shell call and its result (every
    97th fails; every 50th names the refund bug)."""
    items = [message("user", "Run every check and fix what fails.")]
    items[0].metadata["timestamp"] = T0.isoformat()
    clock = T0
    i = 0
    while len(items) < n:
        failed = i % 97 == 0
        clock += timedelta(seconds=1 + i % 3)
        answer = message("assistant", f"Step {i}: running check {i}.")
        answer.metadata.update(
            timestamp=clock.isoformat(),
            model="gpt-5-codex",
            usage={"input_tokens": 2_000 + i % 500, "output_tokens": 40},
        )
        call = tool_call(f"c{i}", "exec", {"command": f"pytest -k t{i}"})
        call.metadata["timestamp"] = clock.isoformat()
        clock += timedelta(milliseconds=300 + 700 * (i % 5))
        note = " refund rounding off by one cent" if i % 50 == 0 else ""
        result = tool_result(
            f"c{i}",
            f"check {i}: {'FAILED' if failed else 'ok'}{note} " + "x" * 100,
            exit_code=1 if failed else 0,
            is_error=failed,
        )
        result.metadata["timestamp"] = clock.isoformat()
        items += [answer, call, result]
        i += 1
    return items[:n]
