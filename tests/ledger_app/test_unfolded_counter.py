"""``Journal.unfolded_tokens``, the running counter the fold trigger reads.

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


def _counter_writes(tree) -> list[tuple[int, str]]:
    """``(line, form)`` of every write of ``unfolded_tokens`` in a module's syntax tree: an
    assignment to ``x.unfolded_tokens`` (plain, augmented, annotated), ``setattr(x,
    "unfolded_tokens", ...)``, ``update(unfolded_tokens=...)`` or ``update(**{"unfolded_tokens":
    ...})``, and ``save(update_fields=[..., "unfolded_tokens", ...])``."""
    import ast

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute) and t.attr == "unfolded_tokens":
                    found.append((node.lineno, ast.unparse(t)))
        if not isinstance(node, ast.Call):
            continue
        name = (
            node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        )
        consts = {
            c.value
            for c in ast.walk(node)
            if isinstance(c, ast.Constant) and isinstance(c.value, str)
        }
        if name == "setattr" and "unfolded_tokens" in consts:
            found.append((node.lineno, "setattr"))
        elif name == "update" and (
            any(k.arg == "unfolded_tokens" for k in node.keywords)
            or any(k.arg is None for k in node.keywords)
            and "unfolded_tokens" in consts
        ):
            found.append((node.lineno, "update"))
        elif (
            name == "save"
            and any(k.arg == "update_fields" for k in node.keywords)
            and ("unfolded_tokens" in consts)
        ):
            found.append((node.lineno, "save"))
    return found


def test_only_the_journals_unfolded_module_writes_the_counter():
    # one owner: the figure is computed only in journal_app/services/unfolded.py; the append
    # saves the row it locked (update_fields names the counter unfolded_add changed) and
    # hands the figure back to its caller's object
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    writers = {}
    for app in ("config", "journal_app", "audit_app", "ledger_app", "recovery_app", "proxy_app"):
        for path in (root / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            owner = str(path.relative_to(root))
            for _line, form in _counter_writes(ast.parse(path.read_text(encoding="utf-8"))):
                writers.setdefault(owner, []).append(form)
    append = writers.pop("journal_app/services/append.py", [])
    assert sorted(append) == ["caller.unfolded_tokens", "save"]
    assert set(writers) == {"journal_app/services/unfolded.py"}


def test_the_owner_scan_sees_each_form_of_write():
    import ast

    source = (
        "journal.unfolded_tokens = 3\n"
        "journal.unfolded_tokens += 3\n"
        "setattr(journal, 'unfolded_tokens', 3)\n"
        "Journal.objects.filter(pk=1).update(unfolded_tokens=3)\n"
        "Journal.objects.filter(pk=1).update(**{'unfolded_tokens': 3})\n"
        "journal.save(update_fields=['head_seq', 'unfolded_tokens'])\n"
        "journal.save(update_fields=['head_seq'])\n"
        "x = journal.unfolded_tokens\n"
    )
    assert [line for line, _ in _counter_writes(ast.parse(source))] == [1, 2, 3, 4, 5, 6]
