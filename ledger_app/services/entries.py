"""The journal's entries as a fold reads them: views, the range hash, identifiers, evidence,
and what a writer may read besides them (:func:`fold_context`).

Reads, with one exception: :func:`entry_identifiers` stores the :class:`EntryIdentifiers`
row of an entry appended before identifiers were stored at append (once per entry; the
identifiers derive from immutable bytes, so the row stays right).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

import rfc8785
from django.conf import settings
from django.db.models import Q

from journal_app.content import AUTHORITATIVE_ROLES
from journal_app.identifiers import RULES_VERSION, Identifier, identifiers_load
from journal_app.models import Entry, EntryIdentifiers, Journal
from journal_app.services import entry_identifiers_row
from ledger_app.entry_view import EntryView
from ledger_app.model_writer import FoldContext
from ledger_app.models import Fold


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
        chunk_bytes=_chunk_bytes(entry),
    )


def _chunk_bytes(entry: Entry) -> int:
    # the journal's chunk size when its row is loaded already (no query per entry)
    if Entry.journal.is_cached(entry):
        return entry.journal.chunk_bytes
    return settings.JOURNAL_CHUNK_BYTES


def range_hash(hashes: Sequence[str]) -> str:
    """Idempotency key of a fold: sha256 of the canonical list of covered entry hashes."""
    return hashlib.sha256(rfc8785.dumps(list(hashes))).hexdigest()


def entry_identifiers(entries: Sequence[Entry]) -> dict[str, list[Identifier]]:
    """The stored identifiers of ``entries`` by entry hash (:class:`EntryIdentifiers`).

    Entries appended before identifiers were stored at append get their row now, once (the
    identifiers derive from immutable bytes, so a stored row stays right).
    """
    rows = {
        r.entry_id: r
        for r in EntryIdentifiers.objects.filter(
            entry__in=[e.pk for e in entries], rules=RULES_VERSION
        )
    }
    missing = [entry_identifiers_row(e) for e in entries if e.pk not in rows]
    if missing:
        EntryIdentifiers.objects.bulk_create(missing, ignore_conflicts=True)
        rows.update({r.entry_id: r for r in missing})
    return {e.entry_hash: identifiers_load(rows[e.pk].values) for e in entries}


def _info(e: Entry, fold_number: int) -> dict[str, Any]:
    info = {
        "seq": e.seq,
        "kind": e.kind,
        "role": e.role,
        "is_error": e.is_error,
        "derived": e.derived,
        "fold": fold_number,
    }
    if e.kind == "message" and e.role in AUTHORITATIVE_ROLES and not e.derived:
        if not e.authoritative:  # a harness record: never authorises a retirement
            info["harness"] = True
    return info


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


def delta_evidence(
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
        rows = list(
            Entry.objects.filter(journal=journal, entry_hash__in=missing, seq__lte=revision)
        )
        ranges: list[tuple[int, int, int]] = []
        if rows:
            ranges = list(
                Fold.objects.filter(
                    journal=journal,
                    kind=Fold.Kind.FOLD,
                    seq_start__lte=max(e.seq for e in rows),
                    seq_end__gte=min(e.seq for e in rows),
                ).values_list("number", "seq_start", "seq_end")
            )
        for e in rows:
            owner = next((n for n, a, b in ranges if a <= e.seq <= b), number)
            evidence[e.entry_hash] = _info(e, owner)
    return evidence


def reported_usage(entries: Sequence[Entry]) -> dict[str, Any]:
    """Provider-reported usage recorded on ``entries`` (``meta["usage"]``), summed.

    Returns:
        ``{"input_tokens": n, "output_tokens": n, "entries_with_usage": n}`` (OpenAI's
        ``prompt_tokens`` / ``completion_tokens`` count as input / output).
    """
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


def fold_context(
    *, journal: Journal, covered: Sequence[Entry], number: int, revision: int
) -> FoldContext:
    """What a writer may read besides the covered entries (docs/design.md 5.1, support).

    ``resolve`` returns earlier raw entries of ``journal`` at or before ``revision`` (by seq
    or hash); ``evidence`` builds the reducer's evidence index for a list of ops.
    """

    def resolve(seqs: Iterable[int], hashes: Iterable[str]) -> list[EntryView]:
        seqs, hashes = list(seqs), list(hashes)
        if not seqs and not hashes:
            return []
        rows = Entry.objects.filter(journal=journal, seq__lte=revision).filter(
            Q(seq__in=seqs) | Q(entry_hash__in=hashes)
        )
        return [entry_view(e) for e in rows]

    def evidence(ops: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return delta_evidence(journal, covered, ops, number, revision)

    return FoldContext(number=number, revision=revision, resolve=resolve, evidence=evidence)
