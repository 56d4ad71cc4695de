"""Hypothesis-driven bad input on every importer and on the append endpoint.

For each format in ``journal_app.formats.FORMATS`` a small valid sample (the first records of
its corpus file; a hand-written one for Anthropic Messages, which has none) is broken in
the ways real input breaks: a value somewhere replaced by null, a wrong type, a huge
string, a lone surrogate, a NUL character, a special-token string or a deep nesting; a key
removed; the file cut at any byte; random JSON; random bytes. Through ``journal_import``
(format named or detected) the only error allowed is ``FormatError``, and when it is raised
nothing is written. On the append endpoint (``POST /api/v1/sessions/{s}/{l}/{b}/entries``)
the only answers allowed are 200 and 4xx in the API's error shape, and a refused batch
writes nothing.

Examples are bounded (``max_examples``) and derandomized, so a run is repeatable and fast;
no database service is needed (SQLite and PostgreSQL alike).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal_app.formats import FORMATS, FormatError
from journal_app.models import Artifact, Chunk, Entry, Journal, Session, Tenant
from journal_app.services import journal_import
from tests.conftest import CORPUS

pytestmark = pytest.mark.django_db

EXAMPLES = 40
HYPOTHESIS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

SAMPLE_FILES = {
    "claude-code-jsonl": CORPUS / "claude-code-jsonl" / "claude-code-session-with-summary-records.jsonl",
    "codex-rollout-jsonl": CORPUS / "codex-rollout-jsonl" / "codex-vscode-long-monorepo-session.jsonl",
    "openhands-events": CORPUS / "openhands-events" / "openhands-ponyc-4588-max-iterations.json",
    "swe-agent-traj": CORPUS / "swe-agent-traj" / "sweagent-function-calling-marshmallow-1867.traj",
    "mini-swe-agent-traj": CORPUS / "mini-swe-agent-traj" / "minisweagent-gemini3-requests-1142-oversized-output.traj.json",
    "atif-trajectory": CORPUS / "atif-trajectory" / "atif-claude-code-regex-log.json",
    "openai-chat": CORPUS / "openai-chat-tool-calls" / "taubench-gpt4o-airline-task3.json",
    "opencode-export": CORPUS / "opencode-export" / "khala-sessions",
}  # fmt: skip
ANTHROPIC = {
    "system": "Never touch the payments tables.",
    "messages": [
        {"role": "user", "content": "Fix the refund rounding."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Running the tests."},
                {"type": "tool_use", "id": "tu1", "name": "exec", "input": {"cmd": "pytest"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "1 failed"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "One test fails."}]},
    ],
}
DEEP = "__DEEP_NESTING__"
HOSTILE: list[Any] = [
    None,
    True,
    0,
    -1,
    2**70,
    1.5,
    "",
    [],
    {},
    [None],
    {"": None},
    "\ud800",
    "text \udfff end",
    "nul \x00 byte",
    "<|endoftext|>",
    "x" * 300_000,
    DEEP,
]


def _shrink(value: Any, items: int = 6, chars: int = 400) -> Any:
    """The first few items of every list and the first characters of every long string."""
    if isinstance(value, list):
        return [_shrink(v, items, chars) for v in value[:items]]
    if isinstance(value, dict):
        return {k: _shrink(v, items, chars) for k, v in value.items()}
    if isinstance(value, str) and len(value) > chars:
        return value[:chars]
    return value


def _sample(fmt: str) -> tuple[str, Any]:
    """``(kind, value)``: ``("jsonl", [records])``, ``("json", value)`` or ``("dir", {name: value})``.

    A format with no sample here (a new importer) skips the tests that break a sample.
    """
    if fmt == "anthropic-messages":
        return "json", ANTHROPIC
    if fmt not in SAMPLE_FILES:
        pytest.skip(f"no valid sample of {fmt!r}: add one to SAMPLE_FILES in {__name__}")
    path = SAMPLE_FILES[fmt]
    if path.is_dir():
        return "dir", {p.name: json.loads(p.read_text()) for p in sorted(path.glob("*.json"))}
    if path.suffix == ".jsonl":
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return "jsonl", [_shrink(r, items=4) for r in lines[:20]]
    data = json.loads(path.read_text())
    return "json", data if path.stat().st_size < 20_000 else _shrink(data)


def _text(value: Any) -> str:
    """JSON text of ``value``; the deep-nesting marker becomes 5,000 nested lists."""
    text = json.dumps(value, ensure_ascii=True)
    return text.replace(json.dumps(DEEP), "[" * 5000 + "]" * 5000)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _replace(value: Any, path: tuple, new: Any, delete: bool) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy = list(value) if isinstance(value, list) else dict(value)
    if delete and not rest:
        del copy[head]
    else:
        copy[head] = _replace(copy[head], rest, new, delete)
    return copy


def _write(tmp: Path, fmt: str, kind: str, value: Any, raw: bytes | None = None) -> Path:
    if kind == "dir":
        folder = tmp / "export"
        folder.mkdir(exist_ok=True)
        for name, data in value.items():
            (folder / name).write_text(_text(data))
        if raw is not None:
            (folder / "parts.json").write_bytes(raw)
        return folder
    suffix = {"jsonl": ".jsonl", "json": ".traj" if fmt == "swe-agent-traj" else ".json"}[kind]
    path = tmp / f"input{suffix}"
    if raw is not None:
        path.write_bytes(raw)
    elif kind == "jsonl":
        path.write_text("\n".join(_text(r) for r in value) + "\n")
    else:
        path.write_text(_text(value))
    return path


def _counts() -> tuple[int, ...]:
    return tuple(m.objects.count() for m in (Tenant, Session, Journal, Entry, Chunk, Artifact))


def _import_refuses_cleanly(path: Path, fmt: str | None) -> str:
    """Import ``path``; only ``FormatError`` may come out, and then nothing is written.

    Runs in a savepoint rolled back afterwards, so examples do not see each other's rows.
    Returns ``"imported"`` or ``"refused"``.
    """
    before = _counts()
    outcome = "imported"
    with transaction.atomic():
        try:
            journal_import(path=path, fmt=fmt, tenant="fuzz", session="fuzz")
        except FormatError as exc:
            assert exc.path and exc.reason, exc
            assert _counts() == before, "a refused import left rows behind"
            outcome = "refused"
        transaction.set_rollback(True)
    return outcome


FORMAT_NAMES = sorted(FORMATS)


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_the_sample_imports_before_it_is_broken(settings, tmp_path, fmt):
    settings.MEDIA_ROOT = tmp_path / "media"
    kind, value = _sample(fmt)
    assert _import_refuses_cleanly(_write(tmp_path, fmt, kind, value), fmt) == "imported"


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@HYPOTHESIS
@given(data=st.data())
def test_a_broken_value_anywhere_gives_only_a_format_error(fmt, settings, tmp_path, data):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9
    kind, value = _sample(fmt)
    paths = _paths(value)
    path = data.draw(st.sampled_from(paths[1:]), label="where")
    delete = data.draw(st.booleans(), label="delete") if path else False
    new = None if delete else data.draw(st.sampled_from(HOSTILE), label="value")
    broken = _replace(value, path, new, delete)
    explicit = data.draw(st.booleans(), label="format named")
    _import_refuses_cleanly(_write(tmp_path, fmt, kind, broken), fmt if explicit else None)


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@HYPOTHESIS
@given(cut=st.floats(min_value=0.0, max_value=0.999), explicit=st.booleans())
def test_a_truncated_file_gives_only_a_format_error(fmt, settings, tmp_path, cut, explicit):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9
    kind, value = _sample(fmt)
    if kind == "dir":
        text = _text(value["parts.json"]).encode()
    elif kind == "jsonl":
        text = ("\n".join(_text(r) for r in value) + "\n").encode()
    else:
        text = _text(value).encode()
    raw = text[: int(len(text) * cut)]
    path = _write(tmp_path, fmt, kind, value, raw=raw)
    _import_refuses_cleanly(path, fmt if explicit else None)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=50),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=30,
)


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@HYPOTHESIS
@given(value=JSON_VALUES, as_lines=st.booleans(), explicit=st.booleans())
def test_random_json_gives_only_a_format_error(fmt, settings, tmp_path, value, as_lines, explicit):
    settings.MEDIA_ROOT = tmp_path / "media"
    kind, sample = _sample(fmt) if fmt == "opencode-export" else ("json", None)
    if kind == "dir":
        path = _write(tmp_path, fmt, kind, {**sample, "messages.json": value})
    elif as_lines:
        items = value if isinstance(value, list) else [value]
        path = _write(tmp_path, fmt, "jsonl", items)
    else:
        path = _write(tmp_path, fmt, "json", value)
    _import_refuses_cleanly(path, fmt if explicit else None)


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@HYPOTHESIS
@given(raw=st.binary(max_size=300))
def test_random_bytes_give_only_a_format_error(fmt, settings, tmp_path, raw):
    settings.MEDIA_ROOT = tmp_path / "media"
    lines = SAMPLE_FILES.get(fmt, Path()).suffix == ".jsonl"
    kind, sample = (
        _sample(fmt) if fmt == "opencode-export" else ("jsonl" if lines else "json", None)
    )
    _import_refuses_cleanly(_write(tmp_path, fmt, kind, sample, raw=raw), fmt)


# --- the append endpoint -------------------------------------------------------------------

APPEND = "/api/v1/sessions/fuzz/main/main/entries"
GOOD_ENTRY = {"kind": "message", "role": "user", "content": {"text": "Fix the refund rounding."}}
HOSTILE_JSON = st.sampled_from([v for v in HOSTILE if v != DEEP])
FIELDS = ("kind", "role", "content", "tool_call_id", "tool_name", "derived", "metadata", "usage")


@st.composite
def _entry(draw: st.DrawFn) -> Any:
    """A valid entry with one or two fields broken (or an extra field, or not an object)."""
    if draw(st.integers(0, 9)) == 0:
        return draw(HOSTILE_JSON)
    entry: dict[str, Any] = dict(GOOD_ENTRY)
    for _ in range(draw(st.integers(1, 2))):
        field = draw(st.sampled_from((*FIELDS, "content.text", "content.output", "extra")))
        value = draw(
            HOSTILE_JSON | st.sampled_from(["message", "tool_call", "tool_result", "user"])
        )
        if field.startswith("content."):
            content = entry["content"] if isinstance(entry["content"], dict) else {}
            entry["content"] = {**content, field.split(".", 1)[1]: value}
        else:
            entry[field] = value
    return entry


@pytest.fixture
def append_client(client):
    from journal_app.auth import api_key_create
    from journal_app.services import tenant_ensure

    _, raw = api_key_create(tenant=tenant_ensure(slug="fuzz"), name="fuzz")

    def post(body: bytes) -> Any:
        with transaction.atomic():
            before = _counts()
            response = client.generic(
                "POST", APPEND, body, content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {raw}",
            )  # fmt: skip
            assert response.status_code == 200 or 400 <= response.status_code < 500, (
                response.status_code,
                response.content[:500],
            )
            if response.status_code != 200:
                assert set(response.json()) >= {"code", "message"}, response.content[:500]
                assert _counts() == before, "a refused append left rows behind"
            transaction.set_rollback(True)
        return response

    return post


@HYPOTHESIS
@given(
    start_seq=st.sampled_from([1, 1, 1, 0, -1, 2, 2**63, "1", None, 1.0]),
    entries=st.lists(_entry(), min_size=0, max_size=3),
    extra=st.booleans(),
)
def test_a_broken_append_batch_gets_a_4xx_and_writes_nothing(
    append_client, settings, tmp_path, start_seq, entries, extra
):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9
    body: dict[str, Any] = {"start_seq": start_seq, "entries": entries}
    if extra:
        body["unknown"] = True
    append_client(_text(body).encode())


@HYPOTHESIS
@given(
    cut=st.floats(min_value=0.0, max_value=0.999),
    raw=st.binary(max_size=200),
    mode=st.integers(0, 2),
)
def test_a_truncated_deep_or_random_append_body_gets_a_4xx_and_writes_nothing(
    append_client, settings, tmp_path, cut, raw, mode
):
    settings.MEDIA_ROOT = tmp_path / "media"
    text = _text({"start_seq": 1, "entries": [GOOD_ENTRY, {**GOOD_ENTRY, "metadata": {"a": DEEP}}]})
    body = [text.encode()[: int(len(text) * cut)], text.encode(), raw][mode]
    append_client(body)


# --- findings of the runs above, pinned as plain cases ---------------------------------------


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_json_nested_deeper_than_the_parser_can_go_is_a_format_error(tmp_path, suffix):
    path = tmp_path / f"deep{suffix}"
    path.write_text("[" * 5000 + "]" * 5000 + "\n")
    _import_refuses_cleanly(path, None)


@pytest.mark.parametrize("value", ["\ud800", 2**70], ids=["lone-surrogate", "huge-int"])
def test_session_metadata_that_cannot_be_canonical_is_a_format_error(settings, tmp_path, value):
    settings.MEDIA_ROOT = tmp_path / "media"
    kind, sample = _sample("swe-agent-traj")
    path = _write(tmp_path, "swe-agent-traj", kind, {**sample, "trajectory": value})
    _import_refuses_cleanly(path, "swe-agent-traj")


def test_a_lane_name_from_the_source_that_is_not_a_scope_name_is_a_format_error(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    kind, sample = _sample("opencode-export")
    messages = [dict(m) for m in sample["messages.json"]]
    messages[0]["session_id"] = "nul \x00 byte"
    path = _write(tmp_path, "opencode-export", kind, {**sample, "messages.json": messages})
    _import_refuses_cleanly(path, "opencode-export")


@pytest.mark.parametrize(
    "name, text", [("export.json", "[]"), ("export.json", "5"), ("export.jsonl", "1\n2\n")]
)
def test_a_ledgerkeep_export_that_is_not_json_lines_of_records_is_a_format_error(
    tmp_path, name, text
):
    path = tmp_path / name
    path.write_text(text)
    _import_refuses_cleanly(path, "ledgerkeep-export")


def test_a_nul_character_in_a_message_is_refused_or_stored_never_a_database_error(
    settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path / "media"
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "before \x00 after"}]))
    _import_refuses_cleanly(path, "openai-chat")


@pytest.mark.parametrize("field", ["content.text", "metadata", "tool_name"])
def test_a_nul_character_in_an_appended_entry_gets_a_4xx_or_is_stored(append_client, field):
    entry: dict[str, Any] = {**GOOD_ENTRY, "content": {"text": "ok"}}
    if field == "content.text":
        entry["content"] = {"text": "before \x00 after"}
    elif field == "metadata":
        entry["metadata"] = {"note": "before \x00 after"}
    else:
        entry["tool_name"] = "exec\x00"
    append_client(json.dumps({"start_seq": 1, "entries": [entry]}).encode())
