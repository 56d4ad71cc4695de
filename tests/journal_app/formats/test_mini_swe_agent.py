"""mini-swe-agent trajectory importer (FORMATS.md section 5)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from journal_app.formats import FormatError, mini_swe_agent, parse_path
from journal_app.formats.source import Source, read_source

FOLDER = "mini-swe-agent-traj"
FILE = "minisweagent-gemini3-requests-1142-oversized-output.traj.json"


@cache
def _source(path: str) -> Source:
    return read_source(path)


def _corpus_sources(corpus: Path) -> list[tuple[str, Path]]:
    """(format folder, path) for every corpus source; OpenCode exports are folders."""
    return [
        (folder.name, item)
        for folder in sorted(p for p in corpus.iterdir() if p.is_dir())
        for item in sorted(folder.iterdir())
    ]


@pytest.fixture
def raw(corpus: Path) -> dict:
    return json.loads((corpus / FOLDER / FILE).read_text(encoding="utf-8"))


@pytest.fixture
def session(corpus: Path):
    return parse_path(corpus / FOLDER / FILE)


def _bash_blocks(text: str) -> int:
    """Count fenced bash blocks by scanning lines (independent of the importer's regex)."""
    return sum(1 for line in text.splitlines() if line.strip().startswith("```bash"))


def test_counts_match_raw_file(raw, session):
    msgs = raw["messages"]
    raw_calls = [
        i
        for i, m in enumerate(msgs)
        if m["role"] == "assistant" and _bash_blocks(m["content"]) == 1
    ]
    submission = raw["info"]["submission"]
    raw_results = [
        i
        for i, m in enumerate(msgs)
        if m["role"] == "user"
        and (m["content"].startswith("<returncode>") or m["content"] == submission)
        and i - 1 in raw_calls
    ]
    raw_messages = len(msgs) - len(raw_results)
    kinds = [e.kind for e in session.entries]
    assert kinds.count("message") == raw_messages == 75
    assert kinds.count("tool_call") == len(raw_calls) == 69
    # 68 <returncode> observations plus the submit command's raw output
    assert kinds.count("tool_result") == len(raw_results) == 69
    calls = [e.tool_call_id for e in session.entries if e.kind == "tool_call"]
    answered = {e.tool_call_id for e in session.entries if e.kind == "tool_result"}
    assert set(calls) == answered
    assert [e.tool_call_id for e in session.entries if e.kind == "tool_result"] == [
        f"bash-{i - 1}" for i in raw_results
    ]


def test_final_submission_is_the_submit_calls_result_verbatim(raw, session):
    last = session.entries[-1]
    assert (last.kind, last.role, last.tool_call_id) == ("tool_result", "tool", "bash-142")
    assert len(last.content["output"]) == 868_138
    assert last.content["output"] == raw["messages"][-1]["content"] == raw["info"]["submission"]
    assert last.metadata["submission"] is True
    assert not last.derived


def test_return_codes_and_elided_output(raw, session):
    results = [e for e in session.entries if e.kind == "tool_result"]
    raw_rc1 = [m for m in raw["messages"] if m["content"].startswith("<returncode>1</returncode>")]
    results = [e for e in results if "exit_code" in e.content]  # all but the submission
    rc1 = [e for e in results if e.content["exit_code"] == 1]
    assert len(rc1) == len(raw_rc1) == 7
    assert all(e.content["is_error"] for e in rc1)
    assert all(not e.content["is_error"] for e in results if e.content["exit_code"] == 0)
    assert {e.content["exit_code"] for e in results} == {0, 1}
    # Outputs are kept verbatim, wrapper included.
    assert [e.content["output"] for e in rc1] == [m["content"] for m in raw_rc1]
    elided = [e for e in results if "elided_chars" in e.metadata]
    raw_elided = [m for m in raw["messages"] if "<elided_chars>" in m["content"]]
    assert len(elided) == len(raw_elided) == 4
    for e, m in zip(elided, raw_elided, strict=True):
        n = int(m["content"].split("<elided_chars>")[1].split("characters")[0])
        assert e.metadata["elided_chars"] == n
        assert e.metadata["truncated_by_source"] is True
        assert not e.derived


def test_format_errors_roles_usage_and_metadata(raw, session):
    errors = [e for e in session.entries if e.metadata.get("format_error")]
    raw_errors = [
        m for m in raw["messages"] if m["content"].startswith("Please always provide EXACTLY ONE")
    ]
    assert len(errors) == len(raw_errors) == 2
    assert all((e.kind, e.role) == ("message", "user") for e in errors)
    assistants = [e for e in session.entries if e.kind == "message" and e.role == "assistant"]
    raw_assistants = [m for m in raw["messages"] if m["role"] == "assistant"]
    assert len(assistants) == len(raw_assistants) == 71
    for e, m in zip(assistants, raw_assistants, strict=True):
        assert e.content["text"] == m["content"]
        assert e.metadata["extra"] == m["extra"]  # raw response kept
        assert e.usage["input_tokens"] == m["extra"]["response"]["usage"]["prompt_tokens"]
        assert e.usage["output_tokens"] == m["extra"]["response"]["usage"]["completion_tokens"]
    raw_reasoning = [
        m["extra"]["response"]["choices"][0]["message"].get("reasoning")
        for m in raw_assistants
        if m["extra"]["response"]["choices"][0]["message"].get("reasoning")
    ]
    assert [e.content["text"] for e in session.entries if e.kind == "reasoning"] == raw_reasoning
    first_call = next(e for e in session.entries if e.kind == "tool_call")
    assert first_call.content == {"name": "bash", "arguments": {"command": "ls -R"}}
    assert session.metadata == {k: v for k, v in raw.items() if k != "messages"}
    assert session.source_session_id == "psf__requests-1142"
    assert session.title == "requests.get is ALWAYS sending content length"


@pytest.mark.parametrize(
    ("messages", "location", "field"),
    [
        ([{"role": "system", "content": "s"}, {"content": "no role"}], "messages[1]", "role"),
        (
            [{"role": "system", "content": "s"}, {"role": "tool", "content": "x"}],
            "messages[1]",
            "role",
        ),
        (
            [{"role": "system", "content": "s"}, {"role": "user", "content": None}],
            "messages[1]",
            "content",
        ),
        (
            [{"role": "system", "content": "s"}, {"role": "user", "content": {"a": 1}}],
            "messages[1]",
            "content",
        ),
        (
            [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a", "extra": []}],
            "messages[1]",
            "extra",
        ),
    ],
)
def test_bad_input_names_file_index_and_field(tmp_path, messages, location, field):
    path = tmp_path / "bad.traj.json"
    path.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1", "messages": messages}))
    with pytest.raises(FormatError) as info:
        parse_path(path)
    message = str(info.value)
    assert str(path) in message and location in message and repr(field) in message
    assert info.value.location == location and info.value.field == field


def test_missing_messages(tmp_path):
    path = tmp_path / "bad.traj.json"
    path.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1", "info": {}}))
    with pytest.raises(FormatError) as info:
        parse_path(path, fmt="mini-swe-agent-traj")
    assert str(path) in str(info.value) and "'messages'" in str(info.value)


def test_timeout_and_text_blocks(tmp_path):
    data = {
        "trajectory_format": "mini-swe-agent-1",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "do it", "cache_control": {}}]},
            {"role": "assistant", "content": "THOUGHT: go\n\n```bash\nsleep 99\n```"},
            {
                "role": "user",
                "content": "The last command <command>sleep 99</command> timed out and has been "
                "killed.\nThe output of the command was:\n <output>\n\n</output>",
            },
        ],
    }
    path = tmp_path / "t.traj.json"
    path.write_text(json.dumps(data))
    session = parse_path(path)
    first, _, call, result = session.entries
    assert first.content["text"] == "do it" and first.metadata["content_blocks"]
    assert call.content["arguments"] == {"command": "sleep 99"}
    assert result.kind == "tool_result" and result.content["is_error"] is True
    assert "exit_code" not in result.content and result.metadata["timeout"] is True


def test_detect(corpus: Path):
    for folder, path in _corpus_sources(corpus):
        assert mini_swe_agent.detect(_source(str(path))) is (folder == FOLDER), path
    assert (
        mini_swe_agent.detect(Source(path=Path("x.jsonl"), kind="jsonl", data=[(1, {})])) is False
    )
    assert mini_swe_agent.detect(Source(path=Path("x"), kind="json", data=None)) is False
    assert mini_swe_agent.detect(Source(path=Path("x"), kind="dir", data=None)) is False
