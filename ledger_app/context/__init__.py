"""The request for the next model call, built in a controlled order (docs/design.md section 6, seed 001).

Pure package: no Django, no database. Input: the journal's entries as plain views
(:class:`ledger_app.entry_view.EntryView`, as of one revision), the ledger state with the
last seq its folds cover, the artifact receipts of oversized tool results, budgets in tokens
and a target format (``"openai"``: Chat Completions messages; ``"anthropic"``: Messages).

What the request holds, in order:

1. the pins: every authoritative system, developer and user message, in journal order (a
   system message stays the first message, case 08; Anthropic puts system and developer text
   in ``system``), shown as :func:`ledger_app.pins.pin_shown_text` says (governing text
   verbatim, attachments as receipts). They are never folded, shrunk or redacted. A request
   the ledger closed is one line ("done at seq N: first line ..., evidence sha256:..."), never
   the current goal (docs/design.md 5.2). Harness records (:func:`journal_app.harness.harness_kind`)
   are left out, the latest of each kind kept, and counted in the trace;
2. a ledger checkpoint message (only when rounds were folded out of the verbatim part),
   opening with the continuation record (:mod:`.continuation`, docs/design.md 6), then the other
   facts about the folded rounds, rendered by :func:`ledger_app.budget.render_fact` with
   their support hashes so the model can ask for the source;
3. the kept API rounds verbatim (oversized results as artifact receipts, old results shrunk
   when the budget needed it), ending with the protected recent tail;
4. a task state message when there is active task state: calls that did not complete,
   results that report an interruption, pending approvals, the latest plan/todo list and
   the ledger's open obligations.

The order of compaction (seed 001, "Compress in a controlled order"), each step only while
the request is still over the working budget:

1. protect the pins, the active task state and the recent tail of complete API rounds
   (``tail_tokens``; at least the last complete round). An interrupted tail round (a call
   with no result) is never presented as history: the context ends with the last complete
   round and the interrupted calls are stated in the task state (docs/design.md section 4);
2. project oversized tool results into their artifact receipts, oldest first, outside the
   tail, then inside it;
3. shrink old, already-consumed tool results (a result the model has answered after) to a
   deterministic head/errors/tail excerpt that says how much was cut and names the entry,
   in the rounds still shown (a round left out and brought back by step 6 is shrunk then);
4. fold the oldest complete API rounds into the ledger: a round leaves the verbatim part only
   when a fold covers it; when none does yet, the ``fold`` callback is asked (once) to fold up
   to the tail. A whole round leaves or stays, never part of it (parallel calls together).
   Before shrinking (3), every round the last fold covers leaves, except the fold's own
   recent window (:func:`.compaction.fold_cut`), and the fold is asked when that is not
   enough: what precedes the tail (pins, then the checkpoint with its continuation record)
   is then a function of the fold, the same from call to call until the next one lands,
   which keeps provider prompt caches warm (docs/design.md 6);
5. rebuild and validate (:func:`ledger_app.validation.validate_request`);
6. when validation fails on a budget or an artifact: one controlled recovery compaction
   (the tail shrinks to the last complete round, every tool result may be shrunk, a broken
   receipt falls back to the journal's own text) and validate again;
7. still failing: an explicit failure state, no request (never the same oversized request
   again). The service writes the checkpoint.

Three views, built separately (seed 001, "Keep model context separate from frontend
history"): :func:`build_context` returns the model view and the debug trace (the final
request, each decision with its reason and token effect); :func:`frontend_view` builds the
user-safe history from the entries on its own.

Modules, one reason to change each:

* :mod:`.inputs`: target formats, the fold and artifact callbacks, input errors.
* :mod:`.entry_text`: an entry's short hash name and a call's argument text.
* :mod:`.task_state`: the current goal, interrupted calls, pending approvals, the plan, and
  the task state message.
* :mod:`.assembly`: the request's parts and their assembly as OpenAI Chat Completions or
  Anthropic Messages.
* :mod:`.projection`: artifact receipts and the shrinking of tool results.
* :mod:`.continuation`: the continuation record at the head of the checkpoint.
* :mod:`.checkpoint`: the ledger checkpoint message.
* :mod:`.build_state`: the state of one build (rounds, how each is shown, costs, decisions).
* :mod:`.compaction`: the compaction steps (project, shrink, fold, recovery compaction).
* :mod:`.final_request`: the request assembled from the plan, the last pass and its
  validation (step 5).
* :mod:`.calibration`: the provider's reported usage calibrating the plan.
* :mod:`.build`: :func:`build_context`, the steps in order.
* :mod:`.trace`: the debug trace bounded for the API (:func:`bounded_trace`).
* :mod:`.frontend`: :func:`frontend_view`, filtered by :mod:`journal_app.privacy`.
"""

from __future__ import annotations

from ledger_app.context.assembly import CONTINUED, EMPTY_OUTPUT, Assembled, Part, assemble
from ledger_app.context.build import TAIL_SHARE, ContextBuild, build_context, tail_budget
from ledger_app.context.build_state import budget_limit
from ledger_app.context.calibration import provider_usage
from ledger_app.context.checkpoint import CHECKPOINT_MARK, OMITTED
from ledger_app.context.final_request import FILL_MARGIN
from ledger_app.context.frontend import frontend_view
from ledger_app.context.inputs import TARGETS, ArtifactResolver, ContextInputError, FoldCallback
from ledger_app.context.projection import excerpt, shrink_text
from ledger_app.context.task_state import (
    ARGS_CHARS,
    MAX_INTERRUPTIONS,
    current_goal,
    interruption_of,
    pending_approvals,
)
from ledger_app.context.trace import TRACE_CAP, bounded_trace, capped

__all__ = [
    "ARGS_CHARS",
    "CHECKPOINT_MARK",
    "CONTINUED",
    "EMPTY_OUTPUT",
    "FILL_MARGIN",
    "MAX_INTERRUPTIONS",
    "OMITTED",
    "TAIL_SHARE",
    "budget_limit",
    "tail_budget",
    "TARGETS",
    "TRACE_CAP",
    "ArtifactResolver",
    "Assembled",
    "ContextBuild",
    "ContextInputError",
    "FoldCallback",
    "Part",
    "assemble",
    "bounded_trace",
    "build_context",
    "capped",
    "current_goal",
    "excerpt",
    "frontend_view",
    "interruption_of",
    "pending_approvals",
    "provider_usage",
    "shrink_text",
]
