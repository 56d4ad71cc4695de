"""Copying one export's ledger records into a re-imported journal, record by record.

:class:`LedgerCopy` is the work of :func:`ledger_app.services.reimport.ledger_reimport` for
one journal: each fold re-verified against the export and stored through the storage
helpers every fold uses, then the retirement requests and decisions, the writer runs
(attempts, proposals, verdicts), comments and annotations. :class:`HashRemap` carries the
export's entry hashes (and the 16-hex prefixes fact ids carry) to the new journal's.
Every refusal is a :class:`~ledger_app.errors.ReimportInvalid`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from django.utils.dateparse import parse_datetime

from audit_app.services import annotation_add, audit_record, comment_add
from journal_app.models import Entry, Journal, Membership
from ledger_app import reducer
from ledger_app.errors import ReimportInvalid
from ledger_app.models import Fold, FoldAttempt, Proposal, RetirementRequest, Verdict
from ledger_app.services.entries import range_hash
from ledger_app.services.state import latest_fold
from ledger_app.services.store import delta_apply, fold_store

_HEX64 = re.compile(r"[0-9a-f]{64}")
_ID16 = re.compile(r"(?<=:)[0-9a-f]{16}(?![0-9a-f])")
#: values kept verbatim when hashes are mapped: texts quote the journal byte for byte, and a
#: model's replies (and what was parsed from them) are what the model said
_VERBATIM = frozenset({"text", "quote", "fact_text", "claim", "raw", "verifier_raw", "parsed"})


@dataclass
class ReimportResult:
    """What :func:`ledger_reimport` re-created for one journal; ``skipped`` says what not, why."""

    folds: int = 0
    attempts: int = 0
    retirements: int = 0
    decisions: int = 0
    comments: int = 0
    annotations: int = 0
    receipts: int = 0
    unchanged: bool = False
    skipped: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The counts, ``unchanged`` and ``skipped`` as a JSON object."""
        return asdict(self)


class HashRemap:
    """Maps old entry hashes (and their 16-hex fact-id prefixes) to new ones in JSON values."""

    def __init__(self, hashes: Mapping[str, str]) -> None:
        self.full = dict(hashes)
        self.short = {o[:16]: n[:16] for o, n in hashes.items()}

    def text(self, s: str) -> str:
        s = _HEX64.sub(lambda m: self.full.get(m.group(0), m.group(0)), s)
        return _ID16.sub(lambda m: self.short.get(m.group(0), m.group(0)), s)

    def __call__(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            return {
                (self.text(k) if isinstance(k, str) else k): self(v, k) for k, v in value.items()
            }
        if isinstance(value, list):
            return [self(v) for v in value]
        if isinstance(value, str) and key not in _VERBATIM:
            return self.text(value)
        return value


def records_of(records: Sequence[Mapping[str, Any]], kind: str, journal: Journal) -> list[Any]:
    """The export's records of type ``kind`` of ``journal``'s lane."""
    return [r for r in records if r.get("type") == kind and r.get("lane") == journal.lane]


def _verdicts(results: Sequence[reducer.OpResult]) -> list[dict[str, Any]]:
    return [
        {"index": r.index, "op": r.op, "status": r.status, "reason": r.reason, "fact_id": r.fact_id}
        for r in results
    ]


def _user(name: Any, tenant: Any, roles: Sequence[str] | None = None) -> Any:
    """The user named in an export, only if here they are an active member of the target
    tenant (with one of ``roles`` when given): an imported file never lends a decision, a
    comment or an annotation to anyone else's account."""
    if not isinstance(name, str) or not name:
        return None
    members = Membership.objects.filter(tenant=tenant, user__username=name, user__is_active=True)
    if roles is not None:
        members = members.filter(role__in=list(roles))
    member = members.select_related("user").first()
    return member.user if member is not None else None


class LedgerCopy:
    """The copy of one export's ledger records into ``journal`` (see the module docstring).

    ``fold`` copies one fold (and its retirement requests and decision); :meth:`attempts`,
    :meth:`comments` and :meth:`annotations` the rest; ``result`` counts what was made.
    """

    def __init__(
        self, journal: Journal, records: Sequence[Mapping[str, Any]], mapping: Mapping[str, str]
    ) -> None:
        self.journal = journal
        self.records = records
        self.remap = HashRemap(mapping)
        self.old_by_seq = {r["seq"]: r["entry_hash"] for r in records_of(records, "entry", journal)}
        self.old_state: dict[str, Any] = reducer.reduce(None, [])
        self.folds: dict[int, Fold] = {}
        self.requests: dict[int, RetirementRequest] = {}
        self.retirements = records_of(records, "retirement", journal)
        self.result = ReimportResult()

    def bad(self, rec: Mapping[str, Any], what: str, name: str) -> ReimportInvalid:
        return ReimportInvalid(f"fold {rec.get('number')!r}: {what}", field=name)

    def covered(self, rec: Mapping[str, Any]) -> tuple[list[str], list[str]]:
        start, end = rec.get("seq_start"), rec.get("seq_end")
        if not (isinstance(start, int) and isinstance(end, int)):
            return [], []
        old = [self.old_by_seq.get(s, "") for s in range(start, end + 1)]
        return old, [self.remap.full.get(h, "") for h in old]

    # -- one fold ---------------------------------------------------------------------------
    def fold(self, rec: Mapping[str, Any]) -> None:
        number = rec.get("number")
        text = rec.get("delta")
        if not isinstance(text, str) or hashlib.sha256(text.encode()).hexdigest() != rec.get(
            "delta_hash"
        ):
            raise self.bad(rec, "the delta does not hash to its delta_hash", "delta_hash")
        old_delta = json.loads(text)
        old_verdicts = old_delta.pop("verdicts", [])
        previous = latest_fold(self.journal)
        if number != (previous.number + 1 if previous else 1) or rec.get("previous") != (
            previous.number if previous else None
        ):
            raise self.bad(rec, "folds must run 1, 2, 3 ... each naming its predecessor", "number")
        if old_delta.get("fold") != number:
            raise self.bad(rec, f"its delta says fold {old_delta.get('fold')!r}", "delta")
        # the export on its own terms: the pure replay gives its verdicts and state hash
        try:
            results = reducer.apply_in_place(self.old_state, old_delta)
        except (reducer.DeltaInvalid, reducer.PinViolation) as exc:
            raise self.bad(rec, f"the reducer refuses the exported delta: {exc}", "delta") from None
        if _verdicts(results) != old_verdicts:
            raise self.bad(rec, "the exported verdicts are not the reducer's", "delta")
        if reducer.state_hash(self.old_state) != rec.get("state_hash"):
            raise self.bad(rec, "the replayed state does not hash to state_hash", "state_hash")
        kind = rec.get("kind")
        old_cov, new_cov = self.covered(rec)
        if kind == Fold.Kind.FOLD and range_hash(old_cov) != rec.get("range_hash"):
            raise self.bad(rec, "range_hash is not the hash of the entries it covers", "range_hash")
        # the copy
        delta = self.remap(old_delta)
        applied = delta_apply(self.journal, previous, delta)
        if _verdicts(applied.reduction.results) != self.remap(old_verdicts):
            raise self.bad(rec, "the reducer judges the re-imported delta differently", "delta")
        if applied.state_hash != reducer.state_hash(self.remap(self.old_state)):
            raise self.bad(rec, "the re-imported state is not the exported one", "state_hash")
        manifest = self.remap(rec.get("manifest") or {})
        key = self.key(rec, manifest, new_cov, previous)
        if "range_hash" in manifest and new_cov:
            manifest["range_hash"] = range_hash(new_cov)
        fold = fold_store(
            journal=self.journal,
            applied=applied,
            checkpoint=True if kind == Fold.Kind.CONSOLIDATION else None,
            kind=kind,
            previous=previous,
            seq_start=rec.get("seq_start"),
            seq_end=rec.get("seq_end"),
            revision=rec.get("revision"),
            range_hash=key,
            outcome=rec.get("outcome"),
            writer=str(rec.get("writer", ""))[:100],
            verifier=str(rec.get("verifier", ""))[:100],
            manifest=manifest,
            facts_added=int(rec.get("facts_added") or 0),
            ops_rejected=int(rec.get("ops_rejected") or 0),
        )
        self.folds[fold.number] = fold
        self.result.folds += 1
        if kind == Fold.Kind.REVIEW:
            self.decide(rec, fold)
        self.request(fold)

    def key(
        self,
        rec: Mapping[str, Any],
        manifest: dict[str, Any],
        new_cov: list[str],
        previous: Fold | None,
    ) -> str:
        kind = rec.get("kind")
        if kind == Fold.Kind.FOLD:
            return range_hash(new_cov)
        if kind == Fold.Kind.REVIEW:
            review = manifest.get("review") or {}
            request = self.requests.get(review.get("request"))  # type: ignore[arg-type]
            if request is None:
                raise self.bad(rec, "a review fold for no exported retirement request", "manifest")
            review["request"] = request.pk
            return hashlib.sha256(f"review:{request.pk}".encode()).hexdigest()
        if kind == Fold.Kind.CONSOLIDATION and previous is not None:
            target = (manifest.get("consolidation") or {}).get("target_tokens")
            return hashlib.sha256(
                f"consolidation:{previous.state_hash}:{target}".encode()
            ).hexdigest()
        origin = self.folds.get(manifest.get("refold_of") or 0)
        if kind == Fold.Kind.REFOLD and origin is not None:  # as ledger_refold_apply keys it
            return hashlib.sha256(
                f"refold:{origin.range_hash}:{rec.get('writer')}".encode()
            ).hexdigest()
        return hashlib.sha256(
            f"{kind}:{rec.get('writer')}:{rec.get('number')}:{new_cov}".encode()
        ).hexdigest()

    # -- retirements and decisions ------------------------------------------------------------
    def request(self, fold: Fold) -> None:
        for rec in self.retirements:
            if rec.get("requested_in") != fold.number:
                continue
            made = RetirementRequest.objects.create(
                journal=self.journal,
                fact_id=self.remap.text(str(rec.get("fact_id", ""))),
                fact_text=str(rec.get("fact_text", "")),
                requested_in=fold,
                evidence=self.remap(rec.get("evidence") or []),
                reason=str(rec.get("reason", "")),
            )
            self.requests[rec.get("pk", id(rec))] = made
            self.result.retirements += 1

    def decide(self, rec: Mapping[str, Any], fold: Fold) -> None:
        pk = (fold.manifest.get("review") or {}).get("request")
        request = next((r for r in self.requests.values() if r.pk == pk), None)
        exported = next(
            (
                r
                for r in self.retirements
                if r.get("decided_in") == fold.number
                and self.remap.text(str(r.get("fact_id"))) == getattr(request, "fact_id", None)
            ),
            None,
        )
        if request is None or exported is None:
            raise self.bad(rec, "a review fold whose decision the export does not hold", "kind")
        decision = "approve" if exported.get("status") == "approved" else "refuse"
        reviewer = _user(
            exported.get("reviewer"),
            self.journal.session.tenant,
            (Membership.Role.REVIEWER, Membership.Role.ADMIN),
        )
        if reviewer is None and exported.get("reviewer"):
            self.result.skipped.append(
                f"reviewer {exported.get('reviewer')!r} of fact {request.fact_id}: not an "
                "active reviewer of this tenant; the decision is kept without a reviewer account"
            )
        request.status = exported.get("status")
        request.reviewer = reviewer
        request.comment = str(exported.get("comment", ""))
        request.decided_at = parse_datetime(str(exported.get("decided_at") or ""))
        request.decided_in = fold
        request.save()
        audit_record(
            actor=reviewer,
            tenant=self.journal.session.tenant,
            action=f"review.{decision}",
            object_type="retirement",
            object_id=str(request.pk),
            object_label=f"{self.journal.scope_label} fact {request.fact_id}",
            details={
                "comment": request.comment,
                "fold": fold.number,
                "fact_id": request.fact_id,
                "imported": True,
                "reviewer": exported.get("reviewer"),
            },
        )
        self.result.decisions += 1

    # -- writer runs --------------------------------------------------------------------------
    def attempts(self) -> None:
        for rec in records_of(self.records, "attempt", self.journal):
            number = rec.get("fold")
            fold = self.folds.get(number) if number is not None else None
            if number is not None and fold is None:
                raise ReimportInvalid(
                    f"an attempt names fold {number!r}, not in the export", field="fold"
                )
            old_cov, new_cov = self.covered(rec)
            if range_hash(old_cov) != rec.get("range_hash"):
                raise ReimportInvalid(
                    f"the attempt at fold {rec.get('number')!r}: range_hash is not the hash "
                    "of the entries it covers",
                    field="range_hash",
                )
            attempt = FoldAttempt.objects.create(
                journal=self.journal,
                fold=fold,
                range_hash=range_hash(new_cov),
                **{
                    k: self.remap(rec.get(k), k)
                    for k in (
                        "number",
                        "seq_start",
                        "seq_end",
                        "revision",
                        "writer",
                        "writer_label",
                        "verifier",
                        "outcome",
                        "error",
                        "record",
                    )
                },
            )
            for p in rec.get("proposals") or []:
                proposal = Proposal.objects.create(
                    attempt=attempt,
                    **{k: self.remap(v, k) for k, v in p.items() if k != "verdicts"},
                )
                Verdict.objects.bulk_create(
                    [
                        Verdict(proposal=proposal, **{k: self.remap(x, k) for k, x in v.items()})
                        for v in p.get("verdicts") or []
                    ]
                )
            self.result.attempts += 1

    # -- comments, annotations, receipts ------------------------------------------------------
    def comments(self) -> None:
        for rec in records_of(self.records, "comment", self.journal):
            author = _user(rec.get("author"), self.journal.session.tenant)
            if author is None:
                self.result.skipped.append(f"comment by {rec.get('author')!r}: no such user here")
                continue
            entry = None
            if rec.get("entry_hash"):
                new = self.remap.full.get(str(rec["entry_hash"]))
                entry = Entry.objects.filter(journal=self.journal, entry_hash=new).first()
                if entry is None:
                    raise ReimportInvalid(
                        f"a comment on entry sha256:{rec['entry_hash']}, not in the export",
                        field="entry_hash",
                    )
            comment_add(
                journal=self.journal,
                author=author,
                text=str(rec.get("text", "")),
                entry=entry,
                fact_id="" if entry is not None else self.remap.text(str(rec.get("fact_id"))),
            )
            self.result.comments += 1

    def annotations(self) -> None:
        for rec in self.records:
            if rec.get("type") != "annotation":
                continue
            author = _user(rec.get("author"), self.journal.session.tenant)
            if author is None:
                self.result.skipped.append(
                    f"annotation by {rec.get('author')!r}: no such user here"
                )
                continue
            annotation_add(
                session=self.journal.session,
                author=author,
                verdict=str(rec.get("verdict", "")),
                note=str(rec.get("note", "")),
            )
            self.result.annotations += 1
