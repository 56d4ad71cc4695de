"""Realistic synthetic agent journals at any size, shaped like the real corpus.

Pure module: no Django, no database. :func:`iter_session` streams
:class:`~journal_app.formats.base.ParsedEntry` items (so a 1,000,000-entry journal never has
to sit in memory), :func:`session` returns a list, :func:`write_openai_chat` writes one as a
Chat Completions message list that the ``openai-chat`` importer reads back.

Shape of a session: an optional system and developer message, a user goal, then API rounds
(optional reasoning, optional assistant text, 0-4 tool calls, then their results, some
failed), now and then a new user message or a runtime event between rounds.

Where the numbers come from: every figure in :data:`PROFILE` was measured from the ten
sources in ``tests/fixtures/corpus/`` (a copy of ``shared/corpus/``: 1,323 entries, 458 API
rounds, 441 tool results) by ``python -m bench.generator --measure``, which parses them with
the product's own importers, groups them with :func:`journal_app.rounds.group_rounds`, and
prints this table. Sizes are UTF-8 bytes at the quantiles in :data:`QUANTILES`; a size is
drawn by inverse-CDF sampling with log-linear interpolation between quantiles. Re-run the
command after the corpus changes and paste its output here.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from journal_app.formats.base import ParsedEntry, message, tool_call, tool_result

QUANTILES = (0.0, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99, 1.0)

# Measured by `python -m bench.generator --measure` over tests/fixtures/corpus (10 sources,
# 1,323 entries). Byte sizes at QUANTILES; rates are per API round or per tool result.
PROFILE: dict[str, Any] = {
    "bytes": {
        # message text by role
        "system": [542, 542, 1786, 5586, 6155, 6155, 6155, 6155, 6155],
        "developer": [250, 250, 250, 270, 270, 270, 270, 270, 270],
        "user": [3, 43, 80, 335, 927, 1022, 3109, 5136, 5136],
        "assistant": [2, 48, 90, 161, 377, 950, 1591, 10769, 12704],
        # canonical JSON of a reasoning entry's content
        "reasoning": [42, 972, 1052, 1470, 3780, 13794, 20904, 37382, 40186],
        # canonical JSON of a tool call's arguments
        "arguments": [2, 43, 76, 139, 192, 597, 1045, 5560, 12977],
        # tool output text: successful and failed results
        "output": [0, 45, 117, 706, 4222, 13046, 21086, 49724, 868147],
        "output_error": [0, 38, 67, 158, 574, 2053, 10613, 10615, 10615],
        # canonical JSON of an entry's metadata (timestamps, ids, usage, source fields)
        "metadata": [2, 2, 40, 215, 1021, 1764, 4296, 23099, 69705],
        # runtime events (canonical JSON of the content)
        "event": [46, 46, 73, 123, 133, 138, 138, 144, 144],
    },
    # tool calls per API round: 0 (a final answer) to 4 (parallel calls); counts of 458 rounds
    "fan_out": {0: 33, 1: 415, 2: 3, 3: 5, 4: 2},
    "round_has_reasoning": 128 / 458,
    "round_has_text": 224 / 458,
    # authoritative messages between rounds: 44 user messages in 10 sessions, 10 of them goals
    "user_between_rounds": 34 / 458,
    "event_between_rounds": 34 / 458,
    "result_failed": 53 / 441,
    # provider usage on model-made entries: 334 of the 798 assistant messages, calls, reasoning
    "usage_on_model_entry": 334 / 798,
    "has_system": 4 / 10,
    "has_developer": 1 / 10,
}

TOOLS = (
    ("exec", "command"),
    ("read_file", "path"),
    ("edit_file", "patch"),
    ("grep", "pattern"),
    ("write_file", "content"),
    ("list_dir", "path"),
)

#: tools that write files, and how many distinct files a session's writes touch
FILE_WRITERS = ("edit_file", "write_file")
WORKING_SET = 120
#: how many distinct shell commands a session's ``exec`` calls run
WORKING_COMMANDS = 80

_WORDS = (
    "the a to of and in is for that it with on as be this was are not by or from at an "
    "test tests file files error failed passed run running build check value return def "
    "class import self None True False config settings migration database query index "
    "table row column user request response status 200 404 500 json path src lib api "
    "module function argument result output exit code line lines warning deprecated "
    "install package version update fix bug issue patch commit branch merge rebase "
    "refund billing payments invoice customer order total amount decimal round rounding "
    "assert assertEqual expected actual traceback Exception ValueError KeyError TypeError "
    "pytest tox make docker compose redis postgres worker celery task queue retry timeout"
).split()
_CODE = (
    "def f(x):",
    "    return x",
    "if not ok:",
    "for i in range(n):",
    "    assert a == b",
    "Traceback (most recent call last):",
    '  File "src/app/models.py", line 42, in save',
    "FAILED tests/test_refunds.py::test_round - AssertionError",
    "===== 3 failed, 141 passed in 2.31s =====",
    "$ git diff --stat",
    "{",
    '  "status": "ok",',
    "}",
)
_RARE = ("café", "naïve", "→", "✓", "日本語", "Größe", "😀")


def _pool(seed: int, size: int = 1 << 21) -> str:
    """A deterministic text pool (about ``size`` characters) that sizes are cut from."""
    rng = random.Random(seed)
    parts: list[str] = []
    n = 0
    while n < size:
        r = rng.random()
        if r < 0.08:
            piece = "\n" + rng.choice(_CODE) + "\n"
        elif r < 0.085:
            piece = " " + rng.choice(_RARE)
        else:
            piece = " " + " ".join(rng.choices(_WORDS, k=rng.randint(3, 14))) + rng.choice(".,:;")
        parts.append(piece)
        n += len(piece)
    return "".join(parts)


class SizeSampler:
    """Inverse-CDF sampling of a byte size from quantile points (log-linear in between)."""

    def __init__(self, points: list[int]) -> None:
        self.logs = [math.log1p(p) for p in points]

    def __call__(self, rng: random.Random) -> int:
        u = rng.random()
        i = min(bisect.bisect_right(QUANTILES, u), len(QUANTILES) - 1)
        lo_q, hi_q = QUANTILES[i - 1], QUANTILES[i]
        t = (u - lo_q) / (hi_q - lo_q) if hi_q > lo_q else 0.0
        return max(0, int(math.expm1(self.logs[i - 1] + t * (self.logs[i] - self.logs[i - 1]))))


class _Text:
    def __init__(self, seed: int) -> None:
        self.pool = _pool(seed)

    def cut(self, rng: random.Random, size: int) -> str:
        size = min(size, len(self.pool) - 1)
        start = rng.randrange(0, len(self.pool) - size) if size else 0
        return self.pool[start : start + size]


def iter_session(
    n_entries: int, *, seed: int = 0, size_scale: float = 1.0, profile: dict[str, Any] = PROFILE
) -> Iterator[ParsedEntry]:
    """Yield about ``n_entries`` entries of one synthetic session (at least ``n_entries``,
    ending with a complete round: at most 8 more).

    Args:
        n_entries: target entry count.
        seed: the same seed gives the same session, entry for entry.
        size_scale: multiplies every sampled byte size (``0.1`` for a cheap journal with the
            same shape, e.g. to measure memory against entry count alone).
        profile: distributions, :data:`PROFILE` by default.

    Yields:
        :class:`ParsedEntry` items with ``source_ref`` ``"gen[i]"``; every tool call has its
        result, parallel calls sit in one round, about 12% of results are failures.
    """
    rng = random.Random(seed)
    files = random.Random(seed + 0x5EED)  # its own stream: the other draws stay as they were
    commands: dict[int, str] = {}
    text = _Text(seed)
    sizes = {k: SizeSampler(v) for k, v in profile["bytes"].items()}

    def size(key: str) -> int:
        return int(sizes[key](rng) * size_scale)

    fan_values = list(profile["fan_out"])
    fan_weights = list(profile["fan_out"].values())
    count = 0
    call_no = 0

    def meta(model_made: bool) -> tuple[dict[str, Any], dict[str, Any] | None]:
        m: dict[str, Any] = {"timestamp": f"2025-01-01T00:00:{count % 60:02d}Z"}
        extra = size("metadata") - 40
        if extra > 0:
            m["source"] = text.cut(rng, extra)
        usage = None
        if model_made and rng.random() < profile["usage_on_model_entry"]:
            usage = {
                "input_tokens": rng.randint(1000, 200_000),
                "output_tokens": rng.randint(1, 4000),
            }
        return m, usage

    def emit(entry: ParsedEntry, model_made: bool = False) -> ParsedEntry:
        nonlocal count
        entry.metadata, entry.usage = meta(model_made)
        entry.source_ref = f"gen[{count}]"
        count += 1
        return entry

    if rng.random() < profile["has_system"]:
        yield emit(message("system", text.cut(rng, max(1, size("system")))))
    if rng.random() < profile["has_developer"]:
        yield emit(message("developer", text.cut(rng, max(1, size("developer")))))
    yield emit(message("user", text.cut(rng, max(1, size("user")))))
    while count < n_entries:
        if rng.random() < profile["round_has_reasoning"]:
            body = text.cut(rng, max(1, size("reasoning") - 12))
            yield emit(
                ParsedEntry(kind="reasoning", role="assistant", content={"text": body}), True
            )
        fan = rng.choices(fan_values, fan_weights)[0]
        if fan == 0 or rng.random() < profile["round_has_text"]:
            yield emit(message("assistant", text.cut(rng, max(1, size("assistant")))), True)
        calls = []
        for _ in range(fan):
            call_no += 1
            name, arg = rng.choice(TOOLS)
            call_id = f"call_{seed}_{call_no}"
            calls.append((call_id, name))
            args = {arg: text.cut(rng, max(1, size("arguments") - len(arg) - 6))}
            if name == "exec":
                # commands come back: an agent re-runs its tests and builds (OpenHands'
                # corpus run: 48 commands, 26 distinct; mini-swe-agent's: 69, 50), so a
                # session's commands are drawn from a working set of its own, sizes as sampled
                pick = files.randrange(WORKING_COMMANDS)
                if pick not in commands:
                    commands[pick] = args[arg]
                args[arg] = commands[pick]
            if name in FILE_WRITERS:
                # writes land on a working set of files, as an agent's do (docs/design.md 5.5:
                # a later write of a file supersedes the earlier one)
                args["path"] = f"src/module_{files.randrange(WORKING_SET)}.py"
            yield emit(tool_call(call_id, name, args), True)
        for call_id, name in calls:
            failed = rng.random() < profile["result_failed"]
            out = text.cut(rng, size("output_error" if failed else "output"))
            yield emit(
                tool_result(
                    call_id,
                    out,
                    is_error=failed,
                    exit_code=(1 if failed else 0) if name == "exec" else None,
                    name=name,
                )
            )
        if count >= n_entries:
            break
        if rng.random() < profile["user_between_rounds"]:
            yield emit(message("user", text.cut(rng, max(1, size("user")))))
        if rng.random() < profile["event_between_rounds"]:
            detail = text.cut(rng, max(1, size("event") - 30))
            yield emit(
                ParsedEntry(
                    kind="event", role="runtime", content={"type": "state", "detail": detail}
                )
            )


def session(n_entries: int, **kwargs: Any) -> list[ParsedEntry]:
    """:func:`iter_session` as a list."""
    return list(iter_session(n_entries, **kwargs))


def to_openai_chat(entries: list[ParsedEntry]) -> list[dict[str, Any]]:
    """The entries as a Chat Completions message list (reasoning and events are dropped:
    the format has no place for them; consecutive tool calls join one assistant message)."""
    out: list[dict[str, Any]] = []
    for e in entries:
        if e.kind == "message":
            out.append({"role": e.role, "content": e.content["text"]})
        elif e.kind == "tool_call":
            call = {
                "id": e.tool_call_id,
                "type": "function",
                "function": {"name": e.tool_name, "arguments": json.dumps(e.content["arguments"])},
            }
            last = out[-1] if out else None
            if last and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif e.kind == "tool_result":
            out.append(
                {"role": "tool", "tool_call_id": e.tool_call_id, "content": e.content["output"]}
            )
    return out


def write_openai_chat(path: str | Path, n_entries: int, **kwargs: Any) -> int:
    """Write a synthetic session to ``path`` as an ``openai-chat`` file; return its bytes."""
    data = json.dumps(to_openai_chat(session(n_entries, **kwargs)), ensure_ascii=False)
    Path(path).write_text(data, encoding="utf-8")
    return len(data.encode("utf-8"))


def _claude_code_records(entries: Iterator[ParsedEntry], session_id: str) -> Iterator[Any]:
    """The entries as Claude Code JSONL records (one content block per record, as Claude
    Code writes them; system/developer messages and runtime events have no place there)."""
    parent = None
    for i, e in enumerate(entries):
        block: dict[str, Any]
        if e.kind == "message" and e.role in ("user", "assistant"):
            role, block = e.role, {"type": "text", "text": e.content["text"]}
        elif e.kind == "reasoning":
            role, block = "assistant", {"type": "thinking", "thinking": e.content["text"]}
        elif e.kind == "tool_call":
            role = "assistant"
            block = {
                "type": "tool_use",
                "id": e.tool_call_id,
                "name": e.tool_name,
                "input": e.content["arguments"],
            }
        elif e.kind == "tool_result":
            role = "user"
            block = {
                "type": "tool_result",
                "tool_use_id": e.tool_call_id,
                "content": e.content["output"],
                "is_error": e.content["is_error"],
            }
        else:
            continue
        uuid = f"{session_id}-{i:09d}"
        yield {
            "type": role,
            "uuid": uuid,
            "parentUuid": parent,
            "sessionId": session_id,
            "timestamp": e.metadata.get("timestamp", ""),
            "message": {"role": role, "content": [block]},
        }
        parent = uuid


def write_large(
    path: str | Path, target_bytes: int, fmt: str = "claude-code", seed: int = 0
) -> int:
    """Write a synthetic session of about ``target_bytes`` (at least; stops after the first
    complete round past it) to ``path``, one entry at a time (constant memory, for the
    import memory benchmark, ``bench/memory.py``). Returns the bytes written.

    Args:
        fmt: ``"claude-code"`` (JSON Lines, ``claude-code-jsonl``) or ``"openai-chat"`` (one
            JSON message list, ``openai-chat``).
    """
    written = 0
    budget = [target_bytes]

    def entries() -> Iterator[ParsedEntry]:
        # an endless session cut after the first complete round past the byte target
        for e in iter_session(1 << 40, seed=seed):
            if budget[0] <= 0 and e.kind != "tool_result":
                return
            yield e

    with Path(path).open("w", encoding="utf-8") as fh:
        if fmt == "claude-code":
            for record in _claude_code_records(entries(), f"gen{seed}"):
                line = json.dumps(record, ensure_ascii=False) + "\n"
                fh.write(line)
                written += len(line.encode("utf-8"))
                budget[0] = target_bytes - written
        elif fmt == "openai-chat":
            fh.write("[")
            written = 1
            pending: dict[str, Any] | None = None  # an assistant message still taking calls
            first = True
            for e in entries():
                msgs = to_openai_chat([e])
                if not msgs:
                    continue
                m = msgs[0]
                if e.kind == "tool_call" and pending is not None:
                    pending.setdefault("tool_calls", []).extend(m["tool_calls"])
                    continue
                if pending is not None:
                    text = ("" if first else ",") + json.dumps(pending, ensure_ascii=False)
                    fh.write(text)
                    written += len(text.encode("utf-8"))
                    first = False
                    budget[0] = target_bytes - written
                pending = m if m["role"] == "assistant" else None
                if pending is None:
                    text = ("" if first else ",") + json.dumps(m, ensure_ascii=False)
                    fh.write(text)
                    written += len(text.encode("utf-8"))
                    first = False
                    budget[0] = target_bytes - written
            if pending is not None:
                text = ("" if first else ",") + json.dumps(pending, ensure_ascii=False)
                fh.write(text)
                written += len(text.encode("utf-8"))
            fh.write("]")
            written += 1
        else:
            raise ValueError(f"unknown format {fmt!r} (claude-code or openai-chat)")
    return written


def measure(corpus: Path) -> dict[str, Any]:
    """Measure :data:`PROFILE`'s figures from the transcripts in ``corpus``.

    Parses every source with the product's importers (``journal_app.formats.parse_path``)
    and groups rounds with ``journal_app.rounds.group_rounds``.
    """
    from dataclasses import dataclass

    from journal_app.formats import parse_path
    from journal_app.hashing import canonical_body
    from journal_app.rounds import group_rounds

    @dataclass
    class _E:
        seq: int
        kind: str
        role: str
        tool_call_id: str

    sources = sorted(
        p
        for p in corpus.glob("*/*")
        if p.is_file()
        and p.suffix in (".json", ".jsonl", ".traj")
        and p.parent.name != "opencode-export"
    ) + sorted(p for p in (corpus / "opencode-export").glob("*") if p.is_dir())
    sizes: dict[str, list[int]] = {k: [] for k in PROFILE["bytes"]}
    fan: dict[int, int] = {}
    rounds_n = reasoning = texts = results = failed = usage = model_made = 0
    systems = developers = users = 0
    entries_n = 0
    for path in sources:
        entries = parse_path(path).entries
        entries_n += len(entries)
        systems += any(e.kind == "message" and e.role == "system" for e in entries)
        developers += any(e.kind == "message" and e.role == "developer" for e in entries)
        for e in entries:
            meta = dict(e.metadata)
            if e.usage:
                meta["usage"] = e.usage
                usage += 1
            sizes["metadata"].append(len(canonical_body(meta)))
            if e.kind == "message":
                sizes[e.role].append(len(e.content["text"].encode("utf-8")))
                users += e.role == "user"
                model_made += e.role == "assistant"
            elif e.kind == "reasoning":
                sizes["reasoning"].append(len(canonical_body(e.content)))
                model_made += 1
            elif e.kind == "tool_call":
                sizes["arguments"].append(len(canonical_body(e.content.get("arguments"))))
                model_made += 1
            elif e.kind == "tool_result":
                results += 1
                n = len(e.content["output"].encode("utf-8"))
                sizes["output"].append(n)
                if e.content.get("is_error"):
                    failed += 1
                    sizes["output_error"].append(n)
            elif e.kind == "event":
                sizes["event"].append(len(canonical_body(e.content)))
        views = [_E(i + 1, e.kind, e.role, e.tool_call_id) for i, e in enumerate(entries)]
        for r in group_rounds(views):
            if r.kind != "api":
                continue
            rounds_n += 1
            fan[len(r.call_ids)] = fan.get(len(r.call_ids), 0) + 1
            kinds = [entries[s - 1].kind for s in r.seqs]
            reasoning += "reasoning" in kinds
            texts += "message" in kinds

    def q(xs: list[int]) -> list[int]:
        xs = sorted(xs) or [0]
        return [xs[min(len(xs) - 1, int(p * len(xs)))] for p in QUANTILES[:-1]] + [xs[-1]]

    events = len(sizes["event"])
    return {
        "sources": len(sources),
        "entries": entries_n,
        "bytes": {k: q(v) for k, v in sizes.items()},
        "mean_bytes": {k: round(sum(v) / len(v)) if v else 0 for k, v in sizes.items()},
        "fan_out": dict(sorted(fan.items())),
        "round_has_reasoning": f"{reasoning} / {rounds_n}",
        "round_has_text": f"{texts} / {rounds_n}",
        "user_between_rounds": f"{users - len(sources)} / {rounds_n}",
        "event_between_rounds": f"{events} / {rounds_n}",
        "result_failed": f"{failed} / {results}",
        "usage_on_model_entry": f"{usage} / {model_made}",
        "has_system": f"{systems} / {len(sources)}",
        "has_developer": f"{developers} / {len(sources)}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.generator", description=__doc__)
    parser.add_argument("--measure", action="store_true", help="print the corpus figures")
    parser.add_argument(
        "--corpus",
        type=Path,
        default=Path(__file__).resolve().parent.parent / "tests/fixtures/corpus",
    )
    parser.add_argument("--write", type=Path, help="write an openai-chat file of --entries")
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.measure:
        for key, value in measure(args.corpus).items():
            if isinstance(value, dict) and key.endswith("bytes"):
                for k, v in value.items():
                    print(f"{key}.{k}: {json.dumps(v)}")
            else:
                print(f"{key}: {json.dumps(value)}")
    if args.write:
        print(f"wrote {write_openai_chat(args.write, args.entries, seed=args.seed)} bytes")


if __name__ == "__main__":
    main()
