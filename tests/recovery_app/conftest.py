"""Journals for recovery tests: the migration case (seed 000, "What comes back") and helpers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db import connection

from journal_app.formats.base import ParsedEntry, message, tool_call, tool_result
from journal_app.models import Entry, Journal
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app.services import ledger_fold
from recovery_app.search import index_sync
from tests.support.writers import ScriptedWriter

MIGRATE = "python manage.py migrate billing 0042_add_refund_index --fake"
MIGRATE_OUT = (
    "Operations to perform:\n  Target specific migration: 0042_add_refund_index, from billing\n"
    "Running migrations:\n  Applying billing.0042_add_refund_index... FAKED"
)
DOUBT = (
    "The migration 0042_add_refund_index may have been wrong: the earlier result may have "
    "been wrong. Check what it did."
)


def entry(journal: Journal, seq: int) -> Entry:
    return Entry.objects.get(journal=journal, seq=seq)


def raw_update(sql: str, params: list[Any]) -> None:
    """Change a stored row behind the model layer (and, on PostgreSQL, the append-only trigger)."""
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("SET session_replication_role = replica")
        cur.execute(sql, params)
        if connection.vendor == "postgresql":
            cur.execute("SET session_replication_role = DEFAULT")


def filler(n: int, start: int = 0) -> list[ParsedEntry]:
    """``n`` routine read rounds (a call and its result each) about other files."""
    items: list[ParsedEntry] = []
    for i in range(start, start + n):
        items += [
            tool_call(f"r{i}", "read_file", {"path": f"billing/views_{i}.py"}),
            tool_result(
                f"r{i}", f"def view_{i}(request):\n    return render(request, 'page.html')\n"
            ),
        ]
    return items


@dataclass
class MigrationCase:
    journal: Journal
    call: Entry
    result: Entry
    trigger: Entry
    folds: list[Any] = field(default_factory=list)


def build_migration_case(
    *, tenant: str = "acme", key: str = "mig", lane: str = "main"
) -> MigrationCase:
    """Early a migration runs with ``--fake``; the ledger notes it as routine, without the flag.

    Fold 1 covers the migration with a writer that writes "migrations applied" at P3 (the
    flag left out), fold 2 forty routine rounds; then the user names the migration and says
    the result may have been wrong, and the agent starts checking (a new complete round).
    """
    t = tenant_ensure(slug=tenant)
    j = journal_ensure(session=session_ensure(tenant=t, key=key), lane=lane)
    journal_append(
        journal=j,
        items=[
            message("system", "You maintain the billing service. Ask before dropping tables."),
            message("user", "Add the refund index and apply the migration."),
            message("assistant", "Applying the migration."),
            tool_call("m1", "exec", {"command": MIGRATE}),
            tool_result("m1", MIGRATE_OUT, exit_code=0),
        ],
    )
    call, result = entry(j, 4), entry(j, 5)
    routine = ScriptedWriter(
        [
            {
                "op": "add",
                "fact": {
                    "id": "routine-migrations",
                    "category": "history",
                    "priority": "P3",
                    "confidence": "verified",
                    "text": "Database migrations were applied.",
                    "support": [{"entry": result.entry_hash}],
                },
            }
        ],
        writer_id="routine",
    )
    folds = [ledger_fold(journal=j, writer=routine, recover=False).fold]
    journal_append(journal=j, items=filler(40))
    folds.append(ledger_fold(journal=j, writer="mechanical", recover=False).fold)
    journal_append(
        journal=j,
        items=[
            message("user", DOUBT),
            message("assistant", "Checking the migration history."),
            tool_call("c1", "exec", {"command": "git log --oneline -3"}),
            tool_result("c1", "a1b2c3d refund index\n9f8e7d6 views", exit_code=0),
        ],
    )
    j.refresh_from_db()
    index_sync(journal=j)  # what the entries_appended receiver does after each commit
    trigger = entry(j, j.head_seq - 3)
    return MigrationCase(j, call, result, trigger, folds)


class StubModel:
    """An analyst model that counts requests and returns the claims it was given."""

    id = "stub"

    def __init__(self, claims: list[dict[str, Any]] | None = None) -> None:
        self.requests = 0
        self.claims = claims or []
        self.seen: list[Any] = []

    def propose(self, question: str, reads: Any) -> list[dict[str, Any]]:
        self.requests += 1
        self.seen.append((question, reads))
        return [dict(c) for c in self.claims]


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Fails the test if the model-backed analyst is ever constructed; returns the call count."""
    calls: list[int] = []

    def factory() -> None:
        calls.append(1)
        raise AssertionError("a model client was constructed")

    monkeypatch.setattr("recovery_app.services.attempt.analyst_model_from_settings", factory)
    return calls
