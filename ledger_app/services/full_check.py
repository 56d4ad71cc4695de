"""The full check of a ledger, stored for the pages, and what a page shows of it.

:func:`ledger_check` runs the replay (:func:`ledger_app.services.verify.ledger_verify`) and
:func:`ledger_app.services.integrity.ledger_integrity` and **writes** the result (one
:class:`~ledger_app.models.StoredCheck` row per journal, :mod:`ledger_app.services.checks`);
the ``check_ledger`` task runs it. :func:`ledger_warnings` reads the stored check for a page
and, when it is missing or older than the ledger, claims and queues a new one (it writes the
claim, never the check).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.dispatch import Signal
from django.utils import timezone

from journal_app.models import Journal
from ledger_app.models import Fold
from ledger_app.services.checks import (
    check_claim,
    check_lookup,
    check_store,
    claim_fresh,
    claim_not_queued,
)
from ledger_app.services.integrity import ledger_integrity

#: sent by a page that finds no stored check for the ledger's state, with ``journal_id``;
#: ``ledger_app.receivers`` queues the ``check_ledger`` task after commit (the services
#: cannot import the tasks, which import them)
check_wanted = Signal()

#: the claim of a queued check (:func:`ledger_app.services.checks.check_claim`)
_QUEUED_KEY = "{pk}:{state}"
#: seconds a queued check is trusted to be on its way before a page queues it again
QUEUED_TTL = 600


def _state(journal: Journal) -> list[Any]:
    """What a stored check is keyed by: the journal's head and its last fold (1 query)."""
    last = Fold.objects.filter(journal=journal).order_by("-number").values_list("pk", flat=True)
    return [journal.head_seq, journal.head_hash, last.first()]


@dataclass(frozen=True)
class LedgerCheck:
    """A stored full check of one journal's ledger, for the pages (:func:`ledger_warnings`).

    Attributes:
        state: ``[head_seq, head_hash, last fold pk]`` the check ran at.
        problems: at most :data:`MAX_WARNINGS` sentences, the replay's mismatch first;
            empty when the ledger verified.
        checked_at: ISO time of the check.
    """

    state: list[Any]
    problems: list[str]
    checked_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: problems a page lists (the command lists all)
MAX_WARNINGS = 5


def ledger_check(*, journal: Journal) -> LedgerCheck:
    """Run the full check of ``journal``'s ledger and store it for the pages.

    The replay (:func:`ledger_app.services.verify.ledger_verify`) and
    :func:`ledger_integrity` (figures, head, chain, ranges, manifests, pins, support,
    retirements, reviews), stored in the database (:mod:`ledger_app.services.checks`, read by
    every process) under the journal with the state
    it ran at. Run by the ``check_ledger`` task (:mod:`ledger_app.tasks`), which a page
    queues when the stored check is missing or older than the ledger; pages only read it.
    Writes the journal's stored check (one row, replaced); reads everything else;
    idempotent.

    Returns:
        The stored :class:`LedgerCheck`.
    """
    from ledger_app.services.verify import ledger_verify

    journal = Journal.objects.get(pk=journal.pk)
    state = _state(journal)
    out: list[str] = []
    report = ledger_verify(journal=journal)
    if not report.ok:
        m = report.mismatch or {}
        out.append(f"replay: fold {m.get('fold')} ({m.get('check')}): {m.get('detail')}")
    out += [str(p) for p in ledger_integrity(journal=journal)]
    check = LedgerCheck(
        state=state, problems=out[:MAX_WARNINGS], checked_at=timezone.now().isoformat()
    )
    check_store(journal_id=journal.pk, state=state, problems=check.problems, at=timezone.now())
    return check


def _checked_at(stored: dict[str, Any]) -> datetime | None:
    """When a stored check ran (``None``: no readable time)."""
    try:
        return datetime.fromisoformat(stored["checked_at"])
    except (KeyError, TypeError, ValueError):
        return None


def _too_old(stored: dict[str, Any]) -> bool:
    """Whether a stored check ran more than ``LEDGER_CHECK_MAX_AGE_SECONDS`` ago."""
    at = _checked_at(stored)
    if at is None:
        return True
    age = (timezone.now() - at).total_seconds()
    return age > settings.LEDGER_CHECK_MAX_AGE_SECONDS


@dataclass(frozen=True)
class ShownCheck:
    """What a ledger page shows of the stored check: ``problems`` (at most
    :data:`MAX_WARNINGS` sentences, ``[]`` when it verified) and ``checked_at`` (when that
    check ran, ``None`` before the first), so a reader sees how fresh the answer is."""

    problems: list[str]
    checked_at: datetime | None
    pending: bool = False  # the ledger moved past the stored check: a new one is on its way
    #: why a wanted check could not be queued (the task broker unreachable), else ""
    not_queued: str = ""


def ledger_warnings(*, journal: Journal) -> ShownCheck:
    """Why ``journal``'s ledger does not verify, for the UI's warning, and when it was
    checked.

    Reads the stored :func:`ledger_check` with the ledger's state (one query,
    whatever the journal's size: a page never runs the check itself). When no check
    is stored for the current state (a new entry or fold since, or none yet), the check is
    queued once per state (:data:`check_wanted`, whose receiver queues the ``check_ledger``
    task after commit) and the last stored problems are shown meanwhile, marked pending
    (the page says "checking ..."). With eager tasks (the embedded default, no worker) the
    check runs in a background thread of the web process (:mod:`ledger_app.background`),
    never inside the request; behind a worker it runs there. A stored check older than
    ``LEDGER_CHECK_MAX_AGE_SECONDS`` (default 3,600) is queued again too, so a change made
    in the database in place (no new entry or fold) shows within that time. The stored
    checks live in the database, so every web and worker process reads the same ones.

    Returns:
        :class:`ShownCheck`: at most :data:`MAX_WARNINGS` problems as sentences (the
        replay's mismatch first), the time of the stored check they come from, and whether
        a newer check is pending.
    """
    state, stored, claim = check_lookup(journal=journal)
    pending = stored is None or stored["state"] != state
    not_queued, wait = claim_not_queued(claim)
    if (pending or _too_old(stored)) and not wait:
        # a change made in place (no new entry nor fold) is seen once the check is older
        # than LEDGER_CHECK_MAX_AGE_SECONDS: queued again, once per period
        period = ""
        if stored is not None and stored["state"] == state:
            period = f":{int(time.time()) // max(1, settings.LEDGER_CHECK_MAX_AGE_SECONDS)}"
        queued = _QUEUED_KEY.format(pk=journal.pk, state=":".join(map(str, state))) + period
        key = queued[-200:]
        if not claim_fresh(claim, key=key, ttl_seconds=QUEUED_TTL) and check_claim(
            journal_id=journal.pk, key=key, ttl_seconds=QUEUED_TTL
        ):
            check_wanted.send(sender=Journal, journal_id=journal.pk)
    if not pending:
        not_queued = ""
    if not stored:
        return ShownCheck([], None, pending=True, not_queued=not_queued)
    return ShownCheck(
        list(stored["problems"]), _checked_at(stored), pending=pending, not_queued=not_queued
    )
