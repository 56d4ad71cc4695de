"""A cancellation in the same transcript as its instruction proposes the retirement
(fresh-eyes finding, issue 15 item 7; docs/design.md 5.2: the evidence must come from a later
fold, so the fold range ends before the cancelling message)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from journal_app.formats.base import message, tool_call, tool_result
from ledger_app.models import Fold, RetirementRequest
from ledger_app.offline.turns import cancellation_boundary
from ledger_app.services import ledger_fold
from tests.factories import TenantFactory, journal_build
from tests.ledger_app.test_context import views

pytestmark = pytest.mark.django_db

ROTATE = "Also rotate the API keys on prod tonight."
CANCEL = "Never mind, cancel that: do not rotate the API keys."


def _items():
    return [
        message("user", "Check the deploy logs."),
        tool_call("c1", "exec", {"command": "tail deploy.log"}),
        tool_result("c1", "deploy ok", exit_code=0),
        message("user", ROTATE),
        message("assistant", "Will do after the check."),
        message("user", CANCEL),
        message("assistant", "Understood, not rotating them."),
    ]


def test_the_boundary_is_just_before_a_cancellation_that_follows_a_pin():
    vs = views(_items())
    assert cancellation_boundary(vs) == 5  # the cancellation is seq 6
    assert cancellation_boundary(vs[5:]) is None  # it opens the next range: no cut
    assert cancellation_boundary(vs[:5]) is None


def test_compact_folds_up_to_the_cancellation_and_the_next_fold_proposes_the_retirement(
    settings,
):
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9
    journal = journal_build(tenant=TenantFactory(slug="acme"), items=_items())
    call_command("compact", "acme", stdout=io.StringIO())
    folds = list(Fold.objects.filter(journal=journal, kind=Fold.Kind.FOLD).order_by("number"))
    assert [(f.seq_start, f.seq_end) for f in folds] == [(1, 5), (6, 7)]
    (request,) = RetirementRequest.objects.filter(journal=journal)
    assert request.status == "pending"
    state = folds[-1].state_dict["facts"]
    assert state[request.fact_id]["text"] == ROTATE  # the instruction, not the cancellation
    assert state[request.fact_id]["lifecycle"] == "active"  # until a reviewer approves
    assert ledger_fold(journal=journal).reason.startswith("nothing to fold")  # all folded
