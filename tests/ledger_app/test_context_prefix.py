"""What precedes the tail is a function of the last fold (docs/design.md 6: pins, then the
continuation record, then the tail), so provider prompt caches stay warm between folds."""

from __future__ import annotations

import pytest

from journal_app.formats.base import message, tool_call, tool_result
from ledger_app.context import CHECKPOINT_MARK, build_context
from tests.ledger_app.test_context import views
from tests.support.offline_fold import offline_fold


def _items(rounds: int, short: int) -> list:
    items = [message("system", "You are careful."), message("user", "Audit the repo.")]
    for n in range(rounds):
        items.append(tool_call(f"c{n}", "cat", {"n": n}))
        items.append(tool_result(f"c{n}", f"file {n}: " + f"line {n} " * 150, name="cat"))
    for n in range(short):
        items.append(message("assistant", f"answer {n}"))
        items.append(message("user", f"next {n}"))
    return items


def _build(entries, ledger, covered, fmt="openai", fold=None):
    return build_context(
        entries=entries,
        ledger=ledger,
        covered_upto=covered,
        working_budget=6_000,
        hard_limit=200_000,
        target_format=fmt,
        fold=fold,
    )


def _checkpoint(view: dict) -> str:
    for m in view["messages"]:
        content = m["content"]
        texts = [content] if isinstance(content, str) else [b.get("text", "") for b in content]
        for t in texts:
            if isinstance(t, str) and t.startswith(CHECKPOINT_MARK):
                return t
    return ""


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_short_messages_after_a_fold_leave_everything_before_the_tail_unchanged(fmt):
    folded = views(_items(40, 0))
    ledger, covered = offline_fold(folded, upto=folded[-1].seq)
    built = []
    for short in range(5):
        entries = views(_items(40, short))
        result = _build(entries, ledger, covered, fmt)
        assert result.status == "ok"
        built.append(result)
    ranges = {tuple(r.debug_trace["rounds"]["folded_out"][-1]) for r in built}
    assert len(ranges) == 1  # the checkpoint names the fold's range, not the tail's
    assert len({_checkpoint(r.model_view) for r in built}) == 1
    assert _checkpoint(built[0].model_view)
    for before, after in zip(built, built[1:], strict=False):
        kept = before.model_view["messages"][:-1]  # the task state is last; the rest stays
        assert after.model_view["messages"][: len(kept)] == kept


def test_a_fold_asked_for_leaves_room_for_the_calls_after_it():
    """A fold is asked when the request is over the budget after the last fold's rounds are
    out, and then leaves room: the next calls, one tool round (about 300 tokens) each, build
    without one for a while (not a fold per call)."""
    asked = []

    def fold(upto):
        asked.append(extra)
        return offline_fold(entries, upto=upto)

    ledger, covered = None, 0
    for extra in range(6):
        entries = views(_items(40 + extra, 0))
        result = _build(entries, ledger, covered, fold=fold)
        assert result.status == "ok"
        ledger, covered = result.ledger, result.covered_upto
    assert asked[0] == 0 and (len(asked) == 1 or asked[1] >= 4), asked


def test_a_system_prompt_sent_as_several_blocks_stays_several_blocks():
    items = _items(40, 1)
    mark = {"type": "ephemeral"}
    items[0] = message("system", "You are careful.\nNever push to main.")
    items[0].content["blocks"] = [
        {"type": "text", "text": "You are careful."},
        {"type": "text", "text": "Never push to main.", "cache_control": mark},
    ]
    entries = views(items)
    ledger, covered = offline_fold(entries, upto=entries[-8].seq)
    result = _build(entries, ledger, covered, "anthropic")
    assert result.status == "ok"  # the pin is found whole: the blocks' join
    assert result.model_view["system"] == [
        {"type": "text", "text": "You are careful."},
        {"type": "text", "text": "Never push to main."},  # the proxy puts the marker back
    ]
