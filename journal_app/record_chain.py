"""Hash chains of stored records: folds, and the log of reviews, comments and audit events. Pure.

Each record is hashed with the previous record's hash of its chain (:func:`record_hash`), so
changing a stored value, or removing or reordering a record, changes every later hash.
``ledger_app.services.records`` chains the folds, ``audit_app.chained_log`` the audit log.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from journal_app.hashing import canonical_record


def record_value(value: Any) -> Any:
    """A stored column's value as the record hash sees it: datetimes and dates as ISO 8601
    text (UTC as stored), ``Decimal``/UUID as text, everything JSON already is unchanged."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if value is None or isinstance(value, bool | int | float | str | list | dict):
        return value
    return str(value)


def text_digest(text: str | None) -> str | None:
    """sha256 hex of a stored text (a proposal's raw model answer: hashed, not copied)."""
    if text is None:
        return None
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def record_hash(*, previous: str, record: Mapping[str, Any]) -> str:
    """sha256 hex of one chained record: RFC 8785 of ``{"previous": ..., "record": ...}``.

    Args:
        previous: the previous record's hash in its chain (``""`` for the first).
        record: the record's stored values (column name to :func:`record_value` values).

    Returns:
        The record hash; changing any value, or the previous record's hash, changes it.

    Raises:
        CanonicalisationError: a value with no RFC 8785 form (NaN, a lone surrogate).
    """
    data = canonical_record({"previous": previous, "record": dict(record)})
    return hashlib.sha256(data).hexdigest()
