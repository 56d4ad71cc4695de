"""The ledger's domain errors: what a ledger service raises when it refuses a request or fails.

Each is a :class:`journal_app.errors.DomainError`; ``config/api.py`` maps it to its HTTP
status once (docs/architecture.md). Holds no state and writes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from journal_app.errors import DomainError

if TYPE_CHECKING:
    from ledger_app.models import FoldAttempt


class LedgerError(DomainError):
    """Base of the ledger's domain errors (HTTP 422 unless a subclass says otherwise)."""

    status = 422
    code = "invalid_request"


class FoldRefused(LedgerError):
    """A required pin is missing or altered, or a pin no longer matches its entry; nothing stored.

    HTTP 409: the request is well formed but conflicts with the stored journal or ledger.
    """

    status = 409
    code = "fold_refused"


class FoldFailed(LedgerError):
    """The writer's model was unreachable (or refused): the fold is recorded failed, nothing else.

    HTTP 503 ``model_unavailable``: the failure is the model server's, not the request's, and
    the same request may succeed later (the failed attempt is stored and listed). ``attempt``
    is the stored ``failed`` :class:`~ledger_app.models.FoldAttempt`.
    """

    status = 503
    code = "model_unavailable"

    def __init__(self, message: str, *, attempt: FoldAttempt) -> None:
        super().__init__(message)
        self.attempt = attempt


class ReviewError(LedgerError):
    """A review that cannot be applied (not pending, bad decision); HTTP 409."""

    status = 409
    code = "review_conflict"


class ReviewForbidden(LedgerError):
    """The user is not a reviewer (or admin) of the journal's tenant; HTTP 403."""

    status = 403
    code = "forbidden"


class ReimportInvalid(LedgerError):
    """The export's ledger records do not verify, or do not fit the re-imported journal
    (HTTP 422 ``reimport_invalid``; ``field`` names the record field). Nothing is written
    when the caller holds the import's transaction."""

    status = 422
    code = "reimport_invalid"


class ReimportConflict(LedgerError):
    """The journal already holds a different ledger (HTTP 409 ``reimport_conflict``)."""

    status = 409
    code = "reimport_conflict"
