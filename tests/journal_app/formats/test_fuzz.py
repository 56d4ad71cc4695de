"""Fuzzing every importer over real corpus files. Pure: no database.

For each importer a real file of its format (the corpus, or a bundled case for Anthropic
Messages, or an export built from a corpus file for ``ledgerkeep-export``) is cut to its
first records, then hypothesis changes it: a value anywhere replaced by a value of another
type (numbers, floats, null, lists, objects, strings with NUL or lone surrogates), a key
removed, a record repeated. The outcome must be a clean :class:`FormatError` (or the
:class:`EntryInvalid` that ``journal_import`` turns into one) or a session whose entries
hash into a valid chain: never any other exception, which would be a traceback on the
command line and a 500 on the API.

Bounded: ``MAX_EXAMPLES`` per importer keeps each importer's run to a few seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal_app.chain import prepare_entries
from journal_app.entry_validation import EntryInvalid
from journal_app.formats import FORMATS, FormatError, parse_path
from journal_app.formats.base import ParsedEntry
from tests.conftest import CORPUS

#: a few seconds per importer; ``FUZZ_EXAMPLES=2000`` (random, not derandomized) digs deeper
MAX_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "60"))
KEEP = 24  # records (lines, list items) kept from each real file

SCOPE = {"tenant": "t", "session": "s", "lane": "main", "branch": "main"}

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=12),
    st.sampled_from(["", "\x00", "\ud800", "user", "tool", "assistant", "{}", "[]", "5"]),
)
values = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _cut(value: Any, depth: int = 0) -> Any:
    """The value with every list shortened to its first ``KEEP`` items (structure kept)."""
    if isinstance(value, list):
        return [_cut(v, depth + 1) for v in value[:KEEP]]
    if isinstance(value, dict):
        return {k: _cut(v, depth + 1) for k, v in value.items()}
    return value


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _get(value: Any, path: tuple) -> Any:
    for key in path:
        value = value[key]
    return value


def _mutate(doc: Any, data: st.DataObject) -> Any:
    """Apply one to three random changes to a JSON document (in place where it can)."""
    for _ in range(data.draw(st.integers(1, 3), label="changes")):
        paths = _paths(doc)
        path = paths[data.draw(st.integers(0, len(paths) - 1), label="where")]
        action = data.draw(st.sampled_from(["replace", "delete", "repeat"]), label="action")
        if not path:
            if action == "replace":
                doc = data.draw(values, label="document")
            continue
        parent, key = _get(doc, path[:-1]), path[-1]
        if action == "replace":
            parent[key] = data.draw(values, label="value")
        elif action == "delete":
            del parent[key]
        elif isinstance(parent, list):
            parent.insert(key, json.loads(json.dumps(parent[key])))
    return doc


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _write(path: Path, text: str) -> None:
    path.write_bytes(text.encode("utf-8", errors="surrogatepass"))


class Seed:
    """A real file of one format, cut short, that hypothesis changes and writes back."""

    def __init__(self, fmt: str, source: Path) -> None:
        self.fmt = fmt
        self.source = source

    def document(self) -> Any:
        if self.source.suffix == ".jsonl":
            lines = self.source.read_text(encoding="utf-8").splitlines()
            return [json.loads(line) for line in lines if line.strip()][:KEEP]
        return _cut(json.loads(self.source.read_text(encoding="utf-8")))

    def write(self, doc: Any, folder: Path) -> Path:
        out = folder / self.source.name
        if self.source.suffix == ".jsonl":
            rows = doc if isinstance(doc, list) else [doc]
            _write(out, "\n".join(_dump(r) for r in rows) + "\n")
        else:
            _write(out, _dump(doc))
        return out


class OpenCodeSeed(Seed):
    """The export folder: the first messages, their parts, the session rows."""

    FILES = ("sessions.json", "messages.json", "parts.json", "session_messages.json")

    def document(self) -> Any:
        doc = {n: json.loads((self.source / n).read_text()) for n in self.FILES}
        doc["messages.json"] = doc["messages.json"][:8]
        kept = {m["id"] for m in doc["messages.json"]}
        doc["parts.json"] = [p for p in doc["parts.json"] if p["message_id"] in kept][:KEEP]
        doc["session_messages.json"] = doc["session_messages.json"][:4]
        for rows in (doc["messages.json"], doc["parts.json"]):  # decode to fuzz inside
            for row in rows:
                row["data"] = json.loads(row["data"])
        return doc

    def write(self, doc: Any, folder: Path) -> Path:
        out = folder / "export"
        out.mkdir()
        if not isinstance(doc, dict):
            doc = {"messages.json": doc}
        for name, rows in doc.items():
            if name in ("messages.json", "parts.json") and isinstance(rows, list):
                rows = [
                    {**r, "data": _dump(r["data"])}
                    if isinstance(r, dict) and isinstance(r.get("data"), dict)
                    else r
                    for r in rows
                ]
            if isinstance(name, str) and name in self.FILES:
                _write(out / name, _dump(rows))
        return out


class ExportSeed(Seed):
    """A ledgerkeep export of a corpus file, built without a database; after each change
    the closing record's digest and counts are recomputed, so the checks past the digest
    are fuzzed too."""

    def document(self) -> Any:
        parsed = parse_path(self.source)
        prepared = prepare_entries(
            scope=SCOPE,
            start_seq=1,
            parent_hash="",
            items=parsed.entries[:KEEP],
            chunk_bytes=256,
        )
        head = {"lane": "main", "branch": "main", "head_seq": len(prepared)}
        head["head_hash"] = prepared[-1].entry_hash
        rows: list[Any] = [
            {
                "type": "header",
                "format": "ledgerkeep-export",
                "version": 1,
                "scope": {"tenant": "t", "session": "s"},
                "title": parsed.title,
                "journals": [{**head, "chunk_bytes": 256}],
            },
            {"type": "journal", **head, "chunk_bytes": 256},
        ]
        for p in prepared:
            rows.append(
                {
                    "type": "entry",
                    "lane": "main",
                    "branch": "main",
                    "seq": p.seq,
                    "kind": p.kind,
                    "role": p.role,
                    "tool_call_id": p.tool_call_id,
                    "tool_name": p.tool_name,
                    "derived": p.derived,
                    "is_error": p.is_error,
                    "body": p.body,
                    "meta": p.meta,
                    "body_hash": p.body_hash,
                    "byte_length": p.byte_length,
                    "meta_hash": p.meta_hash,
                    "parent_hash": p.parent_hash,
                    "entry_hash": p.entry_hash,
                    "chunks": [[c.position, c.offset, c.length, c.hash] for c in p.chunks],
                }
            )
        return rows

    def write(self, doc: Any, folder: Path) -> Path:
        rows = doc if isinstance(doc, list) else [doc]
        body = "".join(_dump(r).replace("\u2028", "\\u2028") + "\n" for r in rows)
        data = body.encode("utf-8", errors="surrogatepass")
        entries = sum(1 for r in rows if isinstance(r, dict) and r.get("type") == "entry")
        end = {"type": "end", "records": len(rows), "entries": entries}
        end["sha256"] = hashlib.sha256(data).hexdigest()
        out = folder / "export.jsonl"
        out.write_bytes(data + (json.dumps(end) + "\n").encode())
        return out


SEEDS = {
    "claude-code-jsonl": Seed(
        "claude-code-jsonl",
        CORPUS / "claude-code-jsonl" / "claude-code-session-frontend-refactor.jsonl",
    ),
    "codex-rollout-jsonl": Seed(
        "codex-rollout-jsonl",
        CORPUS / "codex-rollout-jsonl" / "codex-vscode-long-monorepo-session.jsonl",
    ),
    "openhands-events": Seed(
        "openhands-events",
        CORPUS / "openhands-events" / "openhands-ponyc-4588-max-iterations.json",
    ),
    "swe-agent-traj": Seed(
        "swe-agent-traj",
        CORPUS / "swe-agent-traj" / "sweagent-function-calling-marshmallow-1867.traj",
    ),
    "mini-swe-agent-traj": Seed(
        "mini-swe-agent-traj",
        CORPUS
        / "mini-swe-agent-traj"
        / "minisweagent-gemini3-requests-1142-oversized-output.traj.json",
    ),
    "atif-trajectory": Seed(
        "atif-trajectory", CORPUS / "atif-trajectory" / "atif-claude-code-regex-log.json"
    ),
    "openai-chat": Seed(
        "openai-chat", CORPUS / "openai-chat-tool-calls" / "taubench-gpt4o-airline-task3.json"
    ),
    "anthropic-messages": Seed(
        "anthropic-messages",
        Path(__file__).parents[2]
        / "fixtures"
        / "cases"
        / "04-dangling-tool-use-in-compaction-request.json",
    ),
    "opencode-export": OpenCodeSeed(
        "opencode-export", CORPUS / "opencode-export" / "khala-sessions"
    ),
    "ledgerkeep-export": ExportSeed(
        "ledgerkeep-export", CORPUS / "openai-chat-tool-calls" / "taubench-gpt4o-airline-task3.json"
    ),
}


def _outcome(seed: Seed, doc: Any) -> str:
    with tempfile.TemporaryDirectory() as folder:
        path = seed.write(doc, Path(folder))
        try:
            session = parse_path(path, seed.fmt)
            # what journal_append does with the items before any row is written
            prepare_entries(
                scope=SCOPE, start_seq=1, parent_hash="", items=session.entries, chunk_bytes=512
            )
        except (FormatError, EntryInvalid):
            return "refused"
    assert all(isinstance(e, ParsedEntry) for e in session.entries)
    return "imported"


def test_every_importer_has_a_fuzz_seed():
    assert set(SEEDS) >= set(FORMATS) - {"openai-responses"}


@pytest.mark.parametrize("fmt", sorted(SEEDS))
def test_the_unchanged_seed_imports(fmt):
    seed = SEEDS[fmt]
    assert _outcome(seed, seed.document()) == "imported"


@pytest.mark.parametrize("fmt", sorted(SEEDS))
def test_a_changed_file_is_a_clean_error_or_a_valid_journal(fmt):
    seed = SEEDS[fmt]
    original = seed.document()

    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        derandomize="FUZZ_EXAMPLES" not in os.environ,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        doc = _mutate(json.loads(json.dumps(original)), data)
        _outcome(seed, doc)  # any exception but a clean refusal fails the test

    run()
