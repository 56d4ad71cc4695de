"""What people add to a session and what they did with it (docs/design.md 8, 9).

* :class:`Comment`: a note on one ledger fact or one journal entry (who, when, text).
* :class:`Annotation`: a session-level label, "good/bad compaction example", with a note.
* :class:`AuditEvent`: one row per review, comment, annotation and export (actor, action,
  object, time, details).

Every row belongs to exactly one tenant and is append-only (the journal's rule, reused):
a comment is never edited, an audit event never rewritten. The role permissions the UI
checks (``review_retirement``, ``export_session``, ``view_audit_log``) are declared on
:class:`AuditEvent` and granted to the role groups by :mod:`audit_app.roles`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from journal_app.models import AppendOnlyModel, Entry, Journal, Session, Tenant
from journal_app.privacy import filter_text


class Comment(AppendOnlyModel):
    """A comment on a ledger fact (``journal`` + ``fact_id``) or a journal entry (``entry``).

    Exactly one target: ``entry`` set and ``fact_id`` empty, or ``fact_id`` set and
    ``entry`` null. ``journal`` is the scope in both cases (for an entry, its journal).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="comments")
    journal = models.ForeignKey(Journal, on_delete=models.PROTECT, related_name="comments")
    entry = models.ForeignKey(
        Entry, null=True, blank=True, on_delete=models.PROTECT, related_name="comments"
    )
    fact_id = models.CharField(max_length=200, blank=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(entry__isnull=True) & ~models.Q(fact_id=""))
                | (models.Q(entry__isnull=False) & models.Q(fact_id="")),
                name="comment_one_target",
            )
        ]
        indexes = [models.Index(fields=["journal", "fact_id"], name="comment_journal_fact")]

    def __str__(self) -> str:
        target = f"fact {self.fact_id}" if self.fact_id else f"entry {self.entry_id}"
        return f"comment by {self.author_id} on {target}"


class Annotation(AppendOnlyModel):
    """A session-level label: this run is a good or a bad compaction example."""

    class Verdict(models.TextChoices):
        GOOD = "good", "good compaction example"
        BAD = "bad", "bad compaction example"

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="annotations")
    session = models.ForeignKey(Session, on_delete=models.PROTECT, related_name="annotations")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    verdict = models.CharField(max_length=8, choices=Verdict.choices)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.verdict} example: {self.session_id}"


class AuditEvent(AppendOnlyModel):
    """One thing a person did: a review, a refused review, a comment, an annotation, an export.

    ``actor`` is null for events written by a command with no user; ``actor_name`` keeps the
    username as it was. ``object_type``/``object_id`` name the object (``retirement``/``12``,
    ``session``/``acme/s1``, ``fact``/``pin:...``); ``details`` holds the rest as JSON.
    """

    tenant = models.ForeignKey(
        Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="audit_events"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=40)
    object_type = models.CharField(max_length=40)
    object_id = models.CharField(max_length=300)
    object_label = models.CharField(max_length=300, blank=True)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["tenant", "-created_at"], name="audit_tenant_time")]
        permissions = [
            ("review_retirement", "Can approve or refuse a P0 retirement"),
            ("export_session", "Can export a session as JSON Lines"),
            ("view_audit_log", "Can read the tenant's audit log"),
        ]

    @property
    def shown_label(self) -> str:
        """``object_label`` as the audit log shows it: secrets filtered by the one detector
        (:mod:`journal_app.privacy`); a label may carry a session's title, which is its first
        user message. ``object_label`` stays as recorded (the log's hash covers it)."""
        return filter_text(self.object_label).text if self.object_label else ""

    def __str__(self) -> str:
        return f"{self.actor_name or 'system'} {self.action} {self.object_type} {self.object_id}"


class LogRecord(AppendOnlyModel):
    """One link of a tenant's append-only, hash-chained log of reviews and what people did.

    Every write of a retirement request (its creation and its decision), a comment, an
    annotation and an audit event appends the row as stored (``record``: canonical JSON of
    every column, :func:`journal_app.record_chain.record_value` values) to the chain of its tenant
    (``chain``: the tenant's pk, 0 for account events). ``record_hash`` is
    :func:`journal_app.record_chain.record_hash` of the record (with its chain, seq, model and
    object id) chained to ``previous``, the hash of the record before it. Append-only (the
    model layer; on PostgreSQL a trigger too); ``verify_ledger`` recomputes the chain and
    compares each row with its latest record (:func:`audit_app.chained_log.log_verify`).
    """

    chain = models.PositiveBigIntegerField(help_text="tenant pk, 0: no tenant")
    seq = models.PositiveBigIntegerField()
    model = models.CharField(max_length=100, help_text="app_label.ModelName")
    object_id = models.PositiveBigIntegerField()
    record = models.TextField(help_text="canonical JSON of the row's columns")
    previous = models.CharField(max_length=64, blank=True)
    record_hash = models.CharField(max_length=64)

    class Meta:
        ordering = ["chain", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["chain", "seq"], name="logrecord_unique_seq")
        ]
        indexes = [models.Index(fields=["model", "object_id"], name="logrecord_object")]

    def __str__(self) -> str:
        return f"log {self.chain}#{self.seq}: {self.model} {self.object_id}"
