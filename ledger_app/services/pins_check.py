"""The pins re-hashed against their journal entries before a fold is stored.

Writes nothing: reads the pins and their entries and raises
:class:`~ledger_app.errors.FoldRefused` when one no longer matches (docs/architecture.md,
"Invariants": pins are verbatim and never dropped).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import rfc8785

from journal_app.models import Entry, Journal
from journal_app.services import entry_check
from ledger_app.errors import FoldRefused
from ledger_app.facts import Fact
from ledger_app.models import LedgerFact
from ledger_app.pins import attachment_problems, expected_text
from ledger_app.services.store import Applied


def instructions_check(
    journal: Journal, state: Mapping[str, Any], *, pins_total: int | None = None
) -> dict[str, Any]:
    """Re-hash pins against their journal entries ("instruction integrity").

    For each pin in ``state["facts"]`` the cited entry is read, its hashes recomputed, and
    its text compared with the pin's byte for byte (under the pin's rules:
    :func:`ledger_app.pins.expected_text`), and its attachments with the pin and the entry.
    A fold passes :func:`pins_to_check` (its own pins and a rotating window of earlier
    ones: bounded work per fold); ``pins_total`` is then the number of pins in the whole
    ledger.

    Returns:
        ``{"pins": pins_total (or the pins checked), "checked": n, "intact": True,
        "pins_hash": sha256 over the checked (entry hash, text hash) pairs}``.

    Raises:
        FoldRefused: an entry's hashes no longer match, or a pin's text differs from it.
    """
    pins = sorted(
        (f for f in state.get("facts", {}).values() if f.get("pin")),
        key=lambda f: f["support"][0]["entry"],
    )
    wanted = [f["support"][0]["entry"] for f in pins]
    rows = (
        {
            e.entry_hash: e
            for e in Entry.objects.filter(journal=journal, entry_hash__in=wanted)
            .select_related("journal__session__tenant")
            .prefetch_related("chunks")
        }
        if wanted
        else {}
    )
    pairs = []
    for fact in pins:
        h = fact["support"][0]["entry"]
        entry = rows.get(h)
        if entry is None:
            raise FoldRefused(f"pin {fact['id']}: entry sha256:{h} is not in this journal")
        problems = entry_check(entry)
        if problems:
            raise FoldRefused(
                f"pin {fact['id']}: entry sha256:{h} fails its hash check: {problems[0]}"
            )
        if expected_text(fact, entry.text) != fact["text"]:
            raise FoldRefused(f"pin {fact['id']}: text differs from entry sha256:{h}")
        attachment = attachment_problems(fact, entry.text)
        if attachment:
            raise FoldRefused(f"pin {fact['id']}: {attachment[0]} (entry sha256:{h})")
        pairs.append([h, hashlib.sha256(fact["text"].encode("utf-8")).hexdigest()])
    return {
        "pins": len(pins) if pins_total is None else pins_total,
        "checked": len(pins),
        "intact": True,
        "pins_hash": hashlib.sha256(rfc8785.dumps(pairs)).hexdigest(),
    }


#: earlier pins a fold re-hashes besides its own (a rotating window, so every pin is
#: re-checked every ``pins / PINS_RECHECKED`` folds; ``verify_ledger`` checks them all)
PINS_RECHECKED = 4


def pins_to_check(journal: Journal, applied: Applied) -> dict[str, Fact]:
    """The pins a fold re-hashes against their entries (:func:`instructions_check`): the
    active pins it wrote or changed, plus a rotating window of :data:`PINS_RECHECKED`
    earlier active pins chosen by the fold's number. Bounded, whatever the ledger's size."""
    pins = {k: f for k, f in applied.added if f.get("pin") and f.get("lifecycle") == "active"}
    earlier = LedgerFact.objects.filter(
        journal=journal, until__isnull=True, pin=True, lifecycle="active"
    )
    # two queries whatever the window (the pins' keys, then the window's facts): the
    # fold's query count does not depend on the ledger
    keys = list(earlier.order_by("pk").values_list("pk", flat=True))
    if keys:
        start = (applied.number * PINS_RECHECKED) % len(keys)
        window = [keys[(start + i) % len(keys)] for i in range(min(PINS_RECHECKED, len(keys)))]
        for fact_id, data in earlier.filter(pk__in=window).values_list("fact_id", "data"):
            if fact_id not in applied.after:
                pins[fact_id] = json.loads(data)
    return pins
