"""The root of every domain error (pure: no Django, no ninja).

Each app's base error (``JournalError``, ``AuditError``, ``LedgerError``, ``RecoveryError``)
subclasses :class:`DomainError`, and each concrete error sets its HTTP ``status`` and its
snake_case ``code`` as class attributes. Services raise these and never an HTTP error; the
API maps them once, in ``config/api.py``, to ``{code, message, field, entry}`` with
``status`` (STYLE.md point 3). The htmx views show ``str(exc)``.
"""

from __future__ import annotations

__all__ = ["DomainError", "MalformedBody"]


class DomainError(Exception):
    """A refusal of the domain, with what the API answers for it.

    Class attributes:
        status: the HTTP status (default 400).
        code: the snake_case error code clients branch on (default ``invalid_request``).

    Args:
        message: the sentence a person reads (``str(exc)``).
        field: the request field at fault (``"entries[2].content"``), or ``None``.
        entry: the entry at fault (``"seq 7"``, ``"entries[2]"``, ``"line 12"``), or ``None``.
    """

    status: int = 400
    code: str = "invalid_request"

    def __init__(
        self, message: str = "", *, field: str | None = None, entry: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.entry = entry


class MalformedBody(DomainError):
    """A request body that cannot become request data: not UTF-8, not JSON (HTTP 400).

    Raised by the API's body parser (``config/api.py``) and by operations that read their
    own body (``POST /validate``), so both answer ``malformed_json`` the same way.
    """

    status = 400
    code = "malformed_json"
