"""Codex rollout importer (FORMATS.md section 2), checked against the real corpus.

Expected numbers are computed from the raw file with plain ``json`` code, independent of
the importer.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from journal_app.formats import FormatError, codex, parse_path
from journal_app.formats.source import read_source

FOLDER = "codex-rollout-jsonl"
CORPUS = Path(__file__).parents[2] / "fixtures" / "corpus"
FILES = sorted(p.name for p in (CORPUS / FOLDER).glob("*.jsonl"))
LONG = "codex-vscode-long-monorepo-session.jsonl"


def raw_records(path: Path) -> list[dict]:
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def items(records: list[dict], ptype: str) -> list[dict]:
    return [
        r["payload"]
        for r in records
        if r["type"] == "response_item" and r["payload"]["type"] == ptype
    ]


def events(records: list[dict], etype: str) -> list[dict]:
    return [
        r["payload"] for r in records if r["type"] == "event_msg" and r["payload"]["type"] == etype
    ]


def unmatched_reasoning_events(records: list[dict]) -> int:
    """agent_reasoning events whose text is in no reasoning item (turn aborted first)."""
    summaries = Counter(s["text"] for p in items(records, "reasoning") for s in p["summary"])
    texts = Counter(p["text"] for p in events(records, "agent_reasoning"))
    return sum((texts - summaries).values())


def of_kind(session, kind: str) -> list:
    return [e for e in session.entries if e.kind == kind]


@pytest.fixture
def long_session(corpus):
    path = corpus / FOLDER / LONG
    return raw_records(path), parse_path(path)


@pytest.mark.parametrize("name", FILES)
def test_it_imports_every_message_reasoning_call_and_output(corpus, name):
    path = corpus / FOLDER / name
    records = raw_records(path)
    session = parse_path(path)

    assert session.format == "codex-rollout-jsonl"
    assert len(of_kind(session, "message")) == len(items(records, "message"))
    assert [e.tool_call_id for e in of_kind(session, "tool_call")] == [
        p["call_id"] for p in items(records, "function_call")
    ]
    assert [e.tool_call_id for e in of_kind(session, "tool_result")] == [
        p["call_id"] for p in items(records, "function_call_output")
    ]
    assert len(of_kind(session, "reasoning")) == len(items(records, "reasoning")) + (
        unmatched_reasoning_events(records)
    )


@pytest.mark.parametrize("name", FILES)
def test_every_call_is_answered_or_listed_as_unanswered(corpus, name):
    path = corpus / FOLDER / name
    records = raw_records(path)
    unanswered = {p["call_id"] for p in items(records, "function_call")} - {
        p["call_id"] for p in items(records, "function_call_output")
    }
    session = parse_path(path)
    results = {e.tool_call_id for e in of_kind(session, "tool_result")}
    for call in of_kind(session, "tool_call"):
        assert call.tool_call_id in results or call.tool_call_id in unanswered


def test_the_long_session_has_123_calls_all_answered(long_session):
    _, session = long_session
    calls = of_kind(session, "tool_call")
    assert len(calls) == 123
    assert {e.tool_call_id for e in calls} == {
        e.tool_call_id for e in of_kind(session, "tool_result")
    }


def test_it_keeps_four_turn_aborted_events(long_session):
    records, session = long_session
    raw = events(records, "turn_aborted")
    aborted = [e for e in of_kind(session, "event") if e.content["type"] == "turn_aborted"]
    assert len(aborted) == len(raw) == 4
    assert all(e.role == "runtime" and e.content["reason"] == "interrupted" for e in aborted)


def test_it_preserves_the_eight_non_zero_shell_exit_codes(long_session):
    records, session = long_session
    names = {p["call_id"]: p["name"] for p in items(records, "function_call")}
    raw_exits = {}
    for p in items(records, "function_call_output"):
        try:
            wrapped = json.loads(p["output"])
        except ValueError:
            continue
        if wrapped["metadata"]["exit_code"] != 0:
            raw_exits[p["call_id"]] = wrapped["metadata"]["exit_code"]
    assert len(raw_exits) == 8
    assert {names[c] for c in raw_exits} == {"shell"}

    results = {e.tool_call_id: e for e in of_kind(session, "tool_result")}
    for call_id, code in raw_exits.items():
        assert results[call_id].content["exit_code"] == code
        assert results[call_id].content["is_error"] is True
        assert results[call_id].metadata["output_metadata"]["exit_code"] == code
    unwrapped_non_zero = [
        e for e in results.values() if e.metadata.get("output_metadata", {}).get("exit_code")
    ]
    assert len(unwrapped_non_zero) == 8


def test_output_json_is_unwrapped_into_text_and_metadata(long_session):
    records, session = long_session
    results = {e.tool_call_id: e for e in of_kind(session, "tool_result")}
    unwrapped = 0
    for p in items(records, "function_call_output"):
        try:
            wrapped = json.loads(p["output"])
        except ValueError:
            continue
        result = results[p["call_id"]]
        assert result.content["output"] == wrapped["output"]
        assert result.metadata["output_metadata"] == wrapped["metadata"]
        unwrapped += 1
    assert unwrapped == 116


def test_sandbox_failures_and_rejected_patches_are_errors(long_session):
    records, session = long_session
    plain = {}
    for p in items(records, "function_call_output"):
        try:
            json.loads(p["output"])
        except ValueError:
            plain[p["call_id"]] = p["output"]
    failures = {
        c for c, text in plain.items() if text.startswith(("failed in sandbox", "patch rejected"))
    }
    assert len(failures) == 4
    for e in of_kind(session, "tool_result"):
        if e.tool_call_id in plain:
            assert e.content["output"] == plain[e.tool_call_id]
            assert e.content["is_error"] is (e.tool_call_id in failures)
            if plain[e.tool_call_id].startswith("failed in sandbox"):
                assert e.content["exit_code"] in (1, 2)


def test_arguments_are_parsed_from_their_json_string(long_session):
    records, session = long_session
    raw = [json.loads(p["arguments"]) for p in items(records, "function_call")]
    assert [e.content["arguments"] for e in of_kind(session, "tool_call")] == raw


def test_environment_context_is_injected_developer_context(long_session):
    records, session = long_session
    raw = [
        p
        for p in items(records, "message")
        if p["role"] == "user" and p["content"][0]["text"].startswith("<environment_context>")
    ]
    developer = [e for e in of_kind(session, "message") if e.role == "developer"]
    assert len(developer) == len(raw) == 2
    assert all(e.metadata["injected"] for e in developer)
    users = [e for e in of_kind(session, "message") if e.role == "user"]
    assert len(users) == 13
    assert all(e.content["text"].startswith("# Context from my IDE setup") for e in users)
    assert session.title.startswith("Updating a team to assign a lead")
    assert len(session.title) <= 80


def test_duplicate_events_are_counted_not_imported(long_session):
    records, session = long_session
    dedup = session.metadata["deduplicated"]
    assert dedup["user_message"] == len(events(records, "user_message"))
    assert dedup["agent_message"] == len(events(records, "agent_message"))
    assert dedup["agent_reasoning"] == len(events(records, "agent_reasoning")) - (
        unmatched_reasoning_events(records)
    )
    event_only = [e for e in of_kind(session, "reasoning") if e.metadata.get("event_only")]
    assert len(event_only) == unmatched_reasoning_events(records) == 4


def test_reasoning_keeps_summary_and_encrypted_content(long_session):
    records, session = long_session
    raw = items(records, "reasoning")
    from_items = [e for e in of_kind(session, "reasoning") if not e.metadata.get("event_only")]
    assert [e.content["encrypted"] for e in from_items] == [p["encrypted_content"] for p in raw]
    assert [e.content["text"] for e in from_items] == [
        "\n\n".join(s["text"] for s in p["summary"]) for p in raw
    ]


def test_token_counts_become_usage_on_assistant_entries(long_session):
    records, session = long_session
    raw = [p for p in events(records, "token_count") if p.get("info")]
    with_usage = [e for e in session.entries if e.usage is not None]
    assert all(e.role == "assistant" for e in with_usage)
    assert sum(e.usage["output_tokens"] for e in with_usage) == sum(
        p["info"]["last_token_usage"]["output_tokens"] for p in raw
    )
    attached = sum(
        1 + len(e.metadata.get("more_token_counts", []))
        for e in session.entries
        if "token_count" in e.metadata
    )
    assert attached == len(events(records, "token_count"))


def test_token_count_goes_to_the_model_call_written_after_it(long_session):
    records, session = long_session
    # Codex 0.40 order: turn_context, agent_reasoning, token_count, reasoning, function_call.
    first_count = next(
        i for i, r in enumerate(records, 1) if r["payload"].get("type") == "token_count"
    )
    first_usage = next(e for e in session.entries if e.usage is not None)
    assert first_usage.kind == "reasoning"
    assert int(first_usage.source_ref.split()[1]) == first_count + 1


def test_every_turn_context_is_kept(long_session):
    records, session = long_session
    raw = [r["payload"] for r in records if r["type"] == "turn_context"]
    kept = [e.metadata["turn_context"] for e in session.entries if "turn_context" in e.metadata]
    kept += session.metadata.get("trailing_turn_context", [])
    assert len(kept) == len(raw) == 136
    assert [{k: c[k] for k in raw[0]} for c in kept] == raw


def test_session_meta_is_session_metadata(long_session):
    records, session = long_session
    meta = records[0]["payload"]
    assert session.source_session_id == meta["id"]
    assert session.metadata["session_meta"]["git"] == meta["git"]


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def line(rtype: str, payload) -> dict:
    return {"timestamp": "2025-01-01T00:00:00.000Z", "type": rtype, "payload": payload}


META = line("session_meta", {"id": "sess", "instructions": "Be terse.", "cwd": "/w"})


def user(text: str) -> dict:
    return line(
        "response_item",
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
    )


def test_instructions_compaction_and_other_events(tmp_path):
    path = write_jsonl(
        tmp_path / "synthetic.jsonl",
        [
            META,
            user("hi"),
            line("compacted", {"message": "summary of earlier turns"}),
            line("event_msg", {"type": "context_compacted"}),
            line("event_msg", {"type": "task_started", "model_context_window": 1}),
            line(
                "response_item",
                {"type": "function_call", "name": "shell", "arguments": "{bad", "call_id": "c1"},
            ),
            line("turn_context", {"model": "m"}),
        ],
    )
    session = parse_path(path)
    first = session.entries[0]
    assert (first.kind, first.role, first.content["text"]) == ("message", "developer", "Be terse.")
    assert first.metadata["injected"] is True
    compacted, marker, other = session.entries[2:5]
    assert compacted.derived and compacted.content == {
        "type": "compacted",
        "message": "summary of earlier turns",
    }
    assert marker.derived and marker.content == {"type": "context_compacted"}
    assert not other.derived and other.content == {
        "type": "task_started",
        "model_context_window": 1,
    }
    assert session.entries[5].content["arguments"] == "{bad"
    assert session.metadata["trailing_turn_context"][0]["model"] == "m"
    assert session.title == "hi"


def test_a_record_without_payload_names_line_and_field(tmp_path):
    path = write_jsonl(tmp_path / "bad.jsonl", [META, {"timestamp": "t", "type": "response_item"}])
    with pytest.raises(FormatError) as err:
        parse_path(path, "codex-rollout-jsonl")
    assert str(path) in str(err.value)
    assert "line 2" in str(err.value)
    assert "'payload'" in str(err.value)


def test_a_call_without_call_id_names_line_and_field(tmp_path):
    path = write_jsonl(
        tmp_path / "nocall.jsonl",
        [
            META,
            line("response_item", {"type": "function_call", "name": "shell", "arguments": "{}"}),
        ],
    )
    with pytest.raises(FormatError) as err:
        parse_path(path, "codex-rollout-jsonl")
    assert "line 2" in str(err.value)
    assert "payload.call_id" in str(err.value)


def test_null_message_content_names_line_and_field(tmp_path):
    path = write_jsonl(
        tmp_path / "null.jsonl",
        [META, line("response_item", {"type": "message", "role": "assistant", "content": None})],
    )
    with pytest.raises(FormatError) as err:
        parse_path(path, "codex-rollout-jsonl")
    assert str(path) in str(err.value)
    assert "line 2" in str(err.value)
    assert "payload.content" in str(err.value)


def test_a_non_object_line_names_the_line(tmp_path):
    path = tmp_path / "list.jsonl"
    path.write_text(json.dumps(META) + '\n"just a string"\n', encoding="utf-8")
    with pytest.raises(FormatError) as err:
        parse_path(path, "codex-rollout-jsonl")
    assert str(path) in str(err.value)
    assert "line 2" in str(err.value)
    assert "not a JSON object" in str(err.value)


@pytest.mark.parametrize("name", FILES)
def test_detect_accepts_codex_rollouts(corpus, name):
    assert codex.detect(read_source(corpus / FOLDER / name))


def other_sources(corpus: Path):
    for folder in sorted(p for p in corpus.iterdir() if p.is_dir() and p.name != FOLDER):
        if folder.name == "opencode-export":
            yield from sorted(p for p in folder.iterdir() if p.is_dir())
        else:
            yield from sorted(p for p in folder.iterdir() if p.is_file())


@pytest.mark.parametrize("path", list(other_sources(CORPUS)), ids=lambda p: p.name)
def test_detect_rejects_every_other_corpus_file(path):
    assert codex.detect(read_source(path)) is False
