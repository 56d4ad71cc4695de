"""Content addressing for the journal, Git-style (docs/design.md section 4).

Pure module: no Django, no database. Every hash the product shows is computed here.

* ``canonical_body(content)``: RFC 8785 canonical JSON bytes (``rfc8785`` package).
  Canonicalisation changes serialisation only, never the characters of a string.
* ``body_hash(body)``: ``sha256(b"blob <len>\\0" + body)``, the Git blob rule.
* ``entry_hash(header)``: ``sha256`` over the RFC 8785 canonical header (scope, seq,
  kind, role, tool call id, body hash, byte length, parent hash, metadata hash).
* ``chunk_hash(data)``: ``sha256`` of the raw chunk bytes.

All digests are lowercase hex (64 characters); :func:`display` adds the ``sha256:`` prefix
the UI and API show everywhere.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from typing import Any

import rfc8785

PREFIX = "sha256:"


class CanonicalisationError(ValueError):
    """Raised when a value cannot be written as RFC 8785 JSON.

    Typical causes: a float that is NaN or infinite, an integer outside the IEEE 754
    safe range, a lone UTF-16 surrogate in a string, or a non-JSON type.
    """


def canonical_body(content: Any) -> bytes:
    """Return the RFC 8785 canonical JSON encoding of ``content``.

    Args:
        content: any JSON value (dict, list, str, int, float, bool, None).

    Returns:
        UTF-8 bytes. Strings keep every character verbatim.

    Raises:
        CanonicalisationError: ``content`` holds something RFC 8785 cannot encode.
    """
    try:
        return rfc8785.dumps(content)
    except RecursionError:
        raise CanonicalisationError("nested too deeply to canonicalise") from None
    except UnicodeEncodeError as exc:
        raise CanonicalisationError(
            "a string holds a lone UTF-16 surrogate (not valid Unicode)"
        ) from exc
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as exc:
        reason = str(exc) or exc.__class__.__name__
        if "non-UTF-8" in reason:
            reason = "a string holds a lone UTF-16 surrogate (not valid Unicode)"
        raise CanonicalisationError(reason) from exc


def body_hash(body: bytes) -> str:
    """Git blob hash of ``body``: ``sha256(b"blob <len>\\0" + body)`` as hex."""
    h = hashlib.sha256()
    h.update(b"blob %d\0" % len(body))
    h.update(body)
    return h.hexdigest()


def chunk_hash(data: bytes) -> str:
    """Plain ``sha256`` of one chunk's bytes, hex."""
    return hashlib.sha256(data).hexdigest()


def entry_header(
    *,
    tenant: str,
    session: str,
    lane: str,
    branch: str,
    seq: int,
    kind: str,
    role: str,
    tool_call_id: str,
    body_hash: str,
    byte_length: int,
    parent_hash: str,
    meta_hash: str,
    derived: bool,
    tool_name: str = "",
) -> dict[str, Any]:
    """Build the header that :func:`entry_hash` digests (docs/design.md section 4).

    ``parent_hash`` is the previous entry's ``entry_hash`` in the same branch, or ``""``
    for ``seq`` 1. ``tool_name`` is hashed too (a tool result's name is not in its body). ``derived`` marks summaries and compaction markers (never citable).
    """
    return {
        "scope": {"tenant": tenant, "session": session, "lane": lane, "branch": branch},
        "seq": seq,
        "kind": kind,
        "role": role,
        "tool_call_id": tool_call_id,
        "tool_name": tool_name,
        "body_hash": body_hash,
        "byte_length": byte_length,
        "parent_hash": parent_hash,
        "meta_hash": meta_hash,
        "derived": derived,
    }


#: the largest integer RFC 8785 (IEEE 754 doubles) writes exactly
_SAFE_INT = 2**53 - 1


def _simple_value(value: Any) -> bool:
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-_SAFE_INT <= value <= _SAFE_INT)
    if kind is dict:
        return _simple(value)
    if kind is list:
        return all(_simple_value(v) for v in value)
    return False


def _simple(record: Mapping[str, Any]) -> bool:
    """True when ``record`` is made only of what :func:`canonical_record` writes itself."""
    for key, value in record.items():
        if type(key) is not str or not key.isascii():
            return False
        kind = type(value)
        if kind is str or kind is bool or value is None:
            continue
        if not _simple_value(value):
            return False
    return True


_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))
#: the string encoder ``_ENCODER`` uses (``ensure_ascii=False``): escapes ``"``, ``\\`` and
#: controls only, as RFC 8785 does
_enc = json.encoder.encode_basestring


def canonical_record(record: Mapping[str, Any]) -> bytes:
    """RFC 8785 bytes of a flat record (headers, figures), without the general encoder.

    For objects with ASCII keys whose values are strings, booleans, ``None``, safe integers,
    lists of those or such objects, the standard library's ``json.dumps(sort_keys=True,
    ensure_ascii=False, separators=(",", ":"))`` writes exactly the RFC 8785 form: keys
    sorted (ASCII keys sort the same by code point and by UTF-16 unit), strings escaping
    only ``"``, ``\\`` and controls (``\\b \\f \\n \\r \\t``, else ``\\u00xx``), the
    rest verbatim. About ten times faster than ``rfc8785.dumps`` on an entry header, which
    matters because every append canonicalises a body, a metadata object and a header per
    entry, and every verify a header and figures. Anything else (floats, large integers, lists, non-ASCII keys) and any string
    that is not valid Unicode (a lone surrogate) goes through :func:`canonical_body`, so the
    result and the errors are always those of RFC 8785.

    Raises:
        CanonicalisationError: as :func:`canonical_body`.
    """
    if _simple(record):
        try:
            return _ENCODER.encode(record).encode("utf-8")
        except UnicodeEncodeError:
            pass  # a lone surrogate: the general encoder names the error
    return canonical_body(dict(record))


def entry_hash(header: Mapping[str, Any]) -> str:
    """``sha256`` of the RFC 8785 canonical header (:func:`canonical_record`), hex."""
    return hashlib.sha256(canonical_record(header)).hexdigest()


@functools.lru_cache(maxsize=256)
def _scope_json(tenant: str, session: str, lane: str, branch: str) -> str:
    return (
        f'{{"branch":{_enc(branch)},"lane":{_enc(lane)},'
        f'"session":{_enc(session)},"tenant":{_enc(tenant)}}}'
    )


def header_hash(
    *,
    tenant: str,
    session: str,
    lane: str,
    branch: str,
    seq: int,
    kind: str,
    role: str,
    tool_call_id: str,
    body_hash: str,
    byte_length: int,
    parent_hash: str,
    meta_hash: str,
    derived: bool,
    tool_name: str = "",
) -> str:
    """``entry_hash(entry_header(...))`` of the same arguments, written directly.

    The header's RFC 8785 form with its keys in sorted order, each string through the
    standard library's JSON string encoder (what :func:`canonical_record` uses), the
    scope's part made once per scope: about five times faster than building the dict and
    encoding it, and every append and every verify hashes one header per entry.
    Arguments of other types than annotated (or out of the safe integer
    range), and strings with no UTF-8 form, go the general way, so the result and errors
    are always those of :func:`entry_hash`; ``tests/journal_app/test_hashing.py`` checks the
    two agree on generated headers.

    Returns:
        sha256 hex (64 characters).
    """
    if not (
        type(seq) is int
        and type(byte_length) is int
        and type(derived) is bool
        and -_SAFE_INT <= seq <= _SAFE_INT
        and -_SAFE_INT <= byte_length <= _SAFE_INT
        and all(
            type(v) is str
            for v in (tenant, session, lane, branch, kind, role, tool_call_id, tool_name)
        )
        and all(type(v) is str for v in (body_hash, parent_hash, meta_hash))
    ):
        return _general_header_hash(locals())
    text = (
        f'{{"body_hash":{_enc(body_hash)},"byte_length":{byte_length},'
        f'"derived":{"true" if derived else "false"},"kind":{_enc(kind)},'
        f'"meta_hash":{_enc(meta_hash)},"parent_hash":{_enc(parent_hash)},"role":{_enc(role)},'
        f'"scope":{_scope_json(tenant, session, lane, branch)},"seq":{seq},'
        f'"tool_call_id":{_enc(tool_call_id)},"tool_name":{_enc(tool_name)}}}'
    )
    try:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()
    except UnicodeEncodeError:  # a lone surrogate: the general encoder names the error
        return _general_header_hash(locals())


def _general_header_hash(fields: Mapping[str, Any]) -> str:
    names = (
        "tenant", "session", "lane", "branch", "seq", "kind", "role", "tool_call_id",
        "body_hash", "byte_length", "parent_hash", "meta_hash", "derived", "tool_name",
    )  # fmt: skip
    return entry_hash(entry_header(**{n: fields[n] for n in names}))


def display(digest: str) -> str:
    """Return ``sha256:<hex>`` for a bare hex digest (idempotent)."""
    return digest if digest.startswith(PREFIX) else PREFIX + digest


def strip_prefix(value: str) -> str:
    """Accept ``sha256:<hex>`` or ``<hex>`` and return the bare lowercase hex."""
    value = value.strip().lower()
    return value[len(PREFIX) :] if value.startswith(PREFIX) else value
