"""What the integrity checks read of a journal: its entries as rows, and the problem record.

:func:`entry_rows` reads every entry's hash and figures (and the body of the authoritative
messages only, the pin sources) in two streamed queries, checking each entry's figures
against its ``figures_hash`` on the way (the **figures** check of
:func:`ledger_app.services.integrity.ledger_integrity`). Read-only.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from journal_app.chain import ArtifactFigures, check_figures
from journal_app.content import content_text, is_authoritative, pin_text
from journal_app.hashing import display
from journal_app.models import Artifact, Entry, Journal


@dataclass(frozen=True)
class Problem:
    """One integrity problem: which check, which fold (number), fact and entry, and why."""

    check: str
    detail: str
    fold: int | None = None
    fact: str | None = None
    entry: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        where = f"fold {self.fold}: " if self.fold is not None else ""
        return f"{self.check}: {where}{self.detail}"


@dataclass
class EntryRow:
    """What the checks need of one entry: no body unless it is a pin source."""

    seq: int
    entry_hash: str
    kind: str
    role: str
    is_error: bool
    derived: bool
    token_count: int
    pin_text: str | None = None
    #: the pin text under pin rules 3 (harness blocks inside the message left out)
    pin_text3: str | None = None
    #: the pin text under pin rules 1 (before harness records were told apart):
    #: what a delta without ``pin_rules`` was written against
    legacy_pin_text: str | None = None


def entry_rows(journal: Journal) -> tuple[dict[int, EntryRow], dict[str, EntryRow], list[Problem]]:
    """The journal's entries as rows, by seq and by hash, and the figures problems.

    Each entry's figures (token count and source, source position, its artifact's figures)
    are checked against its ``figures_hash`` as they stream by: the ledger's token figures
    come from them (a tampered figure warns on the pages too).
    """
    artifacts = {
        pk: ArtifactFigures(content_hash, size, tokens, source)
        for pk, content_hash, size, tokens, source in Artifact.objects.filter(
            pk__in=Entry.objects.filter(journal=journal, artifact__isnull=False).values(
                "artifact_id"
            )
        ).values_list("pk", "content_hash", "byte_size", "token_count", "token_source")
    }
    by_seq: dict[int, EntryRow] = {}
    figures: list[Problem] = []
    for seq, h, kind, role, is_error, derived, tokens, source, ref, artifact, stored in (
        Entry.objects.filter(journal=journal)
        .order_by("seq")
        .values_list(
            "seq",
            "entry_hash",
            "kind",
            "role",
            "is_error",
            "derived",
            "token_count",
            "token_source",
            "source_ref",
            "artifact_id",
            "figures_hash",
        )  # fmt: skip
        .iterator(chunk_size=5000)
    ):
        by_seq[seq] = EntryRow(seq, h, kind, role, is_error, derived, tokens)
        figures += [
            Problem("figures", f"entry seq {seq}: {detail}", entry=display(h))
            for detail in check_figures(
                entry_hash=h,
                token_count=tokens,
                token_source=source,
                source_ref=ref,
                artifact=artifacts.get(artifact),
                figures_hash_stored=stored,
            )
        ]
    for seq, body, meta in (
        Entry.objects.filter(
            journal=journal, kind="message", role__in=("system", "developer", "user")
        )
        .values_list("seq", "body", "meta")
        .iterator(chunk_size=500)
    ):
        row = by_seq[seq]
        text = content_text(row.kind, json.loads(body))
        data = json.loads(meta)
        if text and is_authoritative(row.kind, row.role, row.derived, data, text=text, rules=2):
            row.pin_text = text
        if text and is_authoritative(row.kind, row.role, row.derived, data, text=text, rules=3):
            row.pin_text3 = pin_text(text, 3)
        if not row.derived and text:
            row.legacy_pin_text = text
    return by_seq, {r.entry_hash: r for r in by_seq.values()}, figures
