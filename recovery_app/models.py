"""Recovery rows: receipts of every attempt, and the lexical search index (docs/design.md section 7).

The search index holds one :class:`SearchSegment` per segment of every raw entry (derived
entries and reasoning blocks are never indexed, so they are never results). Its text is the
entry's tokens (:mod:`recovery_app.lexical`); the database indexes it:

* PostgreSQL: a ``tsvector`` column ``tsv`` with a GIN index (migration 0002), computed from
  ``tokens`` by a trigger on insert that then empties ``tokens`` (migration 0004: the text is
  not kept twice);
* SQLite: an FTS5 virtual table ``recovery_fts`` over this table, kept in step by triggers.

Entries are append-only, so the index only grows: segments are append-only rows too.
"""

from __future__ import annotations

from django.db import models

from journal_app.models import AppendOnlyModel, Entry, Journal


class SearchSegment(AppendOnlyModel):
    """Up to 16,000 tokens of one entry (see :func:`recovery_app.lexical.segments`)."""

    # no index of their own: the unique (entry, segment) and the (journal, seq) index lead
    # with them (bench/README.md, "Storage")
    entry = models.ForeignKey(Entry, on_delete=models.PROTECT, related_name="+", db_index=False)
    journal = models.ForeignKey(Journal, on_delete=models.PROTECT, related_name="+", db_index=False)
    seq = models.PositiveBigIntegerField()
    segment = models.PositiveIntegerField(default=0)
    #: the segment's space-joined tokens as written; on PostgreSQL a trigger turns them into
    #: ``tsv`` on insert and stores ``''`` here (the text would be a second copy, migration
    #: 0004); on SQLite the FTS5 table reads them from this column
    tokens = models.TextField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["entry", "segment"], name="searchsegment_unique_entry")
        ]
        indexes = [models.Index(fields=["journal", "seq"], name="searchsegment_journal_seq")]

    def __str__(self) -> str:
        return f"segment {self.segment} of entry {self.entry_id}"


class SearchIndexState(models.Model):
    """How far a journal is indexed: every entry with ``seq <= indexed_seq`` has its segments."""

    journal = models.OneToOneField(Journal, on_delete=models.PROTECT, related_name="+")
    indexed_seq = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.journal} indexed to seq {self.indexed_seq}"


class Receipt(models.Model):
    """The durable record of one recovery attempt (docs/design.md section 7, "Receipts").

    What triggered it, the snapshot (scope and revision), each query with its leads, each
    read with its verification result, the sources used, the claims and the facts proposed
    to the ledger, the budget used (tokens, seconds) and the outcome. Written once when the
    attempt ends; ``entered_fold`` and ``verdicts`` are filled in when the recovered facts
    go through a ledger fold.
    """

    class Outcome(models.TextChoices):
        NOT_TRIGGERED = "not_triggered"
        DENIED = "denied"
        NOTHING_FOUND = "nothing_found"
        RECOVERED = "recovered"
        BUDGET_EXHAUSTED = "budget_exhausted"
        FAILED = "failed"

    class Kind(models.TextChoices):
        FOLD = "fold", "at a fold"
        MANUAL = "manual", "manual query"
        ANALYST = "analyst", "agent analyst"

    journal = models.ForeignKey(Journal, on_delete=models.PROTECT, related_name="receipts")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.FOLD)
    fold = models.ForeignKey(
        "ledger_app.Fold",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="recovery_receipts",
        help_text="the fold the attempt ran after, when it was given one",
    )
    entered_fold = models.ForeignKey(
        "ledger_app.Fold",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="recovered_receipts",
        help_text="the fold whose delta carried the recovered facts to the verifier",
    )
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    reason = models.TextField(blank=True)
    question = models.TextField(blank=True)
    trigger = models.JSONField(default=dict)
    scanned_to = models.PositiveBigIntegerField(
        default=0, help_text="last seq of the trigger window (matches at or before it fired once)"
    )
    snapshot = models.JSONField(default=dict, help_text="scope, revision, head hash; {} if none")
    queries = models.JSONField(default=list)
    reads = models.JSONField(default=list)
    sources = models.JSONField(default=list)
    claims = models.JSONField(default=list)
    rejected_claims = models.JSONField(default=list)
    recovered = models.JSONField(default=list, help_text="ops proposed to the ledger")
    verdicts = models.JSONField(default=list, help_text="the reducer's verdicts on those ops")
    budget = models.JSONField(default=dict, help_text="the limits of the attempt")
    usage = models.JSONField(default=dict, help_text="what the attempt used, by limit")
    tokens = models.PositiveIntegerField(default=0, help_text="tokens of retrieved text")
    seconds = models.FloatField(default=0.0)
    model_requests = models.PositiveIntegerField(default=0)
    analyst = models.CharField(max_length=200, default="lexical")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["journal", "-created_at"], name="receipt_journal_created")]

    def __str__(self) -> str:
        return f"receipt {self.pk} of {self.journal}: {self.outcome}"
