"""What a fold over a range of entries reports beside its delta: the tool calls its rounds
left without a result, and its loss report. Read-only (one query for the term index).

Used by the fold's ``reduce`` stage (:mod:`ledger_app.services.fold_stages`) and by the
refold (:mod:`ledger_app.services.refold`), so both manifests carry the same figures
(:func:`ledger_app.delta_manifest.manifest_make`).
"""

from __future__ import annotations

from typing import Any

from journal_app.identifiers import Identifier
from journal_app.models import Journal
from ledger_app.budget import render_fact
from ledger_app.entry_view import EntryView
from ledger_app.loss import loss_report, term_key
from ledger_app.services.store import Applied, terms_indexed


def interrupted_calls(rounds: list[Any], end: int) -> list[str]:
    """The ids of the tool calls left without a result in the ``rounds`` (API rounds,
    :func:`journal_app.rounds.group_rounds`) that end at or before seq ``end``."""
    return [c for r in rounds if r.last_seq <= end for c in r.interrupted_call_ids]


def range_loss(
    journal: Journal,
    views: list[EntryView],
    identifiers: dict[str, list[Identifier]],
    applied: Applied,
) -> dict[str, Any]:
    """The loss report of a fold over ``views`` (:func:`ledger_app.loss.loss_report`): the
    covered entries' stored identifiers (``identifiers``: entry hash -> identifiers) against
    the term index of the active facts, searching only the text this fold wrote."""
    ledger_text = "\n".join(render_fact(f) for f in applied.active_added())
    indexed = terms_indexed(
        journal, (term_key(i.value) for found in identifiers.values() for i in found), applied
    )
    return loss_report(views, ledger_text, identifiers=identifiers, indexed=indexed).to_dict()
