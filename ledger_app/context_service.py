"""Context for the next model call, from the journal, the ledger and the artifacts (DESIGN.md 6).

``context_build`` is the one function the API and the UI call. It reads the journal as of a
revision, the ledger valid at that revision (:func:`ledger_app.selectors.context_ledger`)
and the artifact receipts of oversized results, runs the pure builder
(:func:`ledger_app.context.build_context`) and returns the three views. When the builder
needs rounds folded it calls :func:`ledger_app.services.ledger_fold` (one fold, up to the
protected tail); on an explicit failure it folds what is foldable (the latest fold is the
checkpoint) and returns the failure state, never a request. A context request never
consolidates: what it leaves out is a view decision listed in its debug trace, and the stored
ledger keeps every fact (issue 15, "a read destroys state"); consolidation runs on the fold
path, when the ledger passes ``LEDGER_CONSOLIDATE_AT_TOKENS``. Artifacts are deduplicated by :func:`journal_app.services.artifact_store` (seed 001:
an agent that reloads an artifact gets the same reference back), and every reference the
model view carries is re-read from the store and re-hashed before the view is returned.

The frontend view filters every text it shows through :mod:`journal_app.privacy`; its check
(:func:`ledger_app.validation.validate_frontend`) uses the same functions, and an item the
check still refuses is withheld, saying so. Default budgets come from settings through
:func:`context_budgets`, the one place the UI and the invariants panel read them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from journal_app.content import content_text
from journal_app.models import Artifact, Entry, Journal
from journal_app.services import artifact_read
from journal_app.tokens import count_tokens, source_label
from ledger_app import selectors
from ledger_app.context import (
    TRACE_CAP,
    ContextBuild,
    ContextInputError,
    bounded_trace,
    build_context,
    capped,
    frontend_view,
)
from ledger_app.mechanical import EntryView, is_pin_source, pin_fact
from ledger_app.models import Fold, FoldInvariants
from ledger_app.pins import pin_shown_text
from ledger_app.services import (
    LedgerError,
    entry_view,
    latest_fold,
    ledger_fold,
)
from ledger_app.validation import (
    ArtifactInfo,
    Expectations,
    Meter,
    ValidationReport,
    memo_findings,
    validate_frontend,
    validate_request,
)

WITHHELD = "[withheld: this item failed the privacy check]"
#: The views a context request can ask for (``POST /sessions/{s}/context`` ``views``).
VIEWS = ("model", "frontend", "debug")


class ContextError(LedgerError):
    """A context request that cannot be served (bad revision, budgets, format); HTTP 422.

    ``field`` names the request field at fault (``"revision"``), when one is.
    """

    status = 422
    code = "invalid_context_request"

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message, field=field or None)


class ValidateRequestInvalid(ContextError):
    """A ``POST /validate`` body of the wrong shape: a missing, unknown or mistyped field
    (HTTP 422, ``validation_error``, ``field`` the path of the first one). A body that is not
    UTF-8 JSON is :class:`journal_app.errors.MalformedBody` (HTTP 400)."""

    code = "validation_error"


@dataclass(frozen=True)
class ContextBudgets:
    """The default budgets of a context build, tokens (DESIGN.md 5.4 and 6).

    Attributes:
        working_budget: what the request should fit in: ``LEDGER_FOLD_THRESHOLD_TOKENS``,
            at most the hard limit.
        hard_limit: the model's context window the request must fit in:
            ``LEDGER_WINDOW_TOKENS``.
        window: ``LEDGER_WINDOW_TOKENS``, the window the ledger's budgets are set against.
        output_reserve: tokens kept for the reply (0 by default).
    """

    working_budget: int
    hard_limit: int
    window: int
    output_reserve: int = 0

    def as_kwargs(self) -> dict[str, int]:
        """``{"working_budget", "hard_limit", "output_reserve"}`` for :func:`context_build`."""
        return {
            "working_budget": self.working_budget,
            "hard_limit": self.hard_limit,
            "output_reserve": self.output_reserve,
        }


def context_budgets() -> ContextBudgets:
    """The default budgets every reader of the context uses (the UI's context page, the fold
    invariants panel, :func:`context_preview`), from settings, never literals in a view.

    Returns:
        :class:`ContextBudgets`: ``LEDGER_WINDOW_TOKENS`` (default 270,000) as window and hard
        limit, ``LEDGER_FOLD_THRESHOLD_TOKENS`` (default 32,000) as working budget.
    """
    window = settings.LEDGER_WINDOW_TOKENS
    return ContextBudgets(
        working_budget=min(settings.LEDGER_FOLD_THRESHOLD_TOKENS, window),
        hard_limit=window,
        window=window,
    )


@dataclass
class ContextResult:
    """The three views of one state, separate objects (seed 001), and what happened.

    Attributes:
        status: ``"ok"`` or ``"failed"`` (explicit failure: ``model_view`` is ``None``).
        revision: the journal revision the views are as of.
        model_view: the request to send (OpenAI or Anthropic shape), or ``None``.
        frontend_view: the user-safe history (``None`` when it was not asked for).
        debug_trace: the final request and each compaction decision (reason, token effect).
        failure: the failure state (reason, problems, figures, checkpoint) or ``None``.
        validation: ``{"model": report, "frontend": report}`` as dicts (``"frontend"`` only
            when the frontend view was built).
    """

    status: str
    revision: int
    model_view: dict[str, Any] | None
    frontend_view: dict[str, Any] | None
    debug_trace: dict[str, Any]
    failure: dict[str, Any] | None
    validation: dict[str, Any]

    def to_dict(
        self,
        views: tuple[str, ...] = VIEWS,
        cap: int | None = TRACE_CAP,
        frontend_window: tuple[int | None, int] | None = None,
    ) -> dict[str, Any]:
        """JSON-ready; each view is a deep copy, included only when named in ``views``.

        ``frontend_window`` ``(offset, limit)``: the frontend view's ``items`` cut to
        ``limit`` items from ``offset`` (``None``: the last ``limit``, what a chat shows
        first), with ``items_total`` and ``items_offset`` added, so the view's size does not
        grow with the session (issue 13); ``None``: every item (the UI pages them itself).

        With ``cap`` (the API's default, :data:`ledger_app.context.TRACE_CAP`) the debug trace
        is bounded (:func:`ledger_app.context.bounded_trace`: summaries, counts, lists cut
        with a count of what was left out) and so are the problem lists of the failure and
        the validation reports (``problems_left_out`` says how many were cut): the response's
        size does not grow with the session beyond the views asked for (issue 13).
        ``cap=None``: everything.
        """
        trace = self.debug_trace
        failure = self.failure
        validation = self.validation
        if cap is not None:
            trace = bounded_trace(trace, cap)
            failure = _cap_problems(failure, cap)
            validation = {k: _cap_problems(v, cap) for k, v in validation.items()}
        return {
            "status": self.status,
            "revision": self.revision,
            "model_view": copy.deepcopy(self.model_view) if "model" in views else None,
            "frontend_view": _windowed(self.frontend_view, frontend_window)
            if "frontend" in views
            else None,
            "debug_trace": copy.deepcopy(trace) if "debug" in views else None,
            "failure": copy.deepcopy(failure),
            "validation": copy.deepcopy(validation),
        }


def _windowed(
    view: dict[str, Any] | None, window: tuple[int | None, int] | None
) -> dict[str, Any] | None:
    """A deep copy of the frontend ``view`` with its items cut to ``window`` (see
    :meth:`ContextResult.to_dict`)."""
    if view is None or window is None:
        return copy.deepcopy(view)
    offset, limit = window
    items = view.get("items") or []
    total = len(items)
    start = max(0, total - limit) if offset is None else min(offset, total)
    out = {k: v for k, v in view.items() if k != "items"}
    out = copy.deepcopy(out)
    out["items"] = copy.deepcopy(items[start : start + limit])
    out["items_total"] = total
    out["items_offset"] = start
    return out


def _cap_problems(report: dict[str, Any] | None, cap: int) -> dict[str, Any] | None:
    """``report`` (a validation report or a failure) with at most ``cap`` problems and
    ``problems_left_out`` (shallow copy; ``None`` stays ``None``)."""
    if not isinstance(report, dict) or not isinstance(report.get("problems"), list):
        return report
    shown, left = capped(report["problems"], cap)
    return {**report, "problems": shown, "problems_left_out": left}


#: the columns of an entry row the builder reads (:func:`_read_entries`)
_ENTRY_COLUMNS = (
    "seq", "entry_hash", "kind", "role", "body", "tool_call_id", "tool_name", "derived",
    "is_error", "meta", "token_count", "token_source", "artifact_id",
)  # fmt: skip


def _read_entries(
    journal: Journal, revision: int
) -> tuple[list[EntryView], dict[str, int], dict[str, Mapping[str, Any]]]:
    """The journal's entries up to ``revision`` as builder views, in seq order, read as plain
    column tuples (no model instance per row; each body and meta parsed once), with the
    stored token count of each entry counted by the configured encoding
    (``{entry hash: tokens}``) and the artifact receipt of each entry that references one
    (``{entry hash: Artifact.receipt()}``, one query for all of them).

    The same views :func:`ledger_app.services.entry_view` makes from a row (the journal's own
    chunk size). Two queries however long the journal (tested:
    ``tests/ledger_app/test_context_reads.py``)."""
    label = source_label(settings.TOKEN_ENCODING)
    chunk_bytes = journal.chunk_bytes
    views: list[EntryView] = []
    stored: dict[str, int] = {}
    artifact_of: dict[int, list[str]] = {}
    loads = json.loads
    rows = (
        Entry.objects.filter(journal=journal, seq__lte=revision)
        .order_by("seq")
        .values_list(*_ENTRY_COLUMNS)
    )
    for (
        seq, entry_hash, kind, role, body, call_id, tool, derived, is_error, meta, tokens,
        source, artifact_id,
    ) in rows:  # fmt: skip
        content = loads(body)
        views.append(
            EntryView(
                seq=seq,
                entry_hash=entry_hash,
                kind=kind,
                role=role,
                text=content_text(kind, content),
                content=content,
                tool_call_id=call_id,
                tool_name=tool,
                derived=derived,
                is_error=is_error,
                meta=loads(meta) if meta != "{}" else {},
                chunk_bytes=chunk_bytes,
            )
        )
        if source == label:
            stored[entry_hash] = tokens
        if artifact_id is not None:
            artifact_of.setdefault(artifact_id, []).append(entry_hash)
    receipts: dict[str, Mapping[str, Any]] = {}
    if artifact_of:
        for artifact in Artifact.objects.filter(pk__in=artifact_of).select_related("tenant"):
            receipt = artifact.receipt()
            for entry_hash in artifact_of[artifact.pk]:
                receipts[entry_hash] = receipt
    return views, stored, receipts


def _fold_at(journal: Journal, revision: int) -> Fold | None:
    """The latest fold whose ledger holds only evidence at or before ``revision``.

    Walks the folds' numbers and ranges only (not their deltas, states and manifests), then
    reads the chosen fold whole: two queries."""
    chosen = None
    folds = Fold.objects.filter(journal=journal).order_by("number")
    for pk, kind, seq_end, fold_revision in folds.values_list("pk", "kind", "seq_end", "revision"):
        if kind == Fold.Kind.FOLD:
            if seq_end is None or seq_end > revision:
                break
        elif fold_revision > revision:
            break
        chosen = pk
    return None if chosen is None else Fold.objects.get(pk=chosen)


def _covered(journal: Journal, fold: Fold | None) -> int:
    if fold is None:
        return 0
    last = (
        Fold.objects.filter(journal=journal, kind=Fold.Kind.FOLD, number__lte=fold.number)
        .order_by("-number")
        .values_list("seq_end", flat=True)
        .first()
    )
    return last or 0


class _Artifacts:
    """``reference -> ArtifactInfo``: the store re-read and re-hashed, once per reference."""

    def __init__(self, journal: Journal) -> None:
        self.tenant = journal.session.tenant
        self.seen: dict[str, ArtifactInfo | None] = {}

    def __call__(self, reference: str) -> ArtifactInfo | None:
        if reference not in self.seen:
            self.seen[reference] = self._lookup(reference)
        return self.seen[reference]

    def _lookup(self, reference: str) -> ArtifactInfo | None:
        prefix = f"artifact://{self.tenant.slug}/"
        if not reference.startswith(prefix):
            return None  # another tenant's reference never resolves here
        artifact = Artifact.objects.filter(
            tenant=self.tenant, content_hash=reference[len(prefix) :]
        ).first()
        if artifact is None:
            return None
        try:
            _, ok = artifact_read(artifact=artifact)
        except OSError:
            ok = False
        return ArtifactInfo(artifact.content_hash, ok)


#: Keys of a session's source-level fields that hold its own end status (SWE-agent and
#: mini-swe-agent ``info.exit_status``; others at the top level).
END_STATUS_KEYS = ("exit_status",)


def end_status(journal: Journal) -> str:
    """The source's own end status of the run (DESIGN.md 6, end states): ``exit_status`` of
    ``info`` (SWE-agent, mini-swe-agent) or of the session's metadata, with the length of a
    ``submission`` when there is one; ``""`` when the source recorded none (or the metadata
    is not a JSON object)."""
    try:
        meta = json.loads(journal.session.meta or "{}")
    except ValueError:
        return ""
    if not isinstance(meta, dict):
        return ""
    for holder in (meta.get("info"), meta):
        if not isinstance(holder, dict):
            continue
        for key in END_STATUS_KEYS:
            value = holder.get(key)
            if isinstance(value, str) and value.strip():
                said = f"{key} {value.strip()[:80]}"
                submission = holder.get("submission")
                if isinstance(submission, str) and submission.strip():
                    said += f" (a submission of {len(submission)} characters)"
                return said
    return ""


def _meter() -> Meter:
    encoding = settings.TOKEN_ENCODING
    return Meter(count=lambda text: count_tokens(text, encoding), label=source_label(encoding))


def _checkpoint(journal: Journal, revision: int, may_fold: bool) -> dict[str, Any]:
    """Fold what is foldable; the latest fold is the checkpoint (DESIGN.md 6, step 7).

    Never consolidates (issue 15): a failed request at a small budget must not evict P2/P3
    facts from the stored ledger; consolidation belongs to the fold path and its 67,500-token
    start."""
    if not may_fold:
        return {
            "fold": None,
            "reason": "no checkpoint: the ledger has moved past this revision (or read-only)",
        }
    folded = None
    try:
        folded = ledger_fold(journal=journal, upto=revision)
    except LedgerError as exc:
        return {"fold": None, "reason": f"no checkpoint: the fold was refused: {exc}"}
    fold = latest_fold(journal)
    created = bool(folded and folded.created)
    if fold is None:
        reason = "no checkpoint: nothing could be folded"
    else:
        reason = (
            f"fold {fold.number} {'written' if created else 'stands'} as the checkpoint; "
            "nothing consolidated or evicted (a context request only reads the ledger)"
        )
    return {
        "fold": fold.number if fold is not None else None,
        "kind": fold.kind if fold is not None else None,
        "outcome": fold.outcome if fold is not None else None,
        "consolidated": False,
        "folded": created,
        "reason": reason,
    }


def context_build(
    *,
    journal: Journal,
    revision: int | None = None,
    working_budget: int,
    hard_limit: int,
    tail_tokens: int | None = None,
    target_format: str = "openai",
    output_reserve: int = 0,
    write: bool = True,
    fold: Fold | None = None,
    tools: Any = None,
    views: tuple[str, ...] = VIEWS,
) -> ContextResult:
    """Build the request for the agent's next model call, and its two other views.

    Args:
        journal: the scope.
        revision: the journal head seq to build as of (default: the current head).
        working_budget: tokens the request should fit in.
        hard_limit: the model's window, tokens; the request must fit in
            ``hard_limit - output_reserve``.
        tail_tokens: the protected recent tail, tokens (default: a quarter of the budget).
        target_format: ``"openai"`` (Chat Completions) or ``"anthropic"`` (Messages).
        output_reserve: tokens kept for the reply (case 14).
        write: when ``False`` nothing is written: no fold, no checkpoint (UI previews, the
            fold page's invariants panel).
        fold: build with the ledger as of this fold (default: the latest valid at revision).
        tools: the ``tools`` (schema) input the runtime sends with the request; counted
            against the budget.
        views: the views wanted (:data:`VIEWS`); the frontend view and its check are built
            only when ``"frontend"`` is named (they read and scan every entry of the session:
            a caller that needs only the request does not pay for them). The model view and
            the debug trace are one build and always made.

    Returns:
        :class:`ContextResult`. Idempotent in effect: a second call at the same revision finds
        the rounds already folded and the same checkpoint.

    Raises:
        ContextError: a revision beyond the head or below 0; budgets or format the builder
            refuses (the message names the field).
    """
    journal = Journal.objects.select_related("session__tenant").get(pk=journal.pk)
    head = journal.head_seq
    rev = head if revision is None else revision
    if rev < 0 or rev > head:
        raise ContextError(f"revision {rev} is not between 0 and the head {head}", "revision")
    entry_views, stored, receipts = _read_entries(journal, rev)
    base = fold if fold is not None else _fold_at(journal, rev)
    latest = latest_fold(journal)
    may_fold = (
        write and fold is None and (latest is None or base is not None and base.pk == latest.pk)
    )

    def fold_more(upto: int) -> tuple[Mapping[str, Any], int]:
        if not may_fold:
            raise ContextError("folding is not possible here: read-only, or a later fold exists")
        ledger_fold(journal=journal, upto=min(upto, rev))
        newest = latest_fold(journal)
        return selectors.context_ledger(journal, newest), _covered(journal, newest)

    meter = _meter()
    try:
        build: ContextBuild = build_context(
            entries=entry_views,
            ledger=selectors.context_ledger(journal, base) if base is not None else None,
            covered_upto=_covered(journal, base),
            working_budget=working_budget,
            hard_limit=hard_limit,
            tail_tokens=tail_tokens,
            target_format=target_format,
            output_reserve=output_reserve,
            receipts=receipts,
            resolve_artifact=_Artifacts(journal),
            fold=fold_more if may_fold else None,
            meter=meter,
            revision=rev,
            token_counts=stored,
            tools=tools,
            end_status=end_status(journal),
        )
    except ContextInputError as exc:
        raise ContextError(str(exc), exc.field or "") from exc
    frontend, front_report = (
        _frontend(entry_views, receipts, meter) if "frontend" in views else (None, None)
    )
    trace = build.debug_trace
    failure = build.failure
    if build.status == "failed":
        failure = dict(failure or {})
        failure["checkpoint"] = _checkpoint(journal, rev, may_fold)
        trace["decisions"].append(
            {
                "step": 7,
                "action": "checkpoint",
                "reason": failure["checkpoint"]["reason"],
                "tokens_before": 0,
                "tokens_after": 0,
                "effect": 0,
                "fold": failure["checkpoint"]["fold"],
            }
        )
    trace["ledger"]["fold"] = base.number if base is not None else None
    validation = {"model": build.report.to_dict()}
    if front_report is not None:
        validation["frontend"] = front_report.to_dict()
    return ContextResult(
        status=build.status,
        revision=rev,
        model_view=build.model_view,
        frontend_view=frontend,
        debug_trace=trace,
        failure=failure,
        validation=validation,
    )


def _frontend(
    views: list[Any], receipts: Mapping[str, Mapping[str, Any]], meter: Meter
) -> tuple[dict[str, Any], ValidationReport]:
    """The frontend view and its check; an item the check still refuses is withheld (the
    module docstring). Each text is scanned for secrets and reasoning once
    (:func:`ledger_app.validation.memo_findings` shared by the filter and the check)."""
    find = memo_findings()
    frontend = frontend_view(views, receipts=receipts, count=meter.count, findings=find)
    reasoning = [v.text for v in views if v.kind == "reasoning"]
    entry_of = {v.seq: v.entry_hash for v in views}
    front_report = validate_frontend(
        frontend, reasoning=reasoning, entry_of=entry_of, findings=find
    )
    if not front_report.ok:
        # a last guard: an item the privacy filter let through but the check refuses is withheld
        bad: dict[int, list[str]] = {}
        for p in front_report.problems:
            if p.index is not None and f"withheld: {p.check}" not in bad.setdefault(p.index, []):
                bad[p.index].append(f"withheld: {p.check}")
        for i, labels in bad.items():
            item = frontend["items"][i]
            frontend["items"][i] = {
                "seq": item.get("seq"),
                "role": item.get("role"),
                "kind": item.get("kind"),
                "text": WITHHELD,
                "filtered": True,
                "labels": labels,
            }
        first = front_report
        front_report = validate_frontend(
            frontend, reasoning=reasoning, entry_of=entry_of, findings=find
        )
        front_report.checks.append(f"withheld {len(bad)} items ({len(first.problems)} problems)")
    return frontend, front_report


def session_pins(*, journal: Journal, revision: int | None = None) -> list[tuple[str, str, str]]:
    """The pins a request for this scope must carry byte for byte, as of ``revision``
    (default the head): every authoritative message of the journal (DESIGN.md 5.2) as a
    context shows it (:func:`ledger_app.pins.pin_shown_text`: attachments as receipts), less
    the pins the ledger valid at that revision has retired, superseded or closed (a done
    request is one line).

    Returns:
        ``[(pin id, entry hex, text)]`` in journal order (:class:`Expectations` ``pins``).

    Raises:
        ContextError: ``revision`` beyond the head or below 0 (field ``revision``).
    """
    head = journal.head_seq
    rev = head if revision is None else revision
    if rev < 0 or rev > head:
        raise ContextError(f"revision {rev} is not between 0 and the head {head}", "revision")
    base = _fold_at(journal, rev)
    ledger = selectors.context_ledger(journal, base) if base is not None else {"facts": {}}
    pins = {
        f["support"][0]["entry"]: f
        for f in ledger["facts"].values()
        if f.get("pin") and f.get("support")
    }
    rows = Entry.objects.filter(journal=journal, seq__lte=rev, kind="message").order_by("seq")
    out = []
    for row in rows:
        view = entry_view(row)
        if not is_pin_source(view):
            continue
        fact = pins.get(view.entry_hash) or pin_fact(view)
        if fact.get("lifecycle", "active") != "active":
            continue  # retired, superseded, or a done request (shown as one line)
        out.append((pin_fact(view)["id"], view.entry_hash, pin_shown_text(fact)))
    return out


def request_validate(
    *,
    request: Any,
    fmt: str | None = None,
    working_budget: int | None = None,
    hard_limit: int | None = None,
    output_reserve: int = 0,
    check_secrets: bool = False,
    tools: Any = None,
    journal: Journal | None = None,
    revision: int | None = None,
) -> ValidationReport:
    """Check a request a runtime is about to send (``POST /validate``).

    Args:
        request: ``{"messages", "system"?}`` (either format).
        fmt: ``"openai"``, ``"anthropic"`` or ``None`` (detected).
        working_budget / hard_limit / output_reserve: tokens; see
            :func:`ledger_app.validation.validate_request`.
        check_secrets: also look for secrets.
        tools: the ``tools`` (schema) input sent with it: counted against the budgets.
        journal / revision: with a scope, every pin the session requires
            (:func:`session_pins`) must be present verbatim (``pin_verbatim``), and every
            ``artifact://`` reference must resolve in the scope's store with its hash.

    Returns:
        :class:`ValidationReport` (view ``"request"``).

    Raises:
        ValidateRequestInvalid: an output reserve not below the hard limit (field
            ``output_reserve``), as a context request refuses it (issue 15).
        ContextError: a revision outside the journal.
    """
    if hard_limit is not None and output_reserve >= hard_limit:
        raise ValidateRequestInvalid(
            f"output_reserve: {output_reserve} leaves no room in the hard limit {hard_limit}",
            "output_reserve",
        )
    expect = None
    resolve = None
    if journal is not None:
        journal = Journal.objects.select_related("session__tenant").get(pk=journal.pk)
        expect = Expectations(pins=session_pins(journal=journal, revision=revision))
        resolve = _Artifacts(journal)
    return validate_request(
        request,
        fmt=fmt,
        working_budget=working_budget,
        hard_limit=hard_limit,
        output_reserve=output_reserve,
        meter=_meter(),
        expect=expect,
        resolve_artifact=resolve,
        check_secrets=check_secrets,
        view="request",
        tools=tools,
    )


def context_preview(
    *, journal: Journal, revision: int | None = None, fold: Fold | None = None, **budgets: Any
) -> ContextResult:
    """:func:`context_build` without writing anything (no fold, no checkpoint), for the UI.

    Budgets not given default to :func:`context_budgets` (a working budget given alone is
    checked against the default hard limit; a hard limit given alone caps the working budget).
    """
    default = context_budgets()
    budgets.setdefault("hard_limit", default.hard_limit)
    budgets.setdefault("working_budget", min(default.working_budget, budgets["hard_limit"]))
    return context_build(journal=journal, revision=revision, fold=fold, write=False, **budgets)


def fold_invariants(*, fold: Fold, recompute: bool = False) -> dict[str, Any]:
    """The invariants panel of one fold: the context as of the fold, validated (read-only).

    A property of the fold (issue 13): computed once at the default budgets
    (:func:`context_budgets`) and stored with the fold (:class:`ledger_app.models.FoldInvariants`),
    then read; a fold without one (older than the table, or never shown) gets it computed and
    saved on its first read. A change of the default budgets, or ``recompute``, computes it
    again. Two readers racing on a fold both compute; the second write wins with the same
    value (the panel is deterministic: the journal is append-only and the fold immutable).

    Returns:
        ``{"status", "revision", "model": report, "frontend": report, "failure",
        "stored": bool}`` (``stored``: read from the fold's row, not computed now).
    """
    budgets = context_budgets()
    key = budgets.as_kwargs()
    stored = FoldInvariants.objects.filter(fold=fold).first()
    if stored is not None and stored.budgets == key and not recompute:
        return {**stored.panel, "stored": True}
    result = context_preview(journal=fold.journal, revision=fold.revision, fold=fold, **key)
    panel = {
        "status": result.status,
        "revision": result.revision,
        "model": result.validation["model"],
        "frontend": result.validation["frontend"],
        "failure": result.failure,
    }
    FoldInvariants.objects.update_or_create(fold=fold, defaults={"budgets": key, "panel": panel})
    return {**panel, "stored": False}
