"""Recovery's domain errors: what a recovery service raises when it refuses a request. Pure.

Each is a :class:`journal_app.errors.DomainError`; ``config/api.py`` maps it to its HTTP
status once (docs/architecture.md). The errors of recovery's pure modules
(``BudgetExhausted``, ``CursorRefused``, ``QueryInvalid``, ``Denied``) live with them and are
listed in ``recovery_app.services.__all__``.
"""

from __future__ import annotations

from journal_app.errors import DomainError


class RecoveryError(DomainError):
    """Base of recovery's own domain errors (HTTP 422 unless a subclass says otherwise)."""

    status = 422
    code = "invalid_request"


class EntryNotFound(RecoveryError):
    """No entry of that seq or hash in the caller's journal at the revision (HTTP 404)."""

    status = 404
    code = "not_found"
