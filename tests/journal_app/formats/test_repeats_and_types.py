"""Repeated source records, wrong-typed arguments and orphaned observations.

Each case starts from a real corpus file and changes one thing: a record repeated (read
once, counted, never a fabricated ``#2`` call), a record reusing an id with other content
(refused naming both places), tool arguments of the wrong type, an OpenHands observation
of no earlier action, a float where OpenHands expects ``tool_calls``. Refusals are clear
errors naming the file, the place and the field, with nothing written, on the command line
and the API alike.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from journal_app.formats import FormatError, parse_path
from journal_app.models import Entry, Session
from journal_app.services import journal_import
from tests.conftest import CORPUS

CLAUDE = CORPUS / "claude-code-jsonl" / "claude-code-session-frontend-refactor.jsonl"
CODEX = CORPUS / "codex-rollout-jsonl" / "codex-vscode-long-monorepo-session.jsonl"
OPENCODE = CORPUS / "opencode-export" / "khala-sessions"
OPENHANDS = CORPUS / "openhands-events" / "openhands-ponyc-4588-max-iterations.json"


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _first_index(lines: list[str], test) -> int:
    return next(i for i, line in enumerate(lines) if test(json.loads(line)))


def _is_claude_call(r: dict) -> bool:
    content = (r.get("message") or {}).get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_use" for b in content)


# -- repeated records ---------------------------------------------------------------------


def test_a_repeated_claude_code_line_is_read_once_and_counted(tmp_path):
    lines = _lines(CLAUDE)
    i = _first_index(lines, _is_claude_call)
    path = _write_lines(tmp_path / "s.jsonl", lines[: i + 1] + [lines[i]] + lines[i + 1 :])
    original, repeated = parse_path(CLAUDE), parse_path(path)
    assert len(repeated.entries) == len(original.entries)
    assert repeated.metadata["duplicates"] == {
        "count": 1,
        "records": [f"line {i + 2} repeats line {i + 1}"],
    }
    ids = [e.tool_call_id for e in repeated.entries if e.kind == "tool_call"]
    assert len(ids) == len(set(ids)) and not any("#" in x for x in ids)


def test_a_claude_code_uuid_reused_with_other_content_is_refused(tmp_path):
    lines = _lines(CLAUDE)
    i = _first_index(lines, _is_claude_call)
    record = json.loads(lines[i])
    record["timestamp"] = "2030-01-01T00:00:00Z"
    path = _write_lines(tmp_path / "s.jsonl", lines + [json.dumps(record)])
    with pytest.raises(FormatError) as exc:
        parse_path(path)
    assert exc.value.location == f"line {len(lines) + 1}" and exc.value.field == "uuid"
    assert f"line {i + 1}" in exc.value.reason


def test_a_repeated_codex_line_is_read_once_and_counted(tmp_path):
    lines = _lines(CODEX)[:120]
    i = _first_index(lines, lambda r: (r.get("payload") or {}).get("type") == "function_call")
    path = _write_lines(tmp_path / "r.jsonl", lines[: i + 1] + [lines[i]] + lines[i + 1 :])
    base = _write_lines(tmp_path / "base.jsonl", lines)
    repeated, original = parse_path(path), parse_path(base)
    assert [e.content for e in repeated.entries] == [e.content for e in original.entries]
    assert repeated.metadata["duplicates"]["count"] == 1


def test_a_codex_call_id_reused_by_another_call_is_refused(tmp_path):
    lines = _lines(CODEX)[:120]
    i = _first_index(lines, lambda r: (r.get("payload") or {}).get("type") == "function_call")
    record = json.loads(lines[i])
    record["timestamp"] = "2030-01-01T00:00:00.000Z"
    path = _write_lines(tmp_path / "r.jsonl", lines + [json.dumps(record)])
    with pytest.raises(FormatError, match="second tool call with id") as exc:
        parse_path(path)
    assert exc.value.location == f"line {len(lines) + 1}"


def _opencode_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "export"
    shutil.copytree(OPENCODE, folder)
    return folder


def _tool_part_index(parts: list[dict]) -> int:
    return next(i for i, p in enumerate(parts) if json.loads(p["data"]).get("type") == "tool")


def test_a_repeated_opencode_tool_part_never_becomes_a_second_call(tmp_path):
    folder = _opencode_copy(tmp_path)
    parts = json.loads((folder / "parts.json").read_text())
    i = _tool_part_index(parts)
    parts.insert(i + 1, copy.deepcopy(parts[i]))
    (folder / "parts.json").write_text(json.dumps(parts))
    session = parse_path(folder)
    ids = [e.tool_call_id for e in session.entries if e.kind == "tool_call"]
    assert not any(x.endswith("#2") for x in ids) and len(ids) == len(set(ids))
    assert len(session.entries) == len(parse_path(OPENCODE).entries)
    assert session.metadata["duplicates"] == {
        "count": 1,
        "records": [f"parts.json index {i + 1} repeats index {i}"],
    }


def test_an_opencode_part_id_reused_with_other_content_is_refused(tmp_path):
    folder = _opencode_copy(tmp_path)
    parts = json.loads((folder / "parts.json").read_text())
    i = _tool_part_index(parts)
    twin = copy.deepcopy(parts[i])
    twin["time_updated"] = (twin.get("time_updated") or 0) + 1
    parts.append(twin)
    (folder / "parts.json").write_text(json.dumps(parts))
    with pytest.raises(FormatError) as exc:
        parse_path(folder)
    assert exc.value.path.endswith("parts.json") and exc.value.field == "id"
    assert exc.value.location == f"index {len(parts) - 1}" and f"index {i}" in exc.value.reason


# -- wrong-typed arguments ----------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("bad", [5, 1.5, [1, 2], True])
def test_wrong_typed_claude_code_tool_input_is_a_clear_error_with_nothing_written(tmp_path, bad):
    lines = _lines(CLAUDE)
    i = _first_index(lines, _is_claude_call)
    record = json.loads(lines[i])
    block = next(b for b in record["message"]["content"] if b["type"] == "tool_use")
    block["input"] = bad
    path = _write_lines(tmp_path / "s.jsonl", lines[:i] + [json.dumps(record)] + lines[i + 1 :])
    with pytest.raises(FormatError) as exc:
        journal_import(path=path, tenant="acme", session="s")
    assert exc.value.location == f"line {i + 1}" and exc.value.field == "content.arguments"
    assert not Session.objects.exists() and not Entry.objects.exists()


def test_a_json_string_that_is_not_an_object_is_kept_as_the_string_sent(tmp_path):
    lines = _lines(CODEX)[:120]
    i = _first_index(lines, lambda r: (r.get("payload") or {}).get("type") == "function_call")
    record = json.loads(lines[i])
    record["payload"]["arguments"] = "[1, 2]"
    path = _write_lines(tmp_path / "r.jsonl", lines[:i] + [json.dumps(record)] + lines[i + 1 :])
    call = next(e for e in parse_path(path).entries if e.source_ref == f"line {i + 1}")
    assert call.content["arguments"] == "[1, 2]"


# -- OpenHands ------------------------------------------------------------------------------


def _openhands(tmp_path: Path, edit) -> Path:
    record = json.loads(OPENHANDS.read_text())
    edit(record["history"])
    path = tmp_path / "oh.json"
    path.write_text(json.dumps(record))
    return path


def _first_tool_action(history: list[dict]) -> int:
    return next(i for i, e in enumerate(history) if "action" in e and e.get("tool_call_metadata"))


def test_an_orphaned_openhands_observation_is_refused_naming_it(tmp_path):
    def edit(history):
        i = next(i for i, e in enumerate(history) if "observation" in e and e.get("cause"))
        history[i]["cause"] = 987654

    path = _openhands(tmp_path, edit)
    with pytest.raises(FormatError, match="orphaned observation") as exc:
        parse_path(path)
    assert exc.value.field == "cause" and exc.value.location.startswith("history[")


def test_an_observation_of_an_unknown_tool_call_is_refused(tmp_path):
    def edit(history):
        i = next(i for i, e in enumerate(history) if "observation" in e and e.get("cause"))
        history[i]["cause"] = None
        history[i]["tool_call_metadata"] = {"tool_call_id": "toolu_nowhere", "function_name": "x"}

    with pytest.raises(FormatError, match="orphaned observation") as exc:
        parse_path(_openhands(tmp_path, edit))
    assert exc.value.field == "tool_call_metadata.tool_call_id"


def _float_tool_calls(history):
    i = _first_tool_action(history)
    msg = history[i]["tool_call_metadata"]["model_response"]["choices"][0]["message"]
    msg["tool_calls"] = 5668.0


def test_a_float_for_openhands_tool_calls_is_a_clear_error(tmp_path):
    with pytest.raises(FormatError) as exc:
        parse_path(_openhands(tmp_path, _float_tool_calls))
    assert exc.value.field.endswith("message.tool_calls") and "float" in exc.value.reason


@pytest.mark.django_db
def test_the_openhands_float_is_a_command_error_not_a_traceback(tmp_path):
    path = _openhands(tmp_path, _float_tool_calls)
    with pytest.raises(CommandError, match="nothing written.*tool_calls"):
        call_command(
            "import_journal", str(path), "--tenant", "acme", "--create-tenant", "--no-progress"
        )
    assert not Entry.objects.exists()


@pytest.mark.django_db
def test_the_openhands_float_is_a_422_on_the_api(tmp_path):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client

    from journal_app.auth import api_key_create
    from tests.factories import TenantFactory

    tenant = TenantFactory(slug="acme")
    _, secret = api_key_create(tenant=tenant, name="t")
    path = _openhands(tmp_path, _float_tool_calls)
    response = Client().post(
        "/api/v1/sessions/s1/main/main/import",
        {"file": SimpleUploadedFile("oh.json", path.read_bytes())},
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )
    assert response.status_code == 422, response.content
    assert "tool_calls" in response.json()["message"]
    assert not Entry.objects.exists()
