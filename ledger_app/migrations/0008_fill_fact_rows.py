"""Step 2 of 3 (issue 18): from per-fold full states to deltas, checkpoints and fact rows.

For each journal, its folds are read in order with the full state each one stored, and:

* consecutive states are compared: every fact that appeared or changed in fold N gets a
  ``LedgerFact`` version ``since=N``, and the version it replaced (or an evicted fact's)
  gets ``until=N``; the term index (``LedgerTerm``) counts the identifiers of active facts;
* ``state_hash`` is recomputed with the incremental construction of
  ``ledger_app.reducer`` and ``state_acc`` stored with it;
* the full state is kept only where the checkpoint policy puts a checkpoint (the first
  fold, consolidations, every ``CHECKPOINT_EVERY_FOLDS`` folds, or once the deltas since the
  last checkpoint reach ``CHECKPOINT_DELTA_RATIO`` times its size) and cleared elsewhere.

``verify_ledger`` replays the migrated ledger from scratch and from every checkpoint. The
reverse step writes every fold's full state back with the former hash (sha256 of the
canonical state). Imports only pure code.
"""

import hashlib
import json
from collections import Counter

from django.conf import settings
from django.db import migrations

from journal_app.tokens import count_tokens
from ledger_app import reducer
from ledger_app.budget import render_fact
from ledger_app.loss import ledger_terms

CHECKPOINT_EVERY_FOLDS = 1000
CHECKPOINT_DELTA_RATIO = 2.0


def _change(old, new):
    if old is None:
        return "born"
    if old.get("lifecycle") != new.get("lifecycle"):
        return str(new.get("lifecycle", "changed"))
    return "changed"


def _row(LedgerFact, journal_id, number, fact_id, fact):
    support = fact.get("support") or [{}]
    return LedgerFact(
        journal_id=journal_id,
        fact_id=fact_id,
        since=number,
        change="",
        category=str(fact.get("category", "")),
        priority=str(fact.get("priority", "")),
        lifecycle=str(fact.get("lifecycle", "active")),
        confidence=str(fact.get("confidence", "")),
        pin=bool(fact.get("pin")),
        pin_entry=str(support[0].get("entry", ""))[:64] if fact.get("pin") else "",
        origin_fold=fact.get("origin_fold"),
        command_key=str(fact.get("command_key") or ""),
        text=str(fact.get("text", "")),
        data=reducer.state_bytes(fact).decode("utf-8"),
        tokens=count_tokens(str(fact.get("text", "")), settings.TOKEN_ENCODING),
    )


def _journal(apps, journal_id):
    Fold = apps.get_model("ledger_app", "Fold")
    LedgerFact = apps.get_model("ledger_app", "LedgerFact")
    LedgerTerm = apps.get_model("ledger_app", "LedgerTerm")
    every = int(getattr(settings, "LEDGER_CHECKPOINT_EVERY_FOLDS", CHECKPOINT_EVERY_FOLDS))
    ratio = float(getattr(settings, "LEDGER_CHECKPOINT_DELTA_RATIO", CHECKPOINT_DELTA_RATIO))
    prev = {}
    acc = reducer.ACC_EMPTY
    terms = Counter()
    current = {}  # fact_id -> LedgerFact row pk of the current version
    last_size, folds_since, bytes_since = None, 0, 0
    for fold in Fold.objects.filter(journal_id=journal_id).order_by("number").iterator():
        state = json.loads(fold.state)
        facts = state.get("facts", {})
        removed, added = reducer.fact_changes(prev, facts)
        acc = reducer.acc_update(acc, removed, added)
        gone = [current.pop(k) for k, _ in removed]
        if gone:
            LedgerFact.objects.filter(pk__in=gone).update(until=fold.number)
        for sign, changed in ((-1, removed), (1, added)):
            for _, fact in changed:
                if fact.get("lifecycle", "active") == "active":
                    for key in ledger_terms(render_fact(fact)):
                        terms[key] += sign
        rows = []
        for fact_id, fact in added:
            row = _row(LedgerFact, journal_id, fold.number, fact_id, fact)
            row.change = _change(prev.get(fact_id), fact)
            rows.append(row)
        for row in LedgerFact.objects.bulk_create(rows, batch_size=500):
            current[row.fact_id] = row.pk
        folds_since += 1
        bytes_since += len(fold.delta)
        checkpoint = (
            last_size is None
            or fold.kind == "consolidation"
            or reducer.checkpoint_due(
                folds_since=folds_since,
                delta_bytes_since=bytes_since,
                state_bytes_at_last=last_size,
                every=every,
                ratio=ratio,
            )
        )
        if checkpoint:
            last_size, folds_since, bytes_since = len(fold.state), 0, 0
        Fold.objects.filter(pk=fold.pk).update(
            state=fold.state if checkpoint else None,
            state_hash=reducer.hash_of(acc, state),
            state_acc=reducer.acc_hex(acc),
        )
        prev = facts
    # the term's stored form as the model at hand has it: the hex of this migration's
    # time, or the 64-bit integer of 0018 (when the function runs on today's models)
    wide = LedgerTerm._meta.get_field("term").get_internal_type() == "CharField"
    LedgerTerm.objects.bulk_create(
        [
            LedgerTerm(
                journal_id=journal_id,
                term=hashlib.sha256(k.encode("utf-8")).hexdigest() if wide else _term_id(k),
                facts=n,
            )
            for k, n in terms.items()
            if n
        ],
        batch_size=500,
    )


def _term_id(key):
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def forwards(apps, schema_editor):
    Fold = apps.get_model("ledger_app", "Fold")
    for journal_id in (
        Fold.objects.filter(state_acc__isnull=True).values_list("journal_id", flat=True).distinct()
    ):
        _journal(apps, journal_id)


def backwards(apps, schema_editor):
    Fold = apps.get_model("ledger_app", "Fold")
    LedgerFact = apps.get_model("ledger_app", "LedgerFact")
    LedgerTerm = apps.get_model("ledger_app", "LedgerTerm")
    for journal_id in Fold.objects.values_list("journal_id", flat=True).distinct():
        state = reducer.reduce(None, [])
        for fold in Fold.objects.filter(journal_id=journal_id).order_by("number").iterator():
            delta = json.loads(fold.delta)
            delta.pop("verdicts", None)
            reducer.apply_in_place(state, delta)
            text = reducer.state_bytes(state)
            Fold.objects.filter(pk=fold.pk).update(
                state=text.decode("utf-8"),
                state_hash=hashlib.sha256(text).hexdigest(),
                state_acc=None,
            )
    LedgerFact.objects.all().delete()
    LedgerTerm.objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [("ledger_app", "0007_fold_deltas_checkpoints_fact_rows")]

    operations = [migrations.RunPython(forwards, backwards)]
