"""The hash-chained log of row writes (:class:`audit_app.models.LogRecord`).

Every save of a registered model (:func:`log_register`, called from the apps' ``ready()``)
appends the row as stored to its tenant's chain (:func:`log_append`, in the saving
transaction); :func:`log_fill` starts the log for existing rows (a data migration) and
:func:`log_verify` recomputes the chains and compares every logged row with its latest record
(``manage.py verify_ledger``). docs/design.md sections 8 and 9.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import rfc8785
from django.db import IntegrityError, models, transaction

from audit_app.models import LogRecord
from journal_app.record_chain import record_hash, record_value

#: the models whose every write is logged: ``app_label.ModelName`` -> (model, the lookup of
#: its tenant's pk); filled by :func:`log_register` from the apps' ``ready()``
LOGGED: dict[str, tuple[type[models.Model], str]] = {}
#: tries at appending when another transaction took the same seq of the chain
APPEND_TRIES = 5


def log_register(model: type[models.Model], tenant_path: str) -> None:
    """Log every save of ``model`` (``post_save``) and verify its rows against the log.

    Args:
        tenant_path: the lookup of the row's tenant pk (``"tenant_id"``,
            ``"journal__session__tenant_id"``); a null tenant is chain 0.
    """
    from django.db.models.signals import post_save

    label = model._meta.label
    LOGGED[label] = (model, tenant_path)
    post_save.connect(_logged_save, sender=model, dispatch_uid=f"audit_app.log.{label}")


def _logged_save(sender: Any, instance: models.Model, **kwargs: Any) -> None:
    log_append(instance=instance)


def _columns(model: type[models.Model]) -> list[str]:
    return [f.attname for f in model._meta.concrete_fields]


def _snapshot(model: type[models.Model], row: dict[str, Any]) -> dict[str, Any]:
    return {k: record_value(v) for k, v in sorted(row.items())}


def _link(chain: int, seq: int, label: str, pk: int, record: dict[str, Any], prev: str) -> str:
    return record_hash(
        previous=prev,
        record={"chain": chain, "seq": seq, "model": label, "object_id": pk, "record": record},
    )


def log_append(*, instance: models.Model) -> LogRecord:
    """Append ``instance``'s row, as stored now, to its tenant's log chain.

    Called on every save of a registered model (:func:`log_register`), in the saving
    transaction. The row is read back from the database (what is stored, not what is in
    memory). Idempotent per state: the same row saved unchanged appends another record.

    Raises:
        KeyError: ``instance``'s model is not registered.
        IntegrityError: the chain's next seq was taken :data:`APPEND_TRIES` times running.
    """
    model, tenant_path = LOGGED[type(instance)._meta.label]
    values = (
        model._base_manager.filter(pk=instance.pk)
        .values(*_columns(model), log_tenant=models.F(tenant_path))
        .get()
    )
    chain = int(values.pop("log_tenant") or 0)
    return _append(LogRecord, chain, model._meta.label, int(instance.pk), _snapshot(model, values))


def _append(
    log: type[models.Model], chain: int, label: str, pk: int, record: dict[str, Any]
) -> Any:
    text = rfc8785.dumps(record).decode("utf-8")
    for attempt in range(APPEND_TRIES):
        head = (
            log.objects.filter(chain=chain)
            .order_by("-seq")
            .values_list("seq", "record_hash")
            .first()
        )
        seq, prev = (head[0] + 1, head[1]) if head else (1, "")
        try:
            with transaction.atomic():
                return log.objects.create(
                    chain=chain,
                    seq=seq,
                    model=label,
                    object_id=pk,
                    record=text,
                    previous=prev,
                    record_hash=_link(chain, seq, label, pk, record, prev),
                )
        except IntegrityError:
            if attempt == APPEND_TRIES - 1:
                raise
    raise AssertionError("unreachable")


def log_fill(log: type[models.Model], logged: Iterable[tuple[type[models.Model], str]]) -> int:
    """Log every existing row of ``logged`` (model, tenant lookup) that has no record yet, in
    primary-key order per model (the data migration that starts the log; ``log`` and the
    models may be historical).

    Returns:
        How many records were appended.
    """
    count = 0
    for model, tenant_path in logged:
        label = model._meta.label
        done = set(log.objects.filter(model=label).values_list("object_id", flat=True))
        rows = model._base_manager.order_by("pk").values(
            *_columns(model), log_tenant=models.F(tenant_path)
        )
        for values in rows.iterator(chunk_size=2000):
            if values["id"] in done:
                continue
            chain = int(values.pop("log_tenant") or 0)
            _append(log, chain, label, values["id"], _snapshot(model, values))
            count += 1
    return count


def log_verify(*, chains: Iterable[int] | None = None) -> list[str]:
    """Recompute the log chains and compare every logged row with its latest record.

    Args:
        chains: tenant pks whose chains to check (chain 0, account events, always too);
            ``None``: every chain.

    Returns:
        Problems, first the first record that differs in chain order: a broken link or hash
        (``log chain 3 seq 12 (audit_app.AuditEvent 40): ...``), then rows changed since
        their latest record (naming the first differing column), rows with no record, and
        records whose row is gone (a deleted audit event). Empty when all match.
    """
    wanted = None if chains is None else {0, *chains}
    records = LogRecord.objects.order_by("chain", "seq")
    if wanted is not None:
        records = records.filter(chain__in=wanted)
    problems: list[str] = []
    latest: dict[tuple[str, int], tuple[int, int, dict[str, Any]]] = {}
    chain, expected, prev = None, 1, ""
    for r in records.iterator(chunk_size=2000):
        if r.chain != chain:
            chain, expected, prev = r.chain, 1, ""
        where = f"log chain {r.chain} seq {r.seq} ({r.model} {r.object_id})"
        try:
            record = json.loads(r.record)
        except ValueError:
            problems.append(f"{where}: the stored record is not JSON")
            record = {}
        if r.seq != expected:
            problems.append(f"{where}: expected seq {expected} (a record is missing)")
        if r.previous != prev:
            problems.append(
                f"{where}: previous is {r.previous or '(none)'}, the record before "
                f"it is {prev or '(none)'}"
            )
        recomputed = _link(r.chain, r.seq, r.model, r.object_id, record, r.previous)
        if recomputed != r.record_hash:
            problems.append(f"{where}: record_hash stored {r.record_hash}, recomputed {recomputed}")
        latest[(r.model, r.object_id)] = (r.chain, r.seq, record)
        expected, prev = r.seq + 1, r.record_hash
    for label, (model, tenant_path) in sorted(LOGGED.items()):
        rows = model._base_manager.order_by("pk")
        if wanted is not None:
            null = models.Q(**{f"{tenant_path}__isnull": True})
            rows = rows.filter(models.Q(**{f"{tenant_path}__in": wanted}) | null)
        seen: set[int] = set()
        for values in rows.values(*_columns(model)).iterator(chunk_size=2000):
            seen.add(values["id"])
            now = _snapshot(model, values)
            logged = latest.get((label, values["id"]))
            if logged is None:
                problems.append(f"{label} {values['id']}: not in the log")
                continue
            if logged[2] != now:
                column = next(
                    k
                    for k in sorted(now.keys() | logged[2].keys())
                    if now.get(k) != logged[2].get(k)
                )
                problems.append(
                    f"{label} {values['id']}: column {column} is {now.get(column)!r}, its log "
                    f"record (chain {logged[0]} seq {logged[1]}) says {logged[2].get(column)!r}"
                )
        for (logged_label, pk), (c, seq, _) in sorted(latest.items()):
            if logged_label == label and pk not in seen:
                problems.append(f"{label} {pk}: deleted (logged at chain {c} seq {seq})")
    return problems
