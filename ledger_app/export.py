"""Export of a session as JSON Lines, with hashes, re-importable.

One JSON object per line, in this order:

1. ``header``: format ``ledgerkeep-export`` version 1, the scope (tenant, session), the
   session's title, source and metadata, the export time and each journal's head.
2. per journal (lane/branch order): a ``journal`` record, its ``entry`` records in seq
   order (canonical body and metadata text verbatim, every hash, the chunks, the artifact
   receipt), its ``fold`` records (manifest, canonical delta with the verdicts, the delta's
   sha256, the state hash), its ``attempt`` records (every writer run: the proposals and
   repairs verbatim with each judge's verdicts, failed runs included) and its
   ``retirement`` records (P0 review queue decisions).
3. the audit app's comments and annotations (:func:`audit_app.services.export_records`),
   then the recovery receipts (the ``receipts`` argument of :func:`session_export`:
   recovery sits above the ledger, so its caller,
   :func:`recovery_app.session_transfer.session_export`, passes them).
4. ``end``: the number of records and entries and the sha256 of every byte before it, so
   a truncated or edited file is refused on import.

Bodies are the stored bytes, never filtered (filtering would change every hash), so only a
role allowed to read unfiltered entries may export (:func:`session_export`).

``journal_app.formats.ledgerkeep_export`` reads it back: importing the export into the same
scope reproduces every entry hash (the scope is part of the hash header, docs/design.md 4); into
any other scope the entries are re-hashed for it. ``manage.py import_journal`` then
re-creates the rest with :func:`ledger_app.services.reimport.ledger_reimport` (folds,
attempts, retirements and decisions, comments, receipts; hashes mapped old -> new and every
record re-verified), so ``verify_journal`` and ``verify_ledger`` are clean on the copy.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import IO, Any

from django.core.serializers.json import DjangoJSONEncoder
from django.utils import timezone

from audit_app.reads import raw_export_allow
from audit_app.services import export_records
from journal_app.models import Entry, Journal, Session
from ledger_app.models import Fold, FoldAttempt, Proposal, RetirementRequest

#: the records of an app above the ledger: ``records(session, journals)``
ExtraRecords = Callable[[Session, list[Journal]], Iterable[dict[str, Any]]]

EXPORT_FORMAT = "ledgerkeep-export"
EXPORT_VERSION = 1
BATCH = 1000


def _dumps(record: dict[str, Any]) -> str:
    # ASCII only: no raw U+2028 and the like, which line splitters treat as line breaks
    return json.dumps(record, ensure_ascii=True, sort_keys=True, cls=DjangoJSONEncoder)


def _entry_record(e: Entry, journal: Journal) -> dict[str, Any]:
    return {
        "type": "entry",
        "lane": journal.lane,
        "branch": journal.branch,
        "seq": e.seq,
        "kind": e.kind,
        "role": e.role,
        "tool_call_id": e.tool_call_id,
        "tool_name": e.tool_name,
        "derived": e.derived,
        "is_error": e.is_error,
        "body": e.body,
        "meta": e.meta,
        "body_hash": e.body_hash,
        "byte_length": e.byte_length,
        "meta_hash": e.meta_hash,
        "parent_hash": e.parent_hash,
        "entry_hash": e.entry_hash,
        "token_count": e.token_count,
        "token_source": e.token_source,
        "chunks": [[c.position, c.offset, c.length, c.hash] for c in e.chunks.all()],
        "artifact": e.artifact.receipt() if e.artifact_id else None,
        "created_at": e.created_at,
    }


def _entries(journal: Journal) -> Iterator[Entry]:
    last = 0
    while True:
        rows = list(
            Entry.objects.filter(journal=journal, seq__gt=last)
            .select_related("artifact__tenant")
            .prefetch_related("chunks")
            .order_by("seq")[:BATCH]
        )
        if not rows:
            return
        yield from rows
        last = rows[-1].seq


def _fold_record(f: Fold, journal: Journal, numbers: dict[int, int]) -> dict[str, Any]:
    return {
        "type": "fold",
        "lane": journal.lane,
        "branch": journal.branch,
        "number": f.number,
        "kind": f.kind,
        "previous": numbers.get(f.previous_id) if f.previous_id else None,
        "seq_start": f.seq_start,
        "seq_end": f.seq_end,
        "revision": f.revision,
        "range_hash": f.range_hash,
        "outcome": f.outcome,
        "writer": f.writer,
        "verifier": f.verifier,
        "manifest": f.manifest,
        "delta": f.delta,
        "delta_hash": hashlib.sha256(f.delta.encode("utf-8")).hexdigest(),
        "state_hash": f.state_hash,
        "facts_added": f.facts_added,
        "ops_rejected": f.ops_rejected,
        "created_at": f.created_at,
    }


_VERDICT_FIELDS = (
    "key",
    "op",
    "claim",
    "support",
    "judge",
    "entailment",
    "entailment_reason",
    "temporal",
    "temporal_reason",
    "accepted",
    "item_accepted",
)
_PROPOSAL_FIELDS = (
    "round",
    "kind",
    "raw",
    "parsed",
    "error",
    "verifier_raw",
    "verifier_error",
    "ops",
)


def _attempt_records(journal: Journal, numbers: dict[int, int]) -> Iterator[dict[str, Any]]:
    """One ``attempt`` record per writer run of ``journal``, proposals and verdicts nested."""
    for a in FoldAttempt.objects.filter(journal=journal).order_by("pk"):
        proposals = []
        delta_ops: list[Any] | None = None
        for p in Proposal.objects.filter(attempt=a).prefetch_related("verdicts").order_by("round"):
            if p.ops_from is not None and a.fold_id is not None:  # a run of the delta's ops
                if delta_ops is None:
                    delta = Fold.objects.filter(pk=a.fold_id).values_list("delta", flat=True)
                    delta_ops = json.loads(delta.first() or "{}").get("ops", [])
                p.delta_ops_set(delta_ops)
            ops = p.ops
            for v in p.verdicts.all():  # a claim and support read from the op they name
                v.proposal_ops_set(ops)
            proposals.append(
                {
                    **{name: getattr(p, name) for name in _PROPOSAL_FIELDS},
                    "verdicts": [
                        {name: getattr(v, name) for name in _VERDICT_FIELDS}
                        for v in sorted(p.verdicts.all(), key=lambda v: v.pk)
                    ],
                }
            )
        yield {
            "type": "attempt",
            "lane": journal.lane,
            "branch": journal.branch,
            "fold": numbers.get(a.fold_id) if a.fold_id else None,
            "number": a.number,
            "seq_start": a.seq_start,
            "seq_end": a.seq_end,
            "revision": a.revision,
            "range_hash": a.range_hash,
            "writer": a.writer,
            "writer_label": a.writer_label,
            "verifier": a.verifier,
            "outcome": a.outcome,
            "error": a.error,
            "record": a.record,
            "proposals": proposals,
            "created_at": a.created_at,
        }


def _retirement_record(r: RetirementRequest, journal: Journal) -> dict[str, Any]:
    return {
        "type": "retirement",
        "lane": journal.lane,
        "branch": journal.branch,
        "fact_id": r.fact_id,
        "fact_text": r.fact_text,
        "requested_in": r.requested_in.number,
        "evidence": r.evidence,
        "reason": r.reason,
        "status": r.status,
        "reviewer": r.reviewer.get_username() if r.reviewer_id else None,
        "comment": r.comment,
        "decided_at": r.decided_at,
        "decided_in": r.decided_in.number if r.decided_in_id else None,
        "created_at": r.created_at,
    }


@dataclass
class ExportSummary:
    """What an export wrote: record and entry counts, journals, folds, the file's sha256."""

    records: int
    entries: int
    folds: int
    journals: int
    sha256: str
    exported_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def session_export(
    *,
    session: Session,
    out: IO[bytes],
    lane: str = "",
    branch: str = "",
    actor: Any = None,
    via: str = "ui",
    receipts: ExtraRecords | None = None,
) -> ExportSummary:
    """Write the export of ``session`` (all journals, or those of ``lane``/``branch``) to ``out``.

    Entry bodies are the **stored bytes**, unfiltered (the export must re-import hash for
    hash), so an export needs the raw-read role (:func:`audit_app.reads.raw_export_allow`:
    a tenant admin; ``actor`` ``None`` is a command run by the server's operator). Every
    other surface shows bodies filtered by :mod:`journal_app.privacy`.

    Memory stays flat: entries are read 1,000 at a time with their chunks.

    Args:
        actor: the user (or API key) asking; ``None`` for a command without a user.
        via: where the request came from, kept in the audit event of a refusal.
        receipts: the recovery receipts' records
            (:func:`recovery_app.session_transfer.receipt_records`), written last; ``None``
            writes none (recovery is above the ledger: the export's entry points call
            :func:`recovery_app.session_transfer.session_export`, which passes them).

    Raises:
        audit_app.reads.RawReadDenied: (403) the actor may not read unfiltered entries;
            nothing is written to ``out``.

    Returns:
        :class:`ExportSummary`; ``sha256`` is the digest of every byte before the ``end``
        record (the value the ``end`` record carries).
    """
    raw_export_allow(session=session, actor=actor, via=via)
    journals = list(session.journals.order_by("lane", "branch"))
    if lane:
        journals = [j for j in journals if j.lane == lane]
    if branch:
        journals = [j for j in journals if j.branch == branch]
    for j in journals:
        j.session = session
    digest = hashlib.sha256()
    counts = {"records": 0, "entries": 0, "folds": 0}
    exported_at = timezone.now().isoformat()

    def emit(record: dict[str, Any]) -> None:
        data = (_dumps(record) + "\n").encode("utf-8")
        digest.update(data)
        out.write(data)
        counts["records"] += 1

    emit(
        {
            "type": "header",
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "scope": {"tenant": session.tenant.slug, "session": session.key},
            "title": session.title,
            "source_format": session.source_format,
            "source_name": session.source_name,
            "session_meta": session.meta_dict,
            "exported_at": exported_at,
            "journals": [
                {
                    "lane": j.lane,
                    "branch": j.branch,
                    "head_seq": j.head_seq,
                    "head_hash": j.head_hash,
                    "chunk_bytes": j.chunk_bytes,
                }
                for j in journals
            ],
        }
    )
    for journal in journals:
        emit(
            {
                "type": "journal",
                "lane": journal.lane,
                "branch": journal.branch,
                "head_seq": journal.head_seq,
                "head_hash": journal.head_hash,
                "chunk_bytes": journal.chunk_bytes,
            }
        )
        for entry in _entries(journal):
            emit(_entry_record(entry, journal))
            counts["entries"] += 1
        folds = list(Fold.objects.filter(journal=journal).order_by("number"))
        numbers = {f.pk: f.number for f in folds}
        for fold in folds:
            emit(_fold_record(fold, journal, numbers))
            counts["folds"] += 1
        for record in _attempt_records(journal, numbers):
            emit(record)
        for r in (
            RetirementRequest.objects.filter(journal=journal)
            .select_related("requested_in", "decided_in", "reviewer")
            .defer("requested_in__state", "requested_in__delta", "requested_in__manifest")
            .order_by("pk")
        ):
            emit(_retirement_record(r, journal))
    for provider in (export_records, receipts):
        for record in provider(session, journals) if provider is not None else ():
            emit(record)
    summary = ExportSummary(
        records=counts["records"],
        entries=counts["entries"],
        folds=counts["folds"],
        journals=len(journals),
        sha256=digest.hexdigest(),
        exported_at=exported_at,
    )
    out.write(
        (
            _dumps(
                {
                    "type": "end",
                    "records": summary.records,
                    "entries": summary.entries,
                    "sha256": summary.sha256,
                }
            )
            + "\n"
        ).encode("utf-8")
    )
    return summary
