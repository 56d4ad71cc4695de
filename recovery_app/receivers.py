"""The search index follows the journal: the ``entries_appended`` receiver (DESIGN.md section 7).

Connected in :meth:`recovery_app.apps.RecoveryAppConfig.ready`.
"""

from __future__ import annotations

import logging
from typing import Any

from journal_app.models import Journal
from recovery_app.search import index_sync

log = logging.getLogger("ledgerkeep.recovery")


def index_appended(
    sender: type[Journal], *, journal: Journal, head_seq: int, **kwargs: Any
) -> None:
    """Index the entries an append batch committed (up to ``head_seq``).

    The signal is sent after the append's commit, so a failure here cannot undo the append;
    it is logged and the index catches up before the next search (:func:`index_sync`).
    """
    try:
        index_sync(journal=journal, upto=head_seq)
    except Exception:
        log.exception("search index sync failed for journal %s", journal.pk)
