"""Ledger rows: folds with their manifest, delta and computed state (DESIGN.md section 5.2).

A fold is written once: its delta (the ops with the reducer's verdicts), the manifest and
the state that the reducer computed. The state is a cache of ``reduce(deltas)`` that
``verify_ledger`` recomputes and compares byte for byte.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.db import models

from journal_app.models import Journal


class RetirementRequest(models.Model):
    """A P0 retirement awaiting a reviewer (DESIGN.md section 5.2, "review queue").

    Created when a fold's retire op on a P0 fact has authoritative evidence from a later
    fold; the fact stays active until a reviewer approves. The decision itself is applied
    to the ledger as a ``review`` fold, so the state stays computed from deltas.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REFUSED = "refused"

    journal = models.ForeignKey(Journal, on_delete=models.PROTECT, related_name="retirements")
    fact_id = models.CharField(max_length=100)
    fact_text = models.TextField()
    requested_in = models.ForeignKey(
        "Fold", on_delete=models.PROTECT, related_name="retirements_requested"
    )
    evidence = models.JSONField(default=list)
    reason = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    comment = models.TextField(blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_in = models.ForeignKey(
        "Fold", null=True, blank=True, on_delete=models.PROTECT, related_name="retirements_decided"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["journal", "fact_id", "requested_in"], name="retirement_unique_request"
            )
        ]

    def __str__(self) -> str:
        return f"retire {self.fact_id} ({self.status})"


class Fold(models.Model):
    """One compaction step over a contiguous range of complete API rounds."""

    class Outcome(models.TextChoices):
        ACCEPTED = "accepted"
        REPAIRED = "repaired"
        FALLBACK = "fallback"
        TARGET_UNREACHABLE = "target_unreachable"
        FAILED = "failed"

    class Kind(models.TextChoices):
        FOLD = "fold"
        REVIEW = "review"
        CONSOLIDATION = "consolidation"
        REFOLD = "refold"

    journal = models.ForeignKey(Journal, on_delete=models.PROTECT, related_name="folds")
    number = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.FOLD)
    previous = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="next_fold"
    )
    seq_start = models.PositiveBigIntegerField(null=True, blank=True)
    seq_end = models.PositiveBigIntegerField(null=True, blank=True)
    revision = models.PositiveBigIntegerField()
    range_hash = models.CharField(
        max_length=64, help_text="idempotency key: sha256 of covered entry hashes"
    )
    outcome = models.CharField(max_length=24, choices=Outcome.choices)
    writer = models.CharField(max_length=100)
    verifier = models.CharField(max_length=100, blank=True)
    manifest = models.JSONField(default=dict)
    delta = models.TextField(help_text="canonical JSON of the delta, with op verdicts")
    state = models.TextField(help_text="canonical JSON of the ledger state after this fold")
    state_hash = models.CharField(max_length=64)
    facts_added = models.PositiveIntegerField(default=0)
    ops_rejected = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["journal_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["journal", "number"], name="fold_unique_number"),
            models.UniqueConstraint(fields=["journal", "range_hash"], name="fold_unique_range"),
        ]

    def __str__(self) -> str:
        return f"fold {self.number} of {self.journal}"

    @property
    def delta_dict(self) -> dict[str, Any]:
        return json.loads(self.delta)

    @property
    def state_dict(self) -> dict[str, Any]:
        return json.loads(self.state)


class TaskRun(models.Model):
    """One execution of a ledger task, whatever its outcome (DESIGN.md section 9).

    A row per execution: a retry or a redelivery of the same message adds a row with the
    same ``task_id``; ``attempt`` is Celery's retry count plus one. Rows written by the
    auto-scheduler start ``queued`` and are claimed by the run that picks them up.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        RETRYING = "retrying"

    task_name = models.CharField(max_length=200)
    journal = models.ForeignKey(
        Journal, null=True, blank=True, on_delete=models.PROTECT, related_name="task_runs"
    )
    task_id = models.CharField(max_length=255, blank=True, db_index=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    attempt = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.task_name} {self.task_id} attempt {self.attempt}: {self.status}"


class FoldAttempt(models.Model):
    """One run of a writer over one range of a journal (DESIGN.md 5.3), whatever came of it.

    Written with the fold it produced (``fold``), or alone when the fold failed (``fold`` is
    ``None``, ``outcome`` ``failed``, ``error`` says why; the ledger is untouched and a later
    run folds the same range). ``record`` holds the writer and verifier (model names, prompt
    versions and hashes), every model call with its usage and latency, and the fallback
    reason. The writer's answers are the :class:`Proposal` rows, their judgements the
    :class:`Verdict` rows: every proposal, verdict, repair and fallback is reachable from
    the fold as ``fold.attempts``.
    """

    class Outcome(models.TextChoices):
        ACCEPTED = "accepted"
        REPAIRED = "repaired"
        FALLBACK = "fallback"
        FAILED = "failed"

    journal = models.ForeignKey(Journal, on_delete=models.PROTECT, related_name="fold_attempts")
    fold = models.ForeignKey(
        Fold, null=True, blank=True, on_delete=models.PROTECT, related_name="attempts"
    )
    number = models.PositiveIntegerField(help_text="the fold number this attempt was for")
    seq_start = models.PositiveBigIntegerField()
    seq_end = models.PositiveBigIntegerField()
    revision = models.PositiveBigIntegerField()
    range_hash = models.CharField(max_length=64)
    writer = models.CharField(max_length=100)
    writer_label = models.CharField(max_length=200, blank=True)
    verifier = models.CharField(max_length=100, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    error = models.TextField(blank=True)
    record = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["journal_id", "created_at", "pk"]

    def __str__(self) -> str:
        return f"attempt at fold {self.number} of {self.journal}: {self.outcome}"


class Proposal(models.Model):
    """One writer answer of an attempt: ``round`` 0 the proposal, 1 the repair, 2 the fallback.

    ``kind``: ``proposal``/``repair`` (a model's reply, ``raw`` verbatim, ``parsed`` when it
    validated, else ``error``), ``offline`` (the offline writer's items), ``fallback`` (the
    mechanical ops that replaced a rejected repair). ``ops`` are the ops that stood.
    """

    class Kind(models.TextChoices):
        PROPOSAL = "proposal"
        REPAIR = "repair"
        OFFLINE = "offline"
        FALLBACK = "fallback"

    attempt = models.ForeignKey(FoldAttempt, on_delete=models.PROTECT, related_name="proposals")
    round = models.PositiveSmallIntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    raw = models.TextField(blank=True)
    parsed = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    verifier_raw = models.TextField(blank=True)
    verifier_error = models.TextField(blank=True)
    ops = models.JSONField(default=list)

    class Meta:
        ordering = ["attempt_id", "round"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "round"], name="proposal_unique_round")
        ]

    def __str__(self) -> str:
        return f"{self.kind} (round {self.round}) of {self.attempt}"


class Verdict(models.Model):
    """One judge's two verdicts on one proposed item (DESIGN.md 5.3).

    ``judge``: ``verifier`` (the verifier model), ``rules`` (the rubric applied
    mechanically), ``reducer`` (a dry run of the reducer's rules), ``parser`` (the item could
    not be turned into an op: unknown seq, duplicate key). An item stands only when every
    judge accepted it (``item_accepted``).
    """

    proposal = models.ForeignKey(Proposal, on_delete=models.PROTECT, related_name="verdicts")
    key = models.CharField(max_length=100)
    op = models.CharField(max_length=16, blank=True)
    claim = models.TextField()
    support = models.JSONField(default=list, help_text="cited entry hashes (hex)")
    judge = models.CharField(max_length=16)
    entailment = models.CharField(max_length=16)
    entailment_reason = models.TextField(blank=True)
    temporal = models.CharField(max_length=16)
    temporal_reason = models.TextField(blank=True)
    accepted = models.BooleanField(help_text="this judge accepted the item")
    item_accepted = models.BooleanField(help_text="every judge accepted the item")

    class Meta:
        ordering = ["proposal_id", "pk"]

    def __str__(self) -> str:
        return f"{self.judge} on {self.key}: {self.entailment}/{self.temporal}"
