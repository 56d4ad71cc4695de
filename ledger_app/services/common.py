"""Shared pieces of the ledger services: domain errors, fold results, entry views, pins.

No state change happens here; every one lives in one sibling module (STYLE.md point 2).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import rfc8785
from django.conf import settings

from journal_app.errors import DomainError
from journal_app.models import Entry, Journal
from journal_app.services import entry_check
from journal_app.tokens import count_tokens
from ledger_app import reducer
from ledger_app.mechanical import EntryView
from ledger_app.models import Fold, FoldAttempt


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


@dataclass
class FoldResult:
    """``fold`` is the stored fold (new, or the existing one for the same range); ``created``.

    ``attempt`` is the :class:`~ledger_app.models.FoldAttempt` stored with a new fold;
    ``receipt`` the recovery receipt of the attempt that ran before it (``None`` when
    recovery did not run); ``recovered`` the ids of recovered facts proposed in the fold.
    """

    fold: Fold | None
    created: bool
    reason: str = ""
    attempt: FoldAttempt | None = None
    receipt: Any = None
    recovered: list[str] = field(default_factory=list)


def entry_view(entry: Entry) -> EntryView:
    """The pure view of a row that the writers and :mod:`ledger_app.mechanical` read."""
    return EntryView(
        seq=entry.seq,
        entry_hash=entry.entry_hash,
        kind=entry.kind,
        role=entry.role,
        text=entry.text,
        content=entry.content,
        tool_call_id=entry.tool_call_id,
        tool_name=entry.tool_name,
        derived=entry.derived,
        is_error=entry.is_error,
        meta=entry.meta_dict,
    )


def range_hash(hashes: Sequence[str]) -> str:
    """Idempotency key of a fold: sha256 of the canonical list of covered entry hashes."""
    return hashlib.sha256(rfc8785.dumps(list(hashes))).hexdigest()


def latest_fold(journal: Journal, kind: str | None = None) -> Fold | None:
    """The journal's last fold (of ``kind`` if given), or ``None``."""
    qs = Fold.objects.filter(journal=journal)
    if kind:
        qs = qs.filter(kind=kind)
    return qs.order_by("-number").first()


def ledger_state(journal: Journal, fold: Fold | None = None) -> dict[str, Any]:
    """The ledger state after ``fold`` (default: the latest); the empty state if none."""
    fold = fold or latest_fold(journal)
    return fold.state_dict if fold else copy.deepcopy(reducer.EMPTY_STATE)


def _info(e: Entry, fold_number: int) -> dict[str, Any]:
    return {
        "seq": e.seq,
        "kind": e.kind,
        "role": e.role,
        "is_error": e.is_error,
        "derived": e.derived,
        "fold": fold_number,
    }


def _cited(ops: Sequence[dict[str, Any]]) -> set[str]:
    cited: set[str] = set()
    for op in ops:
        fact = op.get("fact")
        if isinstance(fact, dict) and isinstance(fact.get("support"), list):
            cited |= {
                s["entry"]
                for s in fact["support"]
                if isinstance(s, dict) and isinstance(s.get("entry"), str)
            }
        if isinstance(op.get("evidence"), list):
            cited |= {h for h in op["evidence"] if isinstance(h, str)}
    return cited


def _evidence(
    journal: Journal,
    covered: Sequence[Entry],
    ops: Sequence[dict[str, Any]],
    number: int,
    revision: int,
) -> dict[str, dict[str, Any]]:
    """Evidence index of a delta: covered entries plus earlier raw entries the ops cite."""
    evidence = {e.entry_hash: _info(e, number) for e in covered}
    missing = _cited(ops) - evidence.keys()
    if missing:
        ranges = list(
            Fold.objects.filter(journal=journal, kind=Fold.Kind.FOLD).values_list(
                "number", "seq_start", "seq_end"
            )
        )
        for e in Entry.objects.filter(journal=journal, entry_hash__in=missing, seq__lte=revision):
            owner = next((n for n, a, b in ranges if a <= e.seq <= b), number)
            evidence[e.entry_hash] = _info(e, owner)
    return evidence


def _active_tokens(state: dict[str, Any]) -> int:
    text = "\n".join(
        f["text"] for f in state.get("facts", {}).values() if f["lifecycle"] == "active"
    )
    return count_tokens(text, settings.TOKEN_ENCODING)


def _provider_usage(entries: Sequence[Entry]) -> dict[str, Any]:
    totals = {"input_tokens": 0, "output_tokens": 0, "entries_with_usage": 0}
    for e in entries:
        usage = e.meta_dict.get("usage")
        if isinstance(usage, dict):
            totals["entries_with_usage"] += 1
            for key in ("input_tokens", "output_tokens"):
                value = usage.get(
                    key,
                    usage.get(
                        {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens"}[key]
                    ),
                )
                if isinstance(value, int):
                    totals[key] += value
    return totals


def instructions_check(journal: Journal, state: dict[str, Any]) -> dict[str, Any]:
    """Re-hash every pin against its journal entry (issue 3, "instruction integrity").

    For each pin in ``state`` the cited entry is read, its hashes recomputed, and its text
    compared with the pin's byte for byte.

    Returns:
        ``{"pins": n, "intact": True, "pins_hash": sha256 over (entry hash, text hash) pairs}``.

    Raises:
        FoldRefused: an entry's hashes no longer match, or a pin's text differs from it.
    """
    pins = sorted(
        (f for f in state.get("facts", {}).values() if f.get("pin")),
        key=lambda f: f["support"][0]["entry"],
    )
    wanted = [f["support"][0]["entry"] for f in pins]
    rows = {
        e.entry_hash: e
        for e in Entry.objects.filter(journal=journal, entry_hash__in=wanted).prefetch_related(
            "chunks"
        )
    }
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
        if entry.text != fact["text"]:
            raise FoldRefused(f"pin {fact['id']}: text differs from entry sha256:{h}")
        pairs.append([h, hashlib.sha256(fact["text"].encode("utf-8")).hexdigest()])
    return {
        "pins": len(pins),
        "intact": True,
        "pins_hash": hashlib.sha256(rfc8785.dumps(pairs)).hexdigest(),
    }


def _verdicts(reduction: reducer.Reduction) -> list[dict[str, Any]]:
    return [
        {"index": r.index, "op": r.op, "status": r.status, "reason": r.reason, "fact_id": r.fact_id}
        for r in reduction.results
    ]
