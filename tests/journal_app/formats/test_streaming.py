"""Streaming readers: the same entries and hashes as the in-memory path,
the same kinds of errors, and a JSON document never built whole. Pure: no database."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from journal_app.chain import prepare_entries
from journal_app.formats import FormatError, parse_path, source, stream_path
from journal_app.formats.base import collect
from journal_app.hashing import canonical_body
from tests.conftest import CORPUS

#: head hash per lane of every corpus source, computed with the in-memory importers of the
#: commit before streaming (``json.loads`` of the whole file) and a fixed scope
EXPECTED = json.loads((Path(__file__).parent / "expected_heads.json").read_text())
SCOPE = {"tenant": "t", "session": "s", "lane": "main", "branch": "main"}


@pytest.fixture
def streamed(monkeypatch):
    """Every file streamed, however small (the large-file readers on corpus files)."""
    monkeypatch.setattr(source, "STREAM_FROM_BYTES", 0)


def _heads(path: Path, batch: int) -> tuple[dict[str, list], str]:
    """Per-lane ``[entries, head hash]`` appending ``batch`` entries at a time, continuing
    each lane's chain (as ``journal_import`` does), and the digest of the session fields."""
    _, _, stream = stream_path(path)
    lanes: dict[str, list] = {}  # lane -> [count, parent hash, pending items]
    while True:
        try:
            item = next(stream)
        except StopIteration as done:
            session = done.value
            break
        lane = lanes.setdefault(item.lane or "main", [0, "", []])
        lane[2].append(item)
        if len(lane[2]) == batch:
            _flush(item.lane or "main", lane)
    for name, lane in lanes.items():
        _flush(name, lane)
    fields = {
        "format": session.format,
        "title": session.title,
        "source_session_id": session.source_session_id,
        "metadata": session.metadata,
    }
    digest = hashlib.sha256(canonical_body(fields)).hexdigest()
    return {k: [v[0], v[1]] for k, v in lanes.items()}, digest


def _flush(name: str, lane: list) -> None:
    if not lane[2]:
        return
    prepared = prepare_entries(
        scope={**SCOPE, "lane": name},
        start_seq=lane[0] + 1,
        parent_hash=lane[1],
        items=lane[2],
        chunk_bytes=4096,
    )
    lane[0] += len(prepared)
    lane[1] = prepared[-1].entry_hash
    lane[2] = []


@pytest.mark.parametrize("mode", ["in-memory", "streamed"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_hashes_equal_the_in_memory_path(name, mode, monkeypatch):
    if mode == "streamed":
        monkeypatch.setattr(source, "STREAM_FROM_BYTES", 0)
    heads, fields = _heads(CORPUS / name, batch=7)
    assert heads == EXPECTED[name]["heads"]
    assert fields == EXPECTED[name]["fields"]


def test_a_streamed_source_is_not_held_in_memory(streamed):
    src = source.read_source(
        CORPUS / "claude-code-jsonl/claude-code-session-frontend-refactor.jsonl"
    )
    assert src.streamed and src.data is None
    rows = src.rows()
    assert next(rows)[0] == 1  # read one line at a time
    doc = source.read_source(
        CORPUS / "mini-swe-agent-traj/minisweagent-gemini3-requests-1142-oversized-output.traj.json"
    )
    view = doc.detection_view()
    assert doc.data is None and isinstance(view.data, dict)
    assert all(len(v) <= source.PREVIEW_ITEMS for v in view.data.values() if isinstance(v, list))


def _chat(tmp_path: Path, messages, name="chat.json", wrapper=None) -> Path:
    path = tmp_path / name
    doc = messages if wrapper is None else {**wrapper, "messages": messages}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_openai_chat_wrapper_fields_are_kept_without_building_the_list(tmp_path, streamed):
    path = _chat(
        tmp_path,
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        wrapper={"model": "m1", "info": {"a": [1, 2]}},
    )
    session = parse_path(path)
    assert [e.content["text"] for e in session.entries] == ["hi", "hello"]
    assert session.metadata == {"model": "m1", "info": {"a": [1, 2]}}
    assert session.entries[1].source_ref == "messages[1]"


def test_a_lone_surrogate_or_a_big_integer_keeps_its_exact_value(tmp_path, streamed):
    # yajl2_c would read "\ud800" as "?" and refuse the integer: the exact backend is used
    big = 10**30
    path = tmp_path / "chat.json"
    path.write_text(
        '[{"role": "user", "content": "a\\ud83d\\ude00b", "n": ' + str(big) + "}]",
        encoding="utf-8",
    )
    src = source.read_source(path)
    assert src.exact
    (entry,) = parse_path(path).entries
    assert entry.content["text"] == "a\U0001f600b" and entry.metadata["n"] == big


def test_surrogate_pairs_stream_at_c_speed_with_the_same_values(tmp_path, streamed):
    # an emoji as json.dumps writes it (a surrogate pair) decodes alike in yajl2_c: no fallback
    path = _chat(tmp_path, [{"role": "user", "content": "a\U0001f600b \U00010400"}])
    assert b"\\ud83d\\ude00" in path.read_bytes()
    src = source.read_source(path)
    assert not src.exact
    (entry,) = parse_path(path).entries
    assert entry.content["text"] == "a\U0001f600b \U00010400"


@pytest.mark.parametrize(
    ("text", "exact"),
    [
        (rb'"a\ud83d\ude00b"', False),  # a pair
        (rb'"\u00e9 plain"', False),
        (rb'"\ud83d"', True),  # a lone high surrogate
        (rb'"x\ude00"', True),  # a lone low surrogate
        (rb'"\ud83d\ude00\ude00"', True),  # a pair, then a lone low one
        (rb'"\\ud83d\ude00"', True),  # text "\ud83d" after an escaped backslash, a lone low
        (rb'"\\ud83d\\ude00 text"', False),  # the letters of an escape, escaped: text
        (rb'"\\\ud83d"', True),  # an escaped backslash, then a real lone high surrogate
        (rb'"\ud83d\\ude00"', True),  # a real high surrogate, then text
        (rb"[1234567890123456789]", True),  # a 19-digit integer
    ],
)
def test_needs_exact_keeps_every_doubtful_case_on_the_exact_backend(text, exact):
    assert source.needs_exact(text) is exact


def test_a_bad_line_of_a_streamed_jsonl_file_is_named(tmp_path, streamed):
    path = tmp_path / "s.jsonl"
    good = (CORPUS / "claude-code-jsonl/claude-code-session-frontend-refactor.jsonl").read_text()
    path.write_text(good + "{not json\n", encoding="utf-8")
    lines = good.count("\n") + 1
    with pytest.raises(FormatError) as err:
        parse_path(path)
    assert err.value.location == f"line {lines}" and "not valid JSON" in err.value.reason


def test_invalid_utf8_in_a_streamed_file_names_the_line(tmp_path, streamed):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": "\xff"}\n')
    with pytest.raises(FormatError) as err:
        source.read_source(path)
    assert err.value.location == "line 2" and "UTF-8" in err.value.reason


def test_a_truncated_streamed_document_is_refused(tmp_path, streamed):
    path = tmp_path / "chat.json"
    path.write_text('[{"role": "user", "content": "hi"}, {"role": "assi', encoding="utf-8")
    with pytest.raises(FormatError) as err:
        parse_path(path)
    assert str(path) in str(err.value) and "not valid JSON" in err.value.reason


def test_an_empty_streamed_file_is_refused(tmp_path, streamed):
    path = tmp_path / "e.json"
    path.write_text("  \n", encoding="utf-8")
    with pytest.raises(FormatError, match="file is empty"):
        source.read_source(path)


def test_a_streamed_result_without_its_call_is_refused_at_its_index(tmp_path, streamed):
    path = _chat(
        tmp_path,
        [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x", "content": "o"}],
    )
    with pytest.raises(FormatError) as err:
        parse_path(path)
    assert err.value.location == "index 1" and err.value.field == "tool_call_id"


def test_codex_entries_are_final_when_yielded(streamed):
    """A Codex token count attaches to the latest assistant entry: entries are yielded only
    once nothing can change them, so the stream equals the collected session."""
    path = CORPUS / "codex-rollout-jsonl" / "codex-vscode-long-monorepo-session.jsonl"
    _, _, stream = stream_path(path)
    seen = []
    for e in stream:
        seen.append((e.source_ref, json.dumps(e.metadata, sort_keys=True, default=repr)))
    whole = collect(stream_path(path)[2])
    assert seen == [
        (e.source_ref, json.dumps(e.metadata, sort_keys=True, default=repr)) for e in whole.entries
    ]


def test_a_bad_value_inside_a_one_line_document_is_located_by_column_and_context(tmp_path):
    # an openai-chat list on one line: "line 1" alone said nothing (fresh-eyes)
    path = tmp_path / "chat.json"
    good = '{"role": "user", "content": "hi"}'
    path.write_text("[" + ", ".join([good] * 40 + ['{"role": oops}'] + [good] * 5) + "]")
    with pytest.raises(FormatError) as err:
        parse_path(path)
    text = path.read_text()
    column = text.index("oops") + 1
    assert err.value.location == "line 1"
    assert f"at column {column}," in err.value.reason and "oops" in err.value.reason
