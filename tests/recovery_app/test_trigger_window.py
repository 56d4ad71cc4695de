"""The trigger window is the 24 most recent entries (docs/design.md section 7, "Trigger").

Written with the literal 24 on purpose: a test that reads ``WINDOW`` back passes whatever
the constant is. Positions count back from the head, the head being 1: the phrase in the
24th most recent entry fires, in the 25th it does not.
"""

from __future__ import annotations

import pytest
from django.conf import settings

from journal_app.formats.base import message
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from recovery_app import triggers
from recovery_app.models import Receipt
from recovery_app.services import recovery_run
from recovery_app.triggers import ScanItem, scan

LENGTH = 40  # entries in each journal below; the head is seq 40
DOUBT = "The last answer may have been wrong."
ROUTINE = {"user": "Continue.", "assistant": "Done."}


def _role(seq: int) -> str:
    return "user" if seq % 2 else "assistant"


def _texts(back: int) -> list[tuple[str, str]]:
    """``LENGTH`` plain messages with :data:`DOUBT` in the entry ``back`` from the head."""
    doubt_seq = LENGTH - back + 1
    return [
        (_role(seq), DOUBT if seq == doubt_seq else ROUTINE[_role(seq)])
        for seq in range(1, LENGTH + 1)
    ]


def test_the_window_is_24_entries():
    assert triggers.WINDOW == 24
    # a design number (docs/design.md 7), not a setting: no second copy that could drift
    assert not hasattr(settings, "RECOVERY_TRIGGER_WINDOW")
    assert scan.__kwdefaults__["window"] == 24


@pytest.mark.parametrize(("back", "fires"), [(23, True), (24, True), (25, False)])
def test_a_phrase_fires_only_within_the_24_most_recent_entries(back, fires):
    items = [
        ScanItem(seq, "message", role, text) for seq, (role, text) in enumerate(_texts(back), 1)
    ]
    result = scan(items)
    assert result.window == (17, 40)
    assert result.fired is fires
    assert result.trigger_seqs == ([LENGTH - back + 1] if fires else [])
    if not fires:
        assert result.reason == (
            "no identifier or uncertainty/correction phrase in the last 24 entries"
        )


def test_the_window_starts_24_entries_before_the_head_whatever_the_journal_length():
    for length in (24, 25, 100):
        items = [ScanItem(seq, "message", "user", "Continue.") for seq in range(1, length + 1)]
        assert scan(items).window == (length - 23, length)


@pytest.mark.django_db
@pytest.mark.parametrize(("back", "fires"), [(23, True), (24, True), (25, False)])
def test_recovery_run_scans_the_24_most_recent_entries(back, fires, no_model):
    t = tenant_ensure(slug="acme")
    j = journal_ensure(session=session_ensure(tenant=t, key=f"window-{back}"))
    journal_append(journal=j, items=[message(role, text) for role, text in _texts(back)])
    j.refresh_from_db()
    assert j.head_seq == LENGTH

    receipt = recovery_run(journal=j, model=None)

    assert receipt.trigger["window"] == [17, 40]
    assert receipt.scanned_to == 40
    assert receipt.trigger["fired"] is fires
    if fires:
        assert receipt.trigger["trigger_seqs"] == [LENGTH - back + 1]
        assert receipt.outcome != Receipt.Outcome.NOT_TRIGGERED
        assert {"seq": LENGTH - back + 1, "phrase": "may have been"} in receipt.trigger["phrases"]
    else:
        assert receipt.outcome == Receipt.Outcome.NOT_TRIGGERED
        assert receipt.reason == (
            "no identifier or uncertainty/correction phrase in the last 24 entries"
        )
