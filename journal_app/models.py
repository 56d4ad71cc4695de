"""Journal rows: tenants, sessions, journals (one per scope), entries, chunks, artifacts,
and the stored cost figure of each journal (derived, recomputed when the journal grows).

docs/design.md section 4. Entries, chunks and artifacts are append-only: the model layer refuses
``save()`` on an existing row, ``delete()``, and queryset ``update()``/``delete()``; on
PostgreSQL a trigger (migration 0002) refuses UPDATE and DELETE as well.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.db import models

from journal_app.chain_check import StoredChunk, check_entry
from journal_app.content import content_text, is_authoritative
from journal_app.hashing import display


class AppendOnlyError(Exception):
    """An attempt to update or delete an append-only row (entry, chunk, artifact)."""


class AppendOnlyQuerySet(models.QuerySet):
    def update(self, **kwargs: Any) -> int:
        raise AppendOnlyError(f"{self.model.__name__} rows are append-only: update refused")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError(f"{self.model.__name__} rows are append-only: delete refused")


class AppendOnlyModel(models.Model):
    """Base for rows that may be inserted once and never changed."""

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnlyError(f"{type(self).__name__} rows are append-only: update refused")
        kwargs["force_insert"] = True
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError(f"{type(self).__name__} rows are append-only: delete refused")


class Tenant(models.Model):
    """An organisation; every object is reached through exactly one tenant."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="tenants", blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    """A user's membership of a tenant with a role (docs/design.md section 8)."""

    class Role(models.TextChoices):
        OPERATOR = "operator"
        REVIEWER = "reviewer"
        ADMIN = "admin"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.OPERATOR)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "tenant"], name="membership_unique_user_tenant")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant} as {self.role}"


class Session(models.Model):
    """One agent run (or one imported transcript). Holds one or more journals (lanes, branches)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="sessions")
    key = models.SlugField(max_length=200)
    title = models.CharField(max_length=300, blank=True)
    source_format = models.CharField(max_length=40, blank=True)
    source_name = models.CharField(max_length=500, blank=True)
    meta = models.TextField(default="{}", help_text="canonical JSON of source-level fields")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "key"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "key"], name="session_unique_tenant_key")
        ]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.key}"

    @property
    def shown_title(self) -> str:
        """The title as pages show it: secrets filtered (:mod:`journal_app.privacy`); a title
        is the first user message, which may hold one. ``title`` stays verbatim."""
        from journal_app.privacy import filter_text

        return filter_text(self.title).text if self.title else ""

    @property
    def meta_dict(self) -> dict[str, Any]:
        return json.loads(self.meta)


class Journal(models.Model):
    """The append-only chain of one scope: (tenant, session, lane, branch)."""

    session = models.ForeignKey(Session, on_delete=models.PROTECT, related_name="journals")
    lane = models.CharField(max_length=100, default="main")
    branch = models.CharField(max_length=100, default="main")
    head_seq = models.PositiveBigIntegerField(default=0)
    head_hash = models.CharField(max_length=64, blank=True)
    chunk_bytes = models.PositiveIntegerField(default=4096)
    last_source_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="the source's time of the newest timed entry appended "
        "(journal_app.times.entry_time); null: the source gives no times. The sessions "
        "list's last activity sorts and filters on it",
    )
    unfolded_tokens = models.PositiveBigIntegerField(
        null=True,
        default=0,
        help_text="sum of token_count of the entries after the last fold's seq_end, kept by "
        "the append and by each fold; null: not counted yet (a journal from before "
        "the column), counted once by the fold scheduler",
    )
    ended_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="the run that wrote this journal has stopped (an imported transcript): "
        "a trailing call without a result is final, not still pending",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session_id", "lane", "branch"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "lane", "branch"], name="journal_unique_scope"
            )
        ]

    def __str__(self) -> str:
        return self.scope_label

    @property
    def tenant(self) -> Tenant:
        return self.session.tenant

    @property
    def scope_label(self) -> str:
        """``tenant/session/lane/branch``."""
        return f"{self.session.tenant.slug}/{self.session.key}/{self.lane}/{self.branch}"

    def scope_fields(self) -> dict[str, str]:
        """The scope as the hash header spells it."""
        return {
            "tenant": self.session.tenant.slug,
            "session": self.session.key,
            "lane": self.lane,
            "branch": self.branch,
        }


class Artifact(AppendOnlyModel):
    """An oversized tool result kept once in the content-addressed store (docs/design.md section 4).

    The bytes live in Django's default storage under ``artifacts/<tenant>/<sha256>``.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="artifacts")
    content_hash = models.CharField(max_length=64)
    media_type = models.CharField(max_length=100, default="text/plain")
    byte_size = models.PositiveBigIntegerField()
    token_count = models.PositiveBigIntegerField()
    token_source = models.CharField(max_length=40)
    preview = models.TextField()
    source_tool = models.CharField(max_length=200, blank=True)
    storage_name = models.CharField(max_length=300)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "content_hash"], name="artifact_unique_tenant_hash"
            )
        ]

    def __str__(self) -> str:
        return self.reference

    @property
    def reference(self) -> str:
        """``artifact://<tenant>/<sha256>``."""
        return f"artifact://{self.tenant.slug}/{self.content_hash}"

    def receipt(self) -> dict[str, Any]:
        """The artifact receipt carried in context instead of the content."""
        return {
            "reference": self.reference,
            "media_type": self.media_type,
            "original_size": {"tokens": self.token_count, "bytes": self.byte_size},
            "token_source": self.token_source,
            "preview": self.preview,
            "content_hash": display(self.content_hash),
            "source_tool": self.source_tool,
        }


class Entry(AppendOnlyModel):
    """One journal entry, content-addressed (docs/design.md section 4).

    ``body`` is the RFC 8785 canonical JSON of the content, stored verbatim as text;
    ``meta`` is the canonical JSON of the source fields the journal does not model.
    """

    journal = models.ForeignKey(Journal, on_delete=models.PROTECT, related_name="entries")
    seq = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=16)
    role = models.CharField(max_length=16)
    tool_call_id = models.CharField(max_length=200, blank=True)
    tool_name = models.CharField(max_length=200, blank=True)
    derived = models.BooleanField(default=False)
    is_error = models.BooleanField(default=False)
    body = models.TextField()
    body_hash = models.CharField(max_length=64)
    byte_length = models.PositiveBigIntegerField()
    meta = models.TextField(default="{}")
    meta_hash = models.CharField(max_length=64)
    parent_hash = models.CharField(max_length=64, blank=True)
    entry_hash = models.CharField(max_length=64, unique=True)
    token_count = models.PositiveBigIntegerField(default=0)
    token_source = models.CharField(max_length=40, blank=True)
    artifact = models.ForeignKey(
        Artifact, null=True, blank=True, on_delete=models.PROTECT, related_name="entries"
    )
    source_ref = models.CharField(max_length=100, blank=True)
    figures_hash = models.CharField(
        max_length=64,
        help_text="sha256 of the figures derived at append (token_count, token_source, "
        "source_ref, the artifact's figures), bound to entry_hash: journal_app.chain.figures_hash",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["journal_id", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["journal", "seq"], name="entry_unique_journal_seq")
        ]
        indexes = [
            # kind, then is_error, then seq: the timeline filter ``kind:... error:...`` counts
            # and pages in this index alone (no heap scan of every entry of the kind); its
            # ``(journal, kind)`` prefix serves the reads by kind as the old index did
            models.Index(
                fields=["journal", "kind", "is_error", "seq"], name="entry_journal_kind_error"
            )
        ]
        verbose_name_plural = "entries"

    def __str__(self) -> str:
        return f"{self.seq} {self.kind}/{self.role} {display(self.entry_hash)[:19]}"

    @property
    def body_unreadable(self) -> bool:
        """The stored body is not a JSON object (changed below the application): pages show
        it raw with a warning, and ``verify_journal`` names the entry."""
        try:
            return not isinstance(json.loads(self.body), dict)
        except ValueError:
            return True

    @property
    def content(self) -> dict[str, Any]:
        """The body parsed; a body that is not a JSON object comes back as its raw text
        (``text`` and ``output``) with ``body_not_json`` set, so a page shows it instead of
        failing."""
        try:
            value = json.loads(self.body)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        return {"text": self.body, "output": self.body, "body_not_json": True}

    @property
    def meta_dict(self) -> dict[str, Any]:
        return json.loads(self.meta)

    @property
    def text(self) -> str:
        """The human-readable text of the entry (message text, tool output, arguments)."""
        return content_text(self.kind, self.content)

    @property
    def short_hash(self) -> str:
        return display(self.entry_hash)[:19]

    @property
    def authoritative(self) -> bool:
        """A pin source: see :func:`journal_app.content.is_authoritative`."""
        return is_authoritative(self.kind, self.role, self.derived, self.meta_dict, text=self.text)

    def hash_problems(self, *, expected_parent: str | None = None) -> list[str]:
        """Recompute this entry's hashes and chunks (:func:`journal_app.chain_check.check_entry`).

        Not ``check``: that name is Django's system-check class method on every model.

        Args:
            expected_parent: the previous entry's ``entry_hash`` (``""`` for seq 1) to check
                the chain link against, or ``None`` to skip it.

        Returns:
            Problems naming each field that does not match; empty when all match.
        """
        chunks = [StoredChunk(c.position, c.offset, c.length, c.hash) for c in self.chunks.all()]
        return check_entry(
            self,
            scope=self.journal.scope_fields(),
            chunks=chunks,
            expected_parent=expected_parent,
            chunk_bytes=self.journal.chunk_bytes,
        )


class EntryIdentifiers(AppendOnlyModel):
    """The identifiers of one entry (paths, URLs, hashes, commands, ...), extracted once.

    Derived from the entry's immutable bytes by :func:`journal_app.identifiers.identifiers_of`
    (rules version ``rules``), written at append, or once by the first fold that reads an
    entry appended before this table existed; never changed. The per-fold loss report reads
    them instead of scanning the covered text again.
    """

    entry = models.OneToOneField(
        Entry, primary_key=True, on_delete=models.PROTECT, related_name="identifier_row"
    )
    rules = models.PositiveSmallIntegerField()
    values = models.JSONField(default=list, help_text="[[kind, value], ...] in text order")

    def __str__(self) -> str:
        return f"identifiers of entry {self.entry_id}"


class Chunk(AppendOnlyModel):
    """A fixed-size slice of an entry's body: position, byte offset, length, sha256."""

    entry = models.ForeignKey(Entry, on_delete=models.PROTECT, related_name="chunks")
    position = models.PositiveIntegerField()
    offset = models.PositiveBigIntegerField()
    length = models.PositiveIntegerField()
    hash = models.CharField(max_length=64)

    class Meta:
        ordering = ["entry_id", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["entry", "position"], name="chunk_unique_entry_position"
            )
        ]

    def __str__(self) -> str:
        return f"chunk {self.position} of entry {self.entry_id}"


class ApiKey(models.Model):
    """A tenant's API key (docs/design.md sections 1 and 9: keys stored hashed, tenant from the key).

    The secret is shown once, at creation (:func:`journal_app.auth.api_key_create`); only its
    ``sha256`` is stored. ``prefix`` is the visible start of the key (``lk_<8 hex>``), unique,
    used to look the row up and to name the key in lists and logs. A ``reviewer`` key may
    decide P0 retirements; it names the ``user`` the decision is recorded under (that user
    must hold a reviewer or admin membership of the tenant). A revoked key never
    authenticates again.
    """

    class Role(models.TextChoices):
        CLIENT = "client"
        REVIEWER = "reviewer"

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="api_keys")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="api_keys",
        help_text="reviewer keys: the person review decisions are recorded under",
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    key_hash = models.CharField(max_length=64, unique=True, help_text="sha256 hex of the key")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.CLIENT)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["tenant_id", "-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix} ({self.role}, {self.name})"


#: the longest ``JournalCost.usd`` text: a Decimal sum of the default context (28 digits) with
#: its sign, point and exponent fits with room to spare
COST_USD_CHARS = 64


class JournalCost(models.Model):
    """A journal's computed cost under one price table, stored for every process
    (:func:`journal_app.selectors.journal_costs`; README, "Finding cost and failures").

    Derived, never a record: journals are append-only and content-addressed, so a row whose
    ``head_seq`` and ``head_hash`` are the journal's head is the cost of exactly those entries
    under the table whose digest is ``table_key``; a journal that grew is computed again and
    its row overwritten. ``usd`` is the :class:`~decimal.Decimal` sum as text (``str``), so it
    reads back exactly on every database. Deleted with its journal; not exported (an
    imported journal computes its own).
    """

    journal = models.ForeignKey(Journal, on_delete=models.CASCADE, related_name="cost_figures")
    table_key = models.CharField(
        max_length=64, help_text="digest of the price table (journal_app.selectors.costs)"
    )
    head_seq = models.PositiveBigIntegerField(help_text="the journal's head the cost covers")
    head_hash = models.CharField(max_length=64, blank=True)
    usd = models.CharField(
        max_length=COST_USD_CHARS, help_text="USD of the priced calls, Decimal as text"
    )
    priced = models.PositiveBigIntegerField(default=0)
    unpriced = models.PositiveBigIntegerField(default=0)
    computed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["journal", "table_key"], name="journalcost_unique_journal_table"
            )
        ]

    def __str__(self) -> str:
        return f"cost of journal {self.journal_id} at {self.head_seq} ({self.table_key})"
