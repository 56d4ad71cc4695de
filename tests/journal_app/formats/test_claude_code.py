"""Claude Code session importer (FORMATS.md section 1), checked against the real corpus.

Expected numbers are computed from the raw files with plain ``json`` code, independent of
the importer.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from journal_app.formats import FormatError, claude_code, parse_path
from journal_app.formats.source import read_source

FOLDER = "claude-code-jsonl"
CORPUS = Path(__file__).parents[2] / "fixtures" / "corpus"
FILES = sorted(p.name for p in (CORPUS / FOLDER).glob("*.jsonl"))


def raw_records(path: Path) -> list[dict]:
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def raw_counts(path: Path) -> dict:
    """Messages (string contents and text blocks), tool_use and tool_result blocks."""
    counts = {"messages": 0, "calls": [], "results": []}
    for rec in raw_records(path):
        if rec["type"] not in ("user", "assistant"):
            continue
        content = rec["message"]["content"]
        if isinstance(content, str):
            counts["messages"] += 1
            continue
        for block in content:
            if block["type"] == "text":
                counts["messages"] += 1
            elif block["type"] == "tool_use":
                counts["calls"].append(block["id"])
            elif block["type"] == "tool_result":
                counts["results"].append(block["tool_use_id"])
    return counts


def of_kind(session, kind: str) -> list:
    return [e for e in session.entries if e.kind == kind]


@pytest.mark.parametrize("name", FILES)
def test_it_imports_every_message_call_and_result_of_the_corpus_file(corpus, name):
    path = corpus / FOLDER / name
    expected = raw_counts(path)
    session = parse_path(path)

    assert session.format == "claude-code-jsonl"
    assert len(of_kind(session, "message")) == expected["messages"]
    assert [e.tool_call_id for e in of_kind(session, "tool_call")] == expected["calls"]
    assert [e.tool_call_id for e in of_kind(session, "tool_result")] == expected["results"]


@pytest.mark.parametrize("name", FILES)
def test_every_call_is_answered_or_listed_as_unanswered(corpus, name):
    path = corpus / FOLDER / name
    expected = raw_counts(path)
    unanswered = set(expected["calls"]) - set(expected["results"])
    session = parse_path(path)

    results = {e.tool_call_id for e in of_kind(session, "tool_result")}
    for call in of_kind(session, "tool_call"):
        assert call.tool_call_id in results or call.tool_call_id in unanswered


def test_it_marks_three_unanswered_calls_of_the_final_parallel_batch(corpus):
    path = corpus / FOLDER / "claude-code-session-unanswered-tool-uses.jsonl"
    records = raw_records(path)
    last_result = max(
        i
        for i, rec in enumerate(records)
        if rec["type"] == "user"
        and isinstance(rec["message"]["content"], list)
        and any(b["type"] == "tool_result" for b in rec["message"]["content"])
    )
    final_batch = {
        b["id"]
        for rec in records[last_result + 1 :]
        if rec["type"] == "assistant"
        for b in rec["message"]["content"]
        if b["type"] == "tool_use"
    }
    assert len(final_batch) == 3

    session = parse_path(path)
    calls = {e.tool_call_id for e in of_kind(session, "tool_call")}
    results = {e.tool_call_id for e in of_kind(session, "tool_result")}
    assert calls - results == final_batch
    assert [e.tool_call_id for e in session.entries[-3:]] == [
        b["id"] for rec in records[-3:] for b in rec["message"]["content"]
    ]


def test_summary_records_become_derived_summary_events(corpus):
    path = corpus / FOLDER / "claude-code-session-with-summary-records.jsonl"
    raw = [r for r in raw_records(path) if r["type"] == "summary"]
    session = parse_path(path)

    events = of_kind(session, "event")
    assert len(events) == len(raw) == 16
    assert all(e.derived and e.role == "runtime" for e in events)
    assert [e.content for e in events] == [
        {"type": "summary", "summary": r["summary"], "leafUuid": r["leafUuid"]} for r in raw
    ]


@pytest.mark.parametrize("name", FILES)
def test_file_history_snapshots_are_counted_as_skipped(corpus, name):
    path = corpus / FOLDER / name
    snapshots = sum(r["type"] == "file-history-snapshot" for r in raw_records(path))
    session = parse_path(path)
    assert session.metadata["skipped"].get("file-history-snapshot", 0) == snapshots


@pytest.mark.parametrize("name", FILES)
def test_usage_is_counted_once_per_api_message_with_its_final_value(corpus, name):
    path = corpus / FOLDER / name
    last_usage: dict[str, dict] = {}
    for rec in raw_records(path):
        if rec["type"] == "assistant":
            last_usage[rec["message"]["id"]] = rec["message"]["usage"]
    session = parse_path(path)

    with_usage = [e for e in session.entries if e.usage is not None]
    assert len(with_usage) == len(last_usage)
    assert [e.metadata["message"]["id"] for e in with_usage] == list(last_usage)
    assert [e.usage for e in with_usage] == list(last_usage.values())


@pytest.mark.parametrize("name", FILES)
def test_envelope_and_side_channel_results_are_kept_in_metadata(corpus, name):
    path = corpus / FOLDER / name
    records = raw_records(path)
    session = parse_path(path)

    side_channel = [r["toolUseResult"] for r in records if "toolUseResult" in r]
    assert [
        e.metadata["toolUseResult"] for e in session.entries if "toolUseResult" in e.metadata
    ] == side_channel
    uuids = [r["uuid"] for r in records if r["type"] in ("user", "assistant")]
    seen = list(dict.fromkeys(e.metadata["uuid"] for e in session.entries if "uuid" in e.metadata))
    assert seen == uuids
    assert session.source_session_id == next(r["sessionId"] for r in records if "sessionId" in r)


def test_it_keeps_the_failing_test_run_as_an_error_result(corpus):
    path = corpus / FOLDER / "claude-code-session-frontend-refactor.jsonl"
    errors = [
        b["tool_use_id"]
        for r in raw_records(path)
        if r["type"] == "user" and isinstance(r["message"]["content"], list)
        for b in r["message"]["content"]
        if b.get("is_error")
    ]
    session = parse_path(path)
    assert [
        e.tool_call_id for e in of_kind(session, "tool_result") if e.content["is_error"]
    ] == errors
    assert len(errors) == 1
    by_id = {e.tool_call_id: e for e in of_kind(session, "tool_call")}
    assert by_id[errors[0]].tool_name == "Bash"


def test_meta_caveat_is_an_injected_user_message_and_not_the_title(corpus):
    session = parse_path(corpus / FOLDER / "claude-code-session-frontend-refactor.jsonl")
    injected = [e for e in session.entries if e.metadata.get("injected")]
    assert len(injected) == 1
    assert injected[0].role == "user"
    assert injected[0].content["text"].startswith("Caveat:")
    assert session.title.startswith("Can you add the first two initials")
    assert len(session.title) <= 80


def test_tool_result_text_blocks_are_joined_into_the_output(corpus):
    session = parse_path(corpus / FOLDER / "claude-code-session-unanswered-tool-uses.jsonl")
    first = of_kind(session, "tool_result")[0]
    assert first.content["output"] == 'Successfully changed chat title to: "New Chat Session"'
    assert first.tool_name == "mcp__happy__change_title"


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


_UUIDS = itertools.count(1)


def envelope(**kw) -> dict:
    """A record envelope; each gets its own uuid (a repeated uuid is a repeated record)."""
    base = {
        "sessionId": "s1",
        "uuid": f"u{next(_UUIDS)}",
        "parentUuid": None,
        "timestamp": "2025-01-01T00:00:00Z",
    }
    return {**base, **kw}


def test_compact_boundary_and_compact_summary_come_out_derived(tmp_path):
    path = write_jsonl(
        tmp_path / "compacted.jsonl",
        [
            envelope(type="user", message={"role": "user", "content": "hello"}),
            envelope(
                type="system",
                subtype="compact_boundary",
                content="Conversation compacted",
                compactMetadata={"trigger": "auto", "preTokens": 1000},
                logicalParentUuid="u0",
            ),
            envelope(
                type="user",
                isCompactSummary=True,
                message={"role": "user", "content": "This session is being continued..."},
            ),
            envelope(
                type="assistant",
                message={
                    "id": "msg_1",
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                        {"type": "tool_use", "id": "t1", "name": "Bash", "input": "not json"},
                    ],
                    "usage": {"input_tokens": 1, "output_tokens": 2},
                },
            ),
        ],
    )
    session = parse_path(path)
    boundary, summary = session.entries[1], session.entries[2]
    assert boundary.kind == "event" and boundary.derived
    assert boundary.content["type"] == "compact_boundary"
    assert boundary.content["compactMetadata"]["preTokens"] == 1000
    assert summary.kind == "message" and summary.derived and summary.role == "user"
    thinking, call = session.entries[3], session.entries[4]
    assert thinking.kind == "reasoning" and thinking.content == {"text": "hmm"}
    assert thinking.metadata["block"] == {"signature": "sig"}
    assert thinking.usage == {"input_tokens": 1, "output_tokens": 2} and call.usage is None
    assert call.content["arguments"] == "not json"
    assert session.title == "hello"


def test_a_record_without_message_names_line_and_field(tmp_path):
    path = write_jsonl(
        tmp_path / "bad.jsonl",
        [
            envelope(type="user", message={"role": "user", "content": "hi"}),
            envelope(type="assistant"),
        ],
    )
    with pytest.raises(FormatError) as err:
        parse_path(path, "claude-code-jsonl")
    assert str(path) in str(err.value)
    assert "line 2" in str(err.value)
    assert "'message'" in str(err.value)


def test_null_content_names_line_and_field(tmp_path):
    path = write_jsonl(
        tmp_path / "null.jsonl", [envelope(type="user", message={"role": "user", "content": None})]
    )
    with pytest.raises(FormatError) as err:
        parse_path(path, "claude-code-jsonl")
    assert str(path) in str(err.value)
    assert "line 1" in str(err.value)
    assert "message.content" in str(err.value)


def test_a_tool_use_without_id_names_the_block_field(tmp_path):
    path = write_jsonl(
        tmp_path / "noid.jsonl",
        [
            envelope(
                type="assistant",
                message={"role": "assistant", "content": [{"type": "tool_use", "name": "Bash"}]},
            )
        ],
    )
    with pytest.raises(FormatError) as err:
        parse_path(path, "claude-code-jsonl")
    assert "line 1" in str(err.value)
    assert "message.content[0].id" in str(err.value)


def test_a_non_object_line_names_the_line(tmp_path):
    path = tmp_path / "list.jsonl"
    path.write_text(
        json.dumps(envelope(type="user", message={"role": "user", "content": "hi"})) + "\n[1, 2]\n",
        encoding="utf-8",
    )
    with pytest.raises(FormatError) as err:
        parse_path(path, "claude-code-jsonl")
    assert str(path) in str(err.value)
    assert "line 2" in str(err.value)
    assert "not a JSON object" in str(err.value)


@pytest.mark.parametrize("name", FILES)
def test_detect_accepts_claude_code_sessions(corpus, name):
    assert claude_code.detect(read_source(corpus / FOLDER / name))


def other_sources(corpus: Path):
    for folder in sorted(p for p in corpus.iterdir() if p.is_dir() and p.name != FOLDER):
        if folder.name == "opencode-export":
            yield from sorted(p for p in folder.iterdir() if p.is_dir())
        else:
            yield from sorted(p for p in folder.iterdir() if p.is_file())


@pytest.mark.parametrize("path", list(other_sources(CORPUS)), ids=lambda p: p.name)
def test_detect_rejects_every_other_corpus_file(path):
    assert claude_code.detect(read_source(path)) is False
