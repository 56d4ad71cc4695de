"""Ledger rows: folds with their delta and manifest, checkpoints, fact rows (docs/design.md 5.2).

A fold is written once: its delta (the ops with the reducer's verdicts), the manifest, the
state hash after it and the accumulator that hash is built from. The full state
is stored only at *checkpoints* (``Fold.state`` set): every so many folds, once the deltas
since the last checkpoint outgrow it, and at consolidations. The state after any fold is the
nearest checkpoint at or before it plus the later deltas, through the pure reducer
(:meth:`FoldQuerySet.state_after`); ``verify_ledger`` recomputes every ``state_hash``.

The facts are also kept as rows (:class:`LedgerFact`, one row per version of a fact), so a
page, the API or the context builder reads the facts it needs with SQL, and the
:class:`LedgerTerm` index lets a fold's loss report compare without reading the ledger.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models.functions import Substr

from journal_app.models import Journal
from ledger_app import reducer
from ledger_app.ops_refs import op_item, ops_resolve


class RetirementRequest(models.Model):
    """A P0 retirement awaiting a reviewer (docs/design.md section 5.2, "review queue").

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

    @property
    def shown_fact_text(self) -> str:
        """``fact_text`` as the review pages and the API show it: secrets filtered by the one
        detector (:mod:`journal_app.privacy`); a P0 pin holds its message verbatim, and
        ``fact_text`` stays so (README, "Tenants, users, export")."""
        from journal_app.privacy import filter_text

        return filter_text(self.fact_text).text


class FoldQuerySet(models.QuerySet):
    """Fold queries that rebuild states (checkpoint plus later deltas)."""

    def state_after(self, fold: Fold) -> dict[str, Any]:
        """The ledger state after ``fold``: the nearest checkpoint at or before it plus the
        deltas after it, applied by :func:`ledger_app.reducer.reduce` (docs/design.md 5.2).

        Two queries: the checkpoint's state, then the deltas of the folds after it up to
        ``fold``. Returns a new dict (the caller may change it).
        """
        checkpoint = (
            self.model.objects.filter(
                journal_id=fold.journal_id, number__lte=fold.number, state__isnull=False
            )
            .order_by("-number")
            .values_list("number", "state")
            .first()
        )
        start, base = (checkpoint[0], json.loads(checkpoint[1])) if checkpoint else (0, None)
        deltas = []
        for raw in (
            self.model.objects.filter(
                journal_id=fold.journal_id, number__gt=start, number__lte=fold.number
            )
            .order_by("number")
            .values_list("delta", flat=True)
        ):
            delta = json.loads(raw)
            delta.pop("verdicts", None)
            deltas.append(delta)
        return reducer.reduce(base, deltas) if deltas else (base or reducer.reduce(None, []))


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
    state = models.TextField(  # noqa: DJ001 (null: not a checkpoint; "" is no state)
        null=True,
        blank=True,
        help_text="canonical JSON of the ledger state after this fold: checkpoints only",
    )
    state_hash = models.CharField(max_length=64)
    state_acc = models.TextField(
        help_text="the state's fact accumulator (ledger_app.reducer.acc_hex) after this fold"
    )
    facts_added = models.PositiveIntegerField(default=0)
    ops_rejected = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    record_hash = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text="sha256 of everything this fold stores, chained to the previous fold's "
        "(ledger_app.services.records)",
    )

    objects = FoldQuerySet.as_manager()

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
    def is_checkpoint(self) -> bool:
        """Whether this fold stores the full state (``state`` is loaded and set)."""
        return self.state is not None

    @property
    def state_dict(self) -> dict[str, Any]:
        """The state after this fold, rebuilt (:meth:`FoldQuerySet.state_after`: two
        queries and a replay). Pages and the API read :class:`LedgerFact` rows instead."""
        return Fold.objects.state_after(self)


#: characters of ``LedgerFact.command_key`` in its index (up to 4 bytes each in UTF-8:
#: 2,400 bytes, under PostgreSQL's btree row limit of 2,704)
COMMAND_KEY_INDEXED = 600


class LedgerFact(models.Model):
    """One version of one fact of a journal's ledger: valid from fold ``since`` until fold
    ``until`` (exclusive; ``None``: still the current version). Issue 18.

    Written by the storage step of every fold, with the fold: a fact born in fold ``a``
    gets a row ``since=a``; changed in fold ``b`` (superseded, retirement pending, reviewed,
    retired, closed, cancelled, withdrawn), that row gets ``until=b`` and a new row
    ``since=b`` records the new version and ``change``; evicted in fold ``c``, its last row
    gets ``until=c`` and no successor. So the rows are both the current facts (``until``
    null) and each fact's lifecycle history, and the facts after fold ``n`` are the rows
    with ``since <= n < until``. ``data`` is the fact exactly as the reducer produced it
    (canonical JSON); the other columns are copies for filtering and ordering in SQL.
    """

    journal = models.ForeignKey(Journal, on_delete=models.PROTECT, related_name="ledger_facts")
    fact_id = models.TextField()
    since = models.PositiveIntegerField(help_text="fold number this version starts at")
    until = models.PositiveIntegerField(
        null=True, blank=True, help_text="fold number that replaced or evicted it"
    )
    change = models.CharField(
        max_length=16, help_text="born, or the new lifecycle, or 'changed' (review, pending)"
    )
    category = models.CharField(max_length=24)
    priority = models.CharField(max_length=4)
    lifecycle = models.CharField(max_length=16)
    confidence = models.CharField(max_length=16)
    pin = models.BooleanField(default=False)
    pin_entry = models.CharField(max_length=64, blank=True, help_text="the pin's entry (hex)")
    origin_fold = models.PositiveIntegerField(null=True, blank=True)
    command_key = models.TextField(blank=True, help_text="the offline writer's command key")
    text = models.TextField()
    data = models.TextField(help_text="canonical JSON of the fact")
    tokens = models.PositiveIntegerField(default=0, help_text="tokens of the fact's text")

    class Meta:
        ordering = ["journal_id", "fact_id", "since"]
        constraints = [
            models.UniqueConstraint(
                fields=["journal", "fact_id", "since"], name="ledgerfact_unique_version"
            )
        ]
        indexes = [
            models.Index(fields=["journal", "until", "priority", "fact_id"], name="ledgerfact_now"),
            models.Index(fields=["journal", "since"], name="ledgerfact_since"),
            # pins only (the others' pin_entry is ""): the state's pin lookups filter pin=True
            models.Index(
                fields=["journal", "pin_entry"],
                name="ledgerfact_pin_entry",
                condition=models.Q(pin=True),
            ),
            # the writer state's lookups by command key (a fold reads a few rows):
            # every version (the current one is picked after reading, see
            # ledger_app.services.state._current_of); a key can be a long command, so the
            # index holds its first COMMAND_KEY_INDEXED characters (a btree row must stay
            # under PostgreSQL's 2,704 bytes)
            models.Index(
                models.F("journal"),
                Substr("command_key", 1, COMMAND_KEY_INDEXED),
                name="ledgerfact_command",
            ),
            # the current pins (writer state, the fold's rotating pin check)
            models.Index(
                fields=["journal", "lifecycle"],
                name="ledgerfact_now_pins",
                condition=models.Q(until__isnull=True, pin=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.fact_id} v{self.since} of {self.journal_id}"

    @property
    def fact(self) -> dict[str, Any]:
        return json.loads(self.data)


class LedgerTerm(models.Model):
    """How many active facts of a journal's ledger hold an identifier (the loss index).

    ``term`` is :func:`ledger_app.services.store.term_id` of :func:`ledger_app.loss.term_key`
    of the identifier: the first 8 bytes of its sha256 as a signed 64-bit integer (the
    64-character hex it replaced made each row and index entry three times wider).
    Maintained by the storage step of every fold (a fact that becomes active adds one per
    term of its rendered text, one that stops being active or changes removes its old
    terms), so the loss report of a fold compares its identifiers with one indexed query. A
    term whose count reaches 0 loses its row (an absent term counts 0).
    """

    # no index of its own: ledgerterm_unique leads with it
    journal = models.ForeignKey(
        Journal, on_delete=models.PROTECT, related_name="ledger_terms", db_index=False
    )
    term = models.BigIntegerField()
    facts = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["journal", "term"], name="ledgerterm_unique")
        ]

    def __str__(self) -> str:
        return f"{self.term & 0xFFFFFFFFFFFFFFFF:016x} x{self.facts}"


class TaskRun(models.Model):
    """One execution of a ledger task, whatever its outcome (docs/design.md section 9).

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
        LOST = "lost"  # its worker died before it finished (ledger_app.runs.task_runs_mark_lost)

    task_name = models.CharField(max_length=200)
    journal = models.ForeignKey(
        Journal, null=True, blank=True, on_delete=models.PROTECT, related_name="task_runs"
    )
    task_id = models.CharField(max_length=255, blank=True, db_index=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    attempt = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=255, blank=True, help_text="Celery node name")
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
    """One run of a writer over one range of a journal (docs/design.md 5.3), whatever came of it.

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

    Stored once: where those ops are a run of the fold's own delta ops (the usual case: the
    delta is the pins plus them), ``ops_from``/``ops_count`` name that run and
    ``stored_ops`` is ``[]``; otherwise (a failed attempt, a round whose ops did not stand
    as they were) ``stored_ops`` holds them and ``ops_from`` is ``None``. Read them as
    :attr:`ops` (the same list either way; see :mod:`ledger_app.ops_refs`).
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
    stored_ops = models.JSONField(
        default=list, db_column="ops", help_text="the ops, unless ops_from refers to the delta's"
    )
    ops_from = models.PositiveIntegerField(
        null=True, blank=True, help_text="index of the first of these ops in the fold's delta"
    )
    ops_count = models.PositiveIntegerField(default=0, help_text="ops referred to (ops_from)")

    class Meta:
        ordering = ["attempt_id", "round"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "round"], name="proposal_unique_round")
        ]

    def __str__(self) -> str:
        return f"{self.kind} (round {self.round}) of {self.attempt}"

    @property
    def ops(self) -> list[Any]:
        """The ops that stood in this round, as written: ``stored_ops``, or the run of the
        fold's delta ops that ``ops_from``/``ops_count`` name (the delta read once per
        instance, one query, unless :meth:`delta_ops_set` gave it)."""
        if self.ops_from is None:
            return self.stored_ops
        ops = self.__dict__.get("_delta_ops")
        if ops is None:
            delta = (
                Fold.objects.filter(attempts__id=self.attempt_id)
                .values_list("delta", flat=True)
                .first()
            )
            ops = json.loads(delta).get("ops", []) if delta else []
            self.__dict__["_delta_ops"] = ops
        return ops_resolve(self.stored_ops, self.ops_from, self.ops_count, ops)

    @ops.setter
    def ops(self, value: list[Any]) -> None:
        """Store ``value`` as a copy (a writer referring to the delta sets ``ops_from``)."""
        self.stored_ops = value
        self.ops_from = None
        self.ops_count = 0

    def delta_ops_set(self, ops: list[Any]) -> None:
        """Give this proposal its fold's delta ops (parsed), so :attr:`ops` reads no row."""
        self.__dict__["_delta_ops"] = ops


class Verdict(models.Model):
    """One judge's two verdicts on one proposed item (docs/design.md 5.3).

    ``claim`` and ``support`` are read through properties: where they are exactly the text
    and cited entries of one of the proposal's ops (an item that stood), the row stores that
    op's index (``op_at``) and no copy (:class:`ledger_app.ops_refs.ItemRefs`).

    ``judge``: ``verifier`` (the verifier model), ``rules`` (the rubric applied
    mechanically), ``reducer`` (a dry run of the reducer's rules), ``parser`` (the item could
    not be turned into an op: unknown seq, duplicate key). An item stands only when every
    judge accepted it (``item_accepted``).
    """

    proposal = models.ForeignKey(Proposal, on_delete=models.PROTECT, related_name="verdicts")
    key = models.CharField(max_length=100)
    op = models.CharField(max_length=16, blank=True)
    stored_claim = models.TextField(db_column="claim", blank=True)
    stored_support = models.JSONField(
        default=list, db_column="support", help_text="cited entry hashes (hex), unless op_at"
    )
    op_at = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text="the index in the proposal's ops of the op whose text and support these are",
    )
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

    def _item(self) -> tuple[str, list[Any]]:
        ops = self.__dict__.get("_proposal_ops")
        if ops is None:
            ops = self.proposal.ops
            self.__dict__["_proposal_ops"] = ops
        op = ops[self.op_at] if self.op_at is not None and self.op_at < len(ops) else None
        return op_item(op)

    @property
    def claim(self) -> str:
        """The item's claim: ``stored_claim``, or the text of the proposal's op ``op_at``
        (:func:`ledger_app.ops_refs.op_item`; the row then stores ``""``)."""
        return self.stored_claim if self.op_at is None else self._item()[0]

    @claim.setter
    def claim(self, value: str) -> None:
        self._materialise()
        self.stored_claim = value

    @property
    def support(self) -> list[Any]:
        """The cited entry hashes: ``stored_support``, or those of the op ``op_at``."""
        return self.stored_support if self.op_at is None else self._item()[1]

    @support.setter
    def support(self, value: list[Any]) -> None:
        self._materialise()
        self.stored_support = value

    def _materialise(self) -> None:
        """Copy a referred claim and support into the row (before one of them is set)."""
        if self.op_at is not None:
            self.stored_claim, self.stored_support = self._item()
        self.op_at = None

    def proposal_ops_set(self, ops: list[Any]) -> None:
        """Give this verdict its proposal's ops, so :attr:`claim` and :attr:`support` read
        no row."""
        self.__dict__["_proposal_ops"] = ops


class FoldInvariants(models.Model):
    """The invariants panel of one fold, computed once and stored with it (it is a
    property of the fold, not of a page view).

    ``panel`` is :func:`ledger_app.services.context.fold_invariants`'s result (the context as
    of the fold, validated read-only); ``budgets`` the budgets it was computed at (tokens,
    :func:`ledger_app.services.context_records.context_budgets`): a change of the default budgets
    recomputes it on the next read. Written lazily on the first read of a fold's panel.
    """

    fold = models.OneToOneField(
        Fold, on_delete=models.CASCADE, primary_key=True, related_name="invariants"
    )
    budgets = models.JSONField(help_text="budgets computed at, tokens")
    panel = models.JSONField(help_text="status, revision, model and frontend reports, failure")
    computed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"invariants of fold {self.fold_id}: {self.panel.get('status')}"


class StoredCheck(models.Model):
    """The last full check of one journal's ledger, for the pages of every process
    (:func:`ledger_app.services.checks.check_store`; README, "Settings":
    ``LEDGER_CHECK_MAX_AGE_SECONDS``).

    ``state`` is the ledger's revision the check ran at (``[head_seq, head_hash, last fold
    pk]``), ``problems`` its sentences (``[]``: it verified). ``queued_state`` and
    ``queued_at`` are the claim of a queued check: a page queues one only when it moves them
    (a compare-and-set), so two processes never queue the same state twice.
    """

    journal = models.OneToOneField(
        Journal, on_delete=models.CASCADE, primary_key=True, related_name="stored_check"
    )
    state = models.JSONField(null=True, help_text="[head_seq, head_hash, last fold pk] checked")
    problems = models.JSONField(default=list, help_text="sentences; [] when it verified")
    checked_at = models.DateTimeField(null=True)
    queued_state = models.CharField(max_length=200, blank=True)
    queued_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"check of journal {self.journal_id} at {self.state}"
