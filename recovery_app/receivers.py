"""Derived rows follow the journal: the ``entries_appended`` receiver (docs/design.md section 7).

Connected in :meth:`recovery_app.apps.RecoveryAppConfig.ready`.
"""

from __future__ import annotations

import logging
from typing import Any

from journal_app.models import Journal
from recovery_app.tasks import derive_appended

log = logging.getLogger("ledgerkeep.recovery")


def index_appended(
    sender: type[Journal], *, journal: Journal, appended: int, head_seq: int, **kwargs: Any
) -> None:
    """Queue :func:`~recovery_app.tasks.derive_appended` for the entries an append committed.

    The signal is sent after the append's commit, so nothing here can undo the append: a
    failure to queue or to run is logged, and the index catches up before the next search
    (:func:`recovery_app.search.index_sync`). Eager in the embedded default (runs
    in-process now); with a broker a worker runs it.
    """
    try:
        derive_appended.delay(journal.pk, head_seq - appended + 1, head_seq)
    except Exception:
        log.exception("deriving the rows of journal %s up to seq %s failed", journal.pk, head_seq)
