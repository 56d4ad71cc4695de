"""``Journal.unfolded_tokens``, the running counter the fold trigger reads (issue 13, item 3).

It must equal the aggregate it replaces (the tokens after the last fold's ``seq_end``)
after appends, after folds and after a refused append, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.models import Journal
from journal_app.services import (
    ConflictError,
    journal_append,
    journal_ensure,
    session_ensure,
    tenant_ensure,
)
from ledger_app.models import TaskRun
from ledger_app.receivers import schedule_fold, unfolded_count
from ledger_app.services import ledger_fold

pytestmark = pytest.mark.django_db


def _journal():
    t = tenant_ensure(slug="acme")
    return journal_ensure(session=session_ensure(tenant=t, key="count"))


def _round(n):
    return [
        message("user", f"Step {n}: run the tests in billing/step_{n}.py please."),
        tool_call(f"c{n}", "exec", {"command": f"pytest billing/step_{n}.py"}),
        tool_result(f"c{n}", f"{n} passed in 0.5s", exit_code=0),
    ]


def _counter(j):
    return Journal.objects.values_list("unfolded_tokens", flat=True).get(pk=j.pk)


def test_the_counter_equals_the_sum_after_appends_folds_and_a_refused_append():
    j = _journal()
    assert _counter(j) == 0
    journal_append(journal=j, items=_round(1))
    journal_append(journal=j, items=_round(2))
    assert _counter(j) == unfolded_count(j.pk) > 0
    assert j.unfolded_tokens == _counter(j)  # the caller's instance follows
    assert ledger_fold(journal=j, recover=False).created
    assert _counter(j) == unfolded_count(j.pk) == 0
    journal_append(journal=j, items=_round(3))
    after = _counter(j)
    assert after == unfolded_count(j.pk) > 0
    with pytest.raises(ConflictError):  # rolled back: nothing counted
        journal_append(journal=j, items=[message("user", "not what was said")], start_seq=7)
    assert _counter(j) == unfolded_count(j.pk) == after
    assert ledger_fold(journal=j, recover=False).created
    assert _counter(j) == unfolded_count(j.pk) == 0


def test_a_journal_from_before_the_counter_is_counted_once(settings):
    j = _journal()
    journal_append(journal=j, items=_round(1))
    Journal.objects.filter(pk=j.pk).update(unfolded_tokens=None)
    journal_append(journal=j, items=_round(2))  # an uncounted journal stays uncounted
    assert _counter(j) is None
    j.refresh_from_db()
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9
    with CaptureQueriesContext(connection) as ctx:
        schedule_fold(Journal, journal=j, head_seq=j.head_seq)
    assert any("SUM(" in q["sql"].upper() for q in ctx.captured_queries)
    assert _counter(j) == unfolded_count(j.pk) > 0
    with CaptureQueriesContext(connection) as ctx:
        schedule_fold(Journal, journal=j, head_seq=j.head_seq)
    assert len(ctx.captured_queries) == 0


def test_the_trigger_queues_a_fold_once_the_counter_passes_the_threshold(settings):
    j = _journal()
    journal_append(journal=j, items=_round(1))
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = _counter(j) + 1
    schedule_fold(Journal, journal=j, head_seq=j.head_seq)
    assert not TaskRun.objects.filter(journal=j).exists()
    journal_append(journal=j, items=_round(2))
    schedule_fold(Journal, journal=j, head_seq=j.head_seq)
    assert TaskRun.objects.filter(journal=j, task_name__endswith="fold_journal").count() == 1


def test_only_the_journals_unfolded_module_writes_the_counter():
    # one owner: every write of Journal.unfolded_tokens (an assignment, an augmented
    # assignment, an update(unfolded_tokens=...)) is in journal_app/services/unfolded.py
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    writers = set()
    for app in ("config", "journal_app", "audit_app", "ledger_app", "recovery_app", "proxy_app"):
        for path in (root / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                targets = []
                if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                hit = any(
                    isinstance(t, ast.Attribute) and t.attr == "unfolded_tokens" for t in targets
                ) or (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "update"
                    and any(k.arg == "unfolded_tokens" for k in node.keywords)
                )
                if hit:
                    owner = str(path.relative_to(root))
                    copy = (  # the append hands the figure back onto its caller's object
                        owner == "journal_app/services/append.py"
                        and isinstance(node, ast.Assign)
                        and ast.unparse(node.targets[0]) == "caller.unfolded_tokens"
                    )
                    if not copy:
                        writers.add(owner)
    assert writers == {"journal_app/services/unfolded.py"}
