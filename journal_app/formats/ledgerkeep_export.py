"""Importer for ledgerkeep's own session export (``ledger_app.export``), so it is re-importable.

Pure module. The export is JSON Lines: a ``header`` (format ``ledgerkeep-export``,
version 1, the scope), per journal a ``journal`` record and its ``entry`` records, then
folds, retirements, comments and other records, and a closing ``end`` record carrying the
sha256 of every byte before it.

Everything is checked before anything is returned (nothing half-written):

* the ``end`` record is there, its counts match, and the file's bytes hash to its sha256
  (a truncated or edited export is refused);
* each entry's body and metadata are canonical JSON (RFC 8785) and hash to the exported
  ``body_hash``/``meta_hash``/``byte_length``, its chunks are the ones the body cuts into,
  seq runs 1, 2, 3 ... per lane, each ``parent_hash`` is the previous ``entry_hash``, and the
  ``entry_hash`` recomputed from the exported scope matches.

Each entry becomes a :class:`ParsedEntry` whose content and metadata give back the exported
body and metadata byte for byte, so importing the export into the scope it came from
(``--tenant`` and ``--session`` as in the header, ``--branch`` the exported branch)
reproduces every entry hash: the import is then a no-op on the original database and a
faithful copy on a fresh one. Into another scope the hashes differ, as they must (the scope
is part of the hash header, docs/design.md section 4). Lanes come from the export; an export
holding several branches is refused (an import writes one branch).

Into any other scope the entries are re-hashed for that scope (body hashes unchanged).
Folds, retirements, comments and receipts are read by :func:`export_records` (the same
file checks) and re-created by ``ledger_app.services.reimport`` once the journal is in
(``manage.py import_journal`` does both in one transaction).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from journal_app.chunking import chunk
from journal_app.formats.base import FormatError, ParsedEntry, ParsedSession
from journal_app.formats.source import Source, read_source
from journal_app.hashing import (
    CanonicalisationError,
    body_hash,
    canonical_body,
    entry_hash,
    entry_header,
)

NAME = "ledgerkeep-export"
VERSION = 1


def detect(source: Source) -> bool:
    """A JSON Lines file whose first record is a ``header`` of format ``ledgerkeep-export``."""
    source = source.detection_view()  # a large file: its bounded preview
    if source.kind != "jsonl" or not source.data:
        return False
    first = source.data[0][1]
    return isinstance(first, dict) and first.get("type") == "header" and first.get("format") == NAME


def _field(
    path: Any, line: int, record: dict[str, Any], name: str, kind: type | tuple[type, ...]
) -> Any:
    value = record.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise FormatError(path, f"line {line}", name, f"expected {want}, got {value!r:.60}")
    return value


def _check_file_digest(source: Source, rows: list[tuple[int, Any]]) -> None:
    end_line, end = rows[-1]
    if not (isinstance(end, dict) and end.get("type") == "end"):
        raise FormatError(
            source.path,
            f"line {end_line}",
            "type",
            "the export has no closing 'end' record: the file is truncated",
        )
    raw = source.path.read_bytes()
    cut = raw.rstrip(b"\n").rfind(b"\n") + 1
    digest = hashlib.sha256(raw[:cut]).hexdigest()
    if end.get("sha256") != digest:
        raise FormatError(
            source.path,
            f"line {end_line}",
            "sha256",
            f"the file's bytes hash to sha256:{digest}, the export says "
            f"sha256:{end.get('sha256')}: the file was changed after export",
        )
    if end.get("records") != len(rows) - 1:
        raise FormatError(
            source.path,
            f"line {end_line}",
            "records",
            f"the export says {end.get('records')} records, the file holds {len(rows) - 1}",
        )


def _canonical(path: Any, line: int, name: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
        again = canonical_body(value)
    except (ValueError, CanonicalisationError) as exc:
        raise FormatError(path, f"line {line}", name, f"not canonical JSON: {exc}") from None
    if not isinstance(value, dict):
        raise FormatError(path, f"line {line}", name, "must be a JSON object")
    if again != text.encode("utf-8"):
        raise FormatError(path, f"line {line}", name, "not in RFC 8785 canonical form")
    return value


def parse(source: Source) -> ParsedSession:
    """Parse and verify an export (see the module docstring).

    Raises:
        FormatError: naming the line and field of the first record that does not verify.
    """
    path = source.path
    if source.kind != "jsonl" or not source.data:
        raise FormatError(
            path, "", "", "a ledgerkeep export is JSON Lines: a header, the records, an end record"
        )
    rows: list[tuple[int, Any]] = source.data
    header_line, header = rows[0]
    if not (isinstance(header, dict) and header.get("type") == "header"):
        raise FormatError(
            path, f"line {header_line}", "type", "the first record must be the export's header"
        )
    if header.get("format") != NAME:
        raise FormatError(
            path,
            f"line {header_line}",
            "format",
            f"not a {NAME} file: {header.get('format')!r:.40}",
        )
    _check_file_digest(source, rows)
    if header.get("version") != VERSION:
        raise FormatError(
            path,
            f"line {header_line}",
            "version",
            f"export version {header.get('version')!r}; this importer reads version {VERSION}",
        )
    scope = _field(path, header_line, header, "scope", dict)
    tenant = _field(path, header_line, scope, "tenant", str)
    session = _field(path, header_line, scope, "session", str)
    chunk_bytes: dict[tuple[str, str], int] = {}
    last: dict[tuple[str, str], tuple[int, str]] = {}
    heads: dict[tuple[str, str], tuple[int, str, int]] = {}
    entries: list[ParsedEntry] = []
    for line, record in rows[1:-1]:
        if not isinstance(record, dict):
            raise FormatError(path, f"line {line}", "", "each record must be a JSON object")
        kind_of_record = record.get("type")
        if kind_of_record == "journal":
            key = (
                _field(path, line, record, "lane", str),
                _field(path, line, record, "branch", str),
            )
            chunk_bytes[key] = _field(path, line, record, "chunk_bytes", int)
            if chunk_bytes[key] < 4:
                raise FormatError(path, f"line {line}", "chunk_bytes", "must be at least 4")
            heads[key] = (
                _field(path, line, record, "head_seq", int),
                _field(path, line, record, "head_hash", str),
                line,
            )
            continue
        if kind_of_record != "entry":
            continue  # folds, retirements, comments...: kept in the file, not imported
        lane = _field(path, line, record, "lane", str)
        branch = _field(path, line, record, "branch", str)
        key = (lane, branch)
        if key not in chunk_bytes:
            raise FormatError(
                path, f"line {line}", "lane", f"entry of {lane}/{branch} before its journal record"
            )
        seq = _field(path, line, record, "seq", int)
        prev_seq, prev_hash = last.get(key, (0, ""))
        if seq != prev_seq + 1:
            raise FormatError(
                path,
                f"line {line}",
                "seq",
                f"expected seq {prev_seq + 1} of {lane}/{branch}, got {seq}",
            )
        body = _field(path, line, record, "body", str)
        meta = _field(path, line, record, "meta", str)
        content = _canonical(path, line, "body", body)
        metadata = _canonical(path, line, "meta", meta)
        raw = body.encode("utf-8")
        if body_hash(raw) != record.get("body_hash"):
            raise FormatError(
                path, f"line {line}", "body_hash", f"the body hashes to {body_hash(raw)}"
            )
        if len(raw) != record.get("byte_length"):
            raise FormatError(path, f"line {line}", "byte_length", f"the body is {len(raw)} bytes")
        meta_hash = hashlib.sha256(meta.encode("utf-8")).hexdigest()
        if meta_hash != record.get("meta_hash"):
            raise FormatError(
                path, f"line {line}", "meta_hash", f"the metadata hashes to {meta_hash}"
            )
        parent = _field(path, line, record, "parent_hash", str)
        if parent != prev_hash:
            raise FormatError(
                path,
                f"line {line}",
                "parent_hash",
                f"expected the previous entry's hash {prev_hash or '(none)'}",
            )
        kind = _field(path, line, record, "kind", str)
        role = _field(path, line, record, "role", str)
        call_id = _field(path, line, record, "tool_call_id", str)
        derived = _field(path, line, record, "derived", bool)
        tool_name = _field(path, line, record, "tool_name", str)
        try:
            recomputed = entry_hash(
                entry_header(
                    tenant=tenant,
                    session=session,
                    lane=lane,
                    branch=branch,
                    seq=seq,
                    kind=kind,
                    role=role,
                    tool_call_id=call_id,
                    body_hash=body_hash(raw),
                    byte_length=len(raw),
                    parent_hash=parent,
                    meta_hash=meta_hash,
                    derived=derived,
                    tool_name=tool_name,
                )
            )
        except CanonicalisationError as exc:
            raise FormatError(
                path, f"line {line}", "entry_hash", f"cannot be hashed: {exc}"
            ) from None
        if recomputed != record.get("entry_hash"):
            raise FormatError(
                path, f"line {line}", "entry_hash", f"recomputed from the record: {recomputed}"
            )
        expected_chunks = [
            [c.position, c.offset, c.length, c.hash] for c in chunk(raw, chunk_bytes[key])
        ]
        if record.get("chunks") != expected_chunks:
            raise FormatError(
                path, f"line {line}", "chunks", "the chunks are not the ones the body cuts into"
            )
        last[key] = (seq, recomputed)
        source_ref = metadata.get("source_ref")
        # the exported token figure as it was recorded (a provider's figure, or the count the
        # entry got at append, artifacts' receipts included): counting again could differ
        tokens, token_source = record.get("token_count"), record.get("token_source")
        figure = (
            (tokens, token_source)
            if type(tokens) is int
            and tokens >= 0
            and isinstance(token_source, str)
            and 0 < len(token_source) <= 40
            else None
        )
        entries.append(
            ParsedEntry(
                kind=kind,
                role=role,
                content=content,
                tool_call_id=call_id,
                tool_name=tool_name,
                derived=derived,
                # the metadata verbatim (usage and source_ref included): the import's
                # metadata hashes to the exported meta_hash
                metadata=metadata,
                source_ref=source_ref if isinstance(source_ref, str) else "",
                lane=lane,
                token_figure=figure,
            )
        )
    for key, (head_seq, head_hash, line) in heads.items():
        got = last.get(key, (0, ""))
        if got != (head_seq, head_hash):
            raise FormatError(
                path,
                f"line {line}",
                "head_seq",
                f"journal {key[0]}/{key[1]} says head seq {head_seq}, its entries end at seq {got[0]}",
            )
    branches = sorted({b for _, b in heads})
    if len(branches) > 1:
        raise FormatError(
            path,
            "",
            "branch",
            f"the export holds branches {', '.join(branches)}; an import writes one branch: "
            "export one branch at a time",
        )
    end = rows[-1][1]
    if end.get("entries") != len(entries):
        raise FormatError(
            path,
            f"line {rows[-1][0]}",
            "entries",
            f"the export says {end.get('entries')} entries, the file holds {len(entries)}",
        )
    return ParsedSession(
        format=NAME,
        entries=entries,
        title=str(header.get("title", "")),
        source_session_id=session,
        metadata={
            "export": {
                "tenant": tenant,
                "session": session,
                "branch": branches[0] if branches else "main",
                "exported_at": header.get("exported_at"),
                "sha256": end.get("sha256"),
                "source_format": header.get("source_format", ""),
            }
        },
    )


def export_records(path: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the records between it and the ``end`` record of the export at ``path``.

    The file's digest and record count are checked again (the file is read afresh), so the
    records are the ones the sha256 of the ``end`` record covers. Entry, fold, retirement,
    comment, annotation and receipt records are returned as they are, in file order; each
    service that uses them checks its own fields (``ledger_app.services.reimport``).

    Raises:
        FormatError: not an export, a truncated or changed file, a record not an object.
    """
    source = read_source(path).load()  # the re-import needs every record (whole file)
    if not detect(source):
        raise FormatError(source.path, "", "format", f"not a {NAME} file")
    rows: list[tuple[int, Any]] = source.data
    _check_file_digest(source, rows)
    records = []
    for line, record in rows[1:-1]:
        if not isinstance(record, dict):
            raise FormatError(source.path, f"line {line}", "", "each record must be a JSON object")
        records.append(record)
    return rows[0][1], records
