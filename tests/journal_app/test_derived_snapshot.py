"""The derived rows' privacy spans and identifiers are exactly what they were before the scan
was made cheaper (gated identifier patterns, one privacy scan per text shared by the
identifiers and the search index).

``tests/fixtures/derived/corpus_derived.json.gz`` was written by this module's writer
(``python tests/journal_app/test_derived_snapshot.py``) from the code before those changes:
per corpus source, per entry, the identifiers (:func:`journal_app.identifiers.identifiers_of`,
dumped), the privacy findings of the text the search index filters
(:func:`journal_app.privacy.findings` of :func:`journal_app.content.content_text`) and, for a
tool call, of each string argument. Rewrite it only for an intended change of the rules.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if __name__ == "__main__":  # the writer runs from a checkout, not through pytest
    sys.path.insert(0, str(ROOT))

from journal_app import identifiers, privacy  # noqa: E402
from journal_app.content import content_text  # noqa: E402
from journal_app.formats import parse_path  # noqa: E402
from journal_app.identifiers import (  # noqa: E402
    _strings,
    extract_identifiers,
    identifiers_dump,
    identifiers_of,
)

CORPUS = ROOT / "tests" / "fixtures" / "corpus"
SNAPSHOT = ROOT / "tests" / "fixtures" / "derived" / "corpus_derived.json.gz"

#: shapes each gated identifier pattern finds, and near misses around its gate
TRICKY = [
    "see https://x.org/a.py, ftp://h/f and file:///tmp/x.",
    "call_8f3a9b2c1d toolu_01AbC9xyz fc_68a1b2 recall_x",
    "sha256:1a2b3c4d5e6f md5:abcdef12 sha1:ABCDEF0 sha:1234567",
    "550e8400-e29b-41d4-a716-446655440000 and 550e8400-e29b",
    "payments.0097_auto_20240101_1200 0001_initial 97_auto 0097",
    "ABC-123 CVE-2024-1234 UTF-8 SHA-256 abc-123 A-1",
    "#1234 &#39; #fff #",
    "--skip-locked-tables -x -rf re-run - item -5 ---",
    "12.4ms 1200 ms 3 GB 7B 8 tests 270,000 tokens 99% 5m30s $12.50 x86 v1.2",
    "4d74c33 1a2b3c4d5e6f deadbeef cafe 1234567 abc123 ABCDEF0123",
    "٣٤٥٦_x ١٢٣٤ tokens",  # non-ASCII digits: \d matches them
    "C:\\Users\\me\\a.txt ~/notes.md ./run.sh ../x manage.py .env",
    "",
    "no identifiers here at all",
]


def sources() -> list[Path]:
    """Every corpus transcript (the OpenCode export as its folder), sorted."""
    files = [
        p
        for p in CORPUS.glob("*/*")
        if p.is_file()
        and p.suffix in (".json", ".jsonl", ".traj")
        and p.parent.name != "opencode-export"
    ]
    return sorted([*files, CORPUS / "opencode-export" / "khala-sessions"])


def entry_identifiers(e: Any, findings: Any = None) -> list[Any]:
    """:func:`identifiers_of` a parsed entry, as the derived rows call it."""
    return identifiers_of(
        kind=e.kind,
        text=content_text(e.kind, e.content),
        content=e.content if e.kind == "tool_call" else {},
        tool_call_id=e.tool_call_id,
        derived=e.derived,
        findings=findings,
    )


def derived(path: Path) -> list[dict[str, Any]]:
    """The snapshot rows of one source (see the module docstring)."""
    rows = []
    for e in parse_path(path).entries:
        text = content_text(e.kind, e.content)
        row: dict[str, Any] = {
            "ids": identifiers_dump(entry_identifiers(e)),
            "spans": [list(f) for f in privacy.findings(text)],
        }
        if e.kind == "tool_call":
            row["arg_spans"] = [
                [list(f) for f in privacy.findings(v)] for v in _strings(e.content.get("arguments"))
            ]
        rows.append(row)
    return rows


def snapshot() -> dict[str, list[dict[str, Any]]]:
    """``{source path relative to the corpus: rows}``."""
    return {p.relative_to(CORPUS).as_posix(): derived(p) for p in sources()}


def corpus_texts() -> list[str]:
    """Every text the identifiers read from the corpus (entry texts and tool arguments)."""
    texts = []
    for path in sources():
        for e in parse_path(path).entries:
            texts.append(content_text(e.kind, e.content))
            if e.kind == "tool_call":
                texts.extend(_strings(e.content.get("arguments")))
    return texts


def test_every_corpus_entry_derives_the_snapshots_identifiers_and_spans():
    expected = json.loads(gzip.decompress(SNAPSHOT.read_bytes()))
    got = json.loads(json.dumps(snapshot()))

    assert sorted(got) == sorted(expected)
    for source, rows in expected.items():
        assert len(got[source]) == len(rows), source
        for n, (new, old) in enumerate(zip(got[source], rows, strict=True)):
            assert new == old, f"{source} entry {n + 1}"
    # the snapshot is not empty: identifiers of every kind found and a secret among them
    kinds = {k for rows in expected.values() for r in rows for k, _ in r["ids"]}
    assert {"path", "command", "number", "flag"} <= kinds
    assert any(r["spans"] for rows in expected.values() for r in rows)


def test_the_gates_only_skip_patterns_that_would_find_nothing(monkeypatch):
    texts = [*corpus_texts(), *TRICKY]
    gated = [extract_identifiers(t) for t in texts]
    monkeypatch.setattr(identifiers, "_GATES", {})  # every pattern over every text
    plain = [extract_identifiers(t) for t in texts]

    assert gated == plain
    found = {i.kind for idents in plain for i in idents}
    assert found == {"path", "url", "hash", "flag", "number", "id", "migration"}


def test_a_gate_skips_a_pattern_with_no_anchor_in_the_text(monkeypatch):
    ran = []
    spied = tuple((kind, _Spy(p, ran)) for kind, p in identifiers._PATTERNS)
    monkeypatch.setattr(identifiers, "_GATES", {s: identifiers._GATES[s.real] for _, s in spied})
    monkeypatch.setattr(identifiers, "_PATTERNS", spied)

    extract_identifiers("plain words, then billing/refunds.py")

    # no digit, dash, '#', '://', tool call id or hash prefix: only the path pattern runs
    assert ran == [identifiers._PATH_TOKEN.pattern]


class _Spy:
    """A compiled pattern that records each text it scans."""

    def __init__(self, real: Any, ran: list[str]) -> None:
        self.real, self.ran = real, ran

    def finditer(self, text: str) -> Any:
        self.ran.append(self.real.pattern)
        return self.real.finditer(text)


def test_a_shared_memo_scans_a_text_once_and_changes_nothing(monkeypatch):
    entries = parse_path(sorted(CORPUS.glob("claude-code-jsonl/*.jsonl"))[0]).entries
    alone = [entry_identifiers(e) for e in entries]
    plain = [privacy.filter_text(content_text(e.kind, e.content)) for e in entries]
    scanned: list[str] = []
    real = privacy.findings
    monkeypatch.setattr(privacy, "findings", lambda t: scanned.append(t) or real(t))
    find = privacy.memo_findings()
    shared, filtered = [], []
    for e in entries:
        text = content_text(e.kind, e.content)
        shared.append(entry_identifiers(e, find))
        # the search index's filter of the same text: read from the memo
        filtered.append(privacy.filter_text(text, found=find(text)))

    assert shared == alone
    assert filtered == plain
    assert len(scanned) == len(set(scanned))  # each distinct text scanned once
    assert any(i for i in shared)


def test_a_bounded_memo_forgets_before_it_holds_more_than_its_bound(monkeypatch):
    scanned: list[str] = []
    real = privacy.findings
    monkeypatch.setattr(privacy, "findings", lambda t: scanned.append(t) or real(t))
    find = privacy.memo_findings(max_chars=10)
    secret = "password: Sup3rS3cretValue99"
    first = find(secret)  # 28 characters: more than the bound alone, still remembered
    assert find(secret) is first and scanned == [secret]
    find("abcdef")  # would pass the bound: the memo is emptied first
    assert find("abcdef") is not None and scanned == [secret, "abcdef"]
    assert find(secret) == first and scanned == [secret, "abcdef", secret]  # scanned again


if __name__ == "__main__":
    data = json.dumps(snapshot(), sort_keys=True, ensure_ascii=False).encode("utf-8")
    SNAPSHOT.write_bytes(gzip.compress(data, mtime=0))
    print(f"wrote {SNAPSHOT} ({len(data):,} bytes before gzip)")
