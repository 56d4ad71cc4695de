"""Core rules that used to change unnoticed.

* A summary, a checkpoint (compaction marker) or another fact is never valid support
  (docs/design.md 5.1): the reducer rejects the op and says why, and the fold service stores the
  verdict and leaves the fact out of the ledger.
* A pin is its entry's text byte for byte (docs/design.md 5.2, 6): one whitespace byte of
  difference (a trailing space, a leading newline, a tab or a no-break space for a space)
  fails the reducer's pin check, the fold's instruction re-check and the request validation.

Each test here was checked by breaking the rule in the code (see the issue's note).
"""

from __future__ import annotations

import pytest

from journal_app.formats.base import ParsedEntry, message
from journal_app.models import Entry
from journal_app.services import journal_append, journal_ensure, session_ensure, tenant_ensure
from ledger_app import reducer
from ledger_app.errors import FoldRefused
from ledger_app.reducer import DeltaInvalid, PinViolation, apply_delta
from ledger_app.services import ledger_fold
from ledger_app.services.pins_check import instructions_check
from ledger_app.validation import Expectations, validate_request
from tests.support.writers import ScriptedWriter

RAW_USER, RAW_RESULT = "0a" * 32, "0b" * 32
SUMMARY_MESSAGE, SUMMARY_EVENT, CHECKPOINT = "5a" * 32, "5e" * 32, "c0" * 32
NEVER_SUPPORT = "is a summary or compaction marker, never valid support"


def _info(seq: int, kind: str, role: str, *, derived: bool, fold: int = 1) -> dict:
    return {
        "seq": seq,
        "kind": kind,
        "role": role,
        "is_error": False,
        "derived": derived,
        "fold": fold,
    }


def evidence(fold: int = 1) -> dict[str, dict]:
    """Two raw entries and the three derived kinds an importer writes (see journal_app.formats)."""
    return {
        RAW_USER: _info(1, "message", "user", derived=False, fold=fold),
        RAW_RESULT: _info(2, "tool_result", "tool", derived=False, fold=fold),
        # Claude Code ``isCompactSummary``: a user message written by the harness
        SUMMARY_MESSAGE: _info(3, "message", "user", derived=True, fold=fold),
        # Claude Code ``summary`` record
        SUMMARY_EVENT: _info(4, "event", "runtime", derived=True, fold=fold),
        # ``compact_boundary`` / Codex ``compacted``: the compaction marker (checkpoint)
        CHECKPOINT: _info(5, "event", "runtime", derived=True, fold=fold),
    }


def fact(fact_id: str, *support: str, **fields: str) -> dict:
    return {
        "id": fact_id,
        "category": "decision",
        "priority": "P2",
        "confidence": "reported",
        "text": "Rounding uses Decimal.quantize with ROUND_HALF_UP.",
        "support": [{"entry": h} for h in support],
        "author": "writer",
        **fields,
    }


def delta(ops: list[dict], *, fold: int = 1, ev: dict | None = None) -> dict:
    return {"fold": fold, "revision": 5, "evidence": ev or evidence(fold), "ops": ops}


# ------------------------------------------------------------------ derived entries (5.1)

DERIVED = pytest.mark.parametrize(
    "derived",
    [SUMMARY_MESSAGE, SUMMARY_EVENT, CHECKPOINT],
    ids=["summary-message", "summary-event", "checkpoint"],
)


def test_a_fact_citing_a_raw_entry_is_accepted():
    """The control for the rejections below: the same fact on a raw entry goes in."""
    r = apply_delta(reducer.EMPTY_STATE, delta([{"op": "add", "fact": fact("f1", RAW_USER)}]))
    assert [(x.status, x.fact_id) for x in r.results] == [("accepted", "f1")]
    assert list(r.state["facts"]) == ["f1"]


@DERIVED
def test_a_fact_citing_a_derived_entry_is_rejected_with_the_reason(derived):
    before = reducer.EMPTY_STATE
    r = apply_delta(before, delta([{"op": "add", "fact": fact("f1", derived)}]))
    [result] = r.results
    assert (result.status, result.op, result.fact_id) == ("rejected", "add", "f1")
    assert result.reason == f"support sha256:{derived} {NEVER_SUPPORT}"
    assert r.state == {"facts": {}, "folds": 1}
    assert reducer.state_hash(r.state) == reducer.state_hash({**before, "folds": 1})


@DERIVED
def test_one_derived_entry_among_raw_support_rejects_the_fact(derived):
    r = apply_delta(
        reducer.EMPTY_STATE,
        delta([{"op": "add", "fact": fact("f1", RAW_USER, RAW_RESULT, derived)}]),
    )
    assert r.results[0].status == "rejected" and NEVER_SUPPORT in r.results[0].reason
    assert r.state["facts"] == {}


@DERIVED
def test_a_verified_claim_on_a_derived_entry_is_rejected_for_its_support(derived):
    """A pinned-looking or verified fact gets no pass: support is judged first."""
    verified = fact("f1", derived, confidence="verified", category="verified_state")
    r = apply_delta(reducer.EMPTY_STATE, delta([{"op": "add", "fact": verified}]))
    assert r.results[0].status == "rejected" and NEVER_SUPPORT in r.results[0].reason


@DERIVED
def test_superseding_with_a_derived_entry_keeps_the_old_fact_active(derived):
    state = apply_delta(
        reducer.EMPTY_STATE, delta([{"op": "add", "fact": fact("f1", RAW_USER)}])
    ).state
    new = fact("f2", derived, text="Rounding uses banker's rounding.")
    r = apply_delta(state, delta([{"op": "supersede", "id": "f1", "fact": new}], fold=2))
    assert r.results[0].status == "rejected" and NEVER_SUPPORT in r.results[0].reason
    assert list(r.state["facts"]) == ["f1"]
    assert r.state["facts"]["f1"]["lifecycle"] == "active"
    assert "superseded_by" not in r.state["facts"]["f1"]


def test_a_fact_citing_another_fact_or_a_checkpoint_id_refuses_the_delta():
    """Only journal entries are support: a fact id or a ledger checkpoint hash resolves to none."""
    state = apply_delta(
        reducer.EMPTY_STATE, delta([{"op": "add", "fact": fact("f1", RAW_USER)}])
    ).state
    for cited in ("f1", reducer.state_hash(state)):
        with pytest.raises(DeltaInvalid, match="does not resolve to a raw entry") as exc:
            apply_delta(state, delta([{"op": "add", "fact": fact("f2", cited)}], fold=2))
        assert (exc.value.index, exc.value.field) == (0, "fact.support")


def test_a_compact_summary_in_the_user_role_cancels_no_obligation():
    """A harness-written summary speaks with a user's role but not a user's authority."""
    obligation = fact("ob1", RAW_RESULT, category="open_obligation", priority="P1")
    state = apply_delta(reducer.EMPTY_STATE, delta([{"op": "add", "fact": obligation}])).state
    r = apply_delta(
        state, delta([{"op": "cancel", "id": "ob1", "evidence": [SUMMARY_MESSAGE]}], fold=2)
    )
    assert r.results[0].status == "rejected" and "authoritative" in r.results[0].reason
    assert r.state["facts"]["ob1"]["lifecycle"] == "active"
    r = apply_delta(state, delta([{"op": "cancel", "id": "ob1", "evidence": [RAW_USER]}], fold=2))
    assert r.results[0].status == "accepted"


def test_a_compact_summary_from_a_later_fold_does_not_open_a_p0_retirement():
    pin = {
        **fact("pin:0a", RAW_USER, category="constraint", priority="P0", confidence="verified"),
        "pin": True,
        "author": "code",
    }
    state = apply_delta(reducer.EMPTY_STATE, delta([{"op": "add", "fact": pin}])).state
    later = evidence(fold=2)
    r = apply_delta(
        state,
        delta([{"op": "retire", "id": "pin:0a", "evidence": [SUMMARY_MESSAGE]}], fold=2, ev=later),
    )
    assert r.results[0].status == "rejected" and "authoritative" in r.results[0].reason
    assert "pending_retirement" not in r.state["facts"]["pin:0a"]
    r = apply_delta(
        state, delta([{"op": "retire", "id": "pin:0a", "evidence": [RAW_USER]}], fold=2, ev=later)
    )
    assert r.results[0].status == "pending"


def _derived_journal():
    j = journal_ensure(session=session_ensure(tenant=tenant_ensure(slug="acme"), key="derived"))
    journal_append(
        journal=j,
        items=[
            message("system", "Never modify the payments tables without asking."),
            message("user", "Fix the refund rounding in billing/refunds.py."),
            message("assistant", "I will use Decimal.quantize."),
            ParsedEntry(
                kind="event",
                role="runtime",
                content={"type": "summary", "summary": "Refunds now round half up."},
                derived=True,
            ),
            message("user", "Summary: the refund rounding is fixed and tested.", derived=True),
            message("user", "Go on."),
            message("assistant", "Continuing."),
        ],
    )
    j.refresh_from_db()
    return j


@pytest.mark.django_db
@pytest.mark.parametrize("seq", [4, 5], ids=["summary-event", "compact-summary-message"])
def test_the_fold_service_stores_the_rejection_and_leaves_the_fact_out(seq):
    j = _derived_journal()
    summary = Entry.objects.get(journal=j, seq=seq)
    assert summary.derived
    said = Entry.objects.get(journal=j, seq=3)
    writer = ScriptedWriter(
        [
            {"op": "add", "fact": fact("w:summary", summary.entry_hash, text="Refunds are fixed.")},
            {"op": "add", "fact": fact("w:said", said.entry_hash)},
        ]
    )
    result = ledger_fold(journal=j, writer=writer)
    fold = result.fold
    assert result.created and fold is not None
    verdicts = {v["fact_id"]: v for v in fold.delta_dict["verdicts"]}
    assert verdicts["w:summary"]["status"] == "rejected"
    assert verdicts["w:summary"]["reason"] == (
        f"support sha256:{summary.entry_hash} {NEVER_SUPPORT}"
    )
    assert verdicts["w:said"]["status"] == "accepted"
    assert fold.ops_rejected == 1
    facts = fold.state_dict["facts"]
    assert "w:summary" not in facts and "w:said" in facts
    assert fold.delta_dict["evidence"][summary.entry_hash]["derived"] is True


# ------------------------------------------------------------------- verbatim pins (5.2)

RULE = "You are READ-ONLY: never call write or edit."

#: (case, the entry's text, the same text with one whitespace byte changed)
WHITESPACE = [
    ("trailing-space", RULE + " ", RULE),
    ("leading-newline", "\n" + RULE, RULE),
    ("tab-vs-space", RULE + "\t", RULE + " "),
    ("nbsp-vs-space", RULE + "\u00a0", RULE + " "),
    ("inner-tab-vs-space", RULE.replace(" ", "\t", 1), RULE),
    ("inner-nbsp-vs-space", RULE.replace(": ", ":\u00a0", 1), RULE),
]
BOTH_WAYS = [
    pytest.param(*pair, id=f"{case}{suffix}")
    for case, entry_text, altered in WHITESPACE
    for pair, suffix in (((entry_text, altered), ""), ((altered, entry_text), "-reversed"))
]


def _pin(text: str) -> dict:
    return {
        "id": f"pin:{RAW_USER[:16]}",
        "category": "constraint",
        "priority": "P0",
        "confidence": "verified",
        "text": text,
        "support": [{"entry": RAW_USER}],
        "pin": True,
        "author": "code",
    }


def _pin_delta(pin_text: str, journal_text: str) -> dict:
    return {
        "fold": 1,
        "evidence": evidence(),
        "required_pins": [{"entry": RAW_USER, "text": journal_text}],
        "ops": [{"op": "add", "fact": _pin(pin_text)}],
    }


@pytest.mark.parametrize("journal_text", [pytest.param(t, id=case) for case, t, _ in WHITESPACE])
def test_a_pin_equal_to_its_entry_byte_for_byte_passes(journal_text):
    r = apply_delta(reducer.EMPTY_STATE, _pin_delta(journal_text, journal_text))
    assert r.state["facts"][f"pin:{RAW_USER[:16]}"]["text"] == journal_text


@pytest.mark.parametrize(("journal_text", "pin_text"), BOTH_WAYS)
def test_the_reducer_refuses_a_pin_one_whitespace_byte_off(journal_text, pin_text):
    with pytest.raises(PinViolation, match="pin text differs from the journal entry") as exc:
        apply_delta(reducer.EMPTY_STATE, _pin_delta(pin_text, journal_text))
    assert exc.value.entry == RAW_USER


@pytest.mark.parametrize(("journal_text", "pin_text"), BOTH_WAYS)
def test_check_pin_compares_bytes_not_stripped_text(journal_text, pin_text):
    facts = {f"pin:{RAW_USER[:16]}": _pin(pin_text)}
    with pytest.raises(PinViolation, match="differs"):
        reducer.check_pin(facts, RAW_USER, journal_text)
    reducer.check_pin({f"pin:{RAW_USER[:16]}": _pin(journal_text)}, RAW_USER, journal_text)


@pytest.mark.parametrize(
    ("journal_text", "request_text"), [pytest.param(*p[1:], id=p[0]) for p in WHITESPACE]
)
def test_request_validation_fails_a_pin_one_whitespace_byte_off(journal_text, request_text):
    expect = Expectations(pins=[("pin:0a0a", RAW_USER, journal_text)])
    good = [{"role": "system", "content": journal_text}, {"role": "user", "content": "Go."}]
    assert validate_request(good, expect=expect).failed("pin_verbatim") == []
    bad = [{"role": "system", "content": request_text}, good[1]]
    [problem] = validate_request(bad, expect=expect).failed("pin_verbatim")
    assert (problem.ref, problem.entry) == ("pin:0a0a", "sha256:" + RAW_USER)
    assert "byte for byte" in problem.message


def _pinned_journal(text: str):
    j = journal_ensure(session=session_ensure(tenant=tenant_ensure(slug="acme"), key="pins"))
    journal_append(journal=j, items=[message("system", text), message("assistant", "Ok.")])
    j.refresh_from_db()
    return j, Entry.objects.get(journal=j, seq=1)


def _state_with_pin(entry: Entry, text: str) -> dict:
    pin = {
        **_pin(text),
        "id": f"pin:{entry.entry_hash[:16]}",
        "support": [{"entry": entry.entry_hash}],
    }
    return {"facts": {pin["id"]: pin}, "folds": 1}


@pytest.mark.django_db
@pytest.mark.parametrize(("journal_text", "pin_text"), BOTH_WAYS)
def test_the_instruction_check_refuses_a_pin_one_whitespace_byte_off(journal_text, pin_text):
    j, entry = _pinned_journal(journal_text)
    assert entry.text == journal_text  # the journal keeps the bytes it was given
    assert instructions_check(j, _state_with_pin(entry, journal_text))["intact"] is True
    with pytest.raises(FoldRefused, match=f"text differs from entry sha256:{entry.entry_hash}"):
        instructions_check(j, _state_with_pin(entry, pin_text))


@pytest.mark.django_db
@pytest.mark.parametrize("journal_text", [pytest.param(t, id=case) for case, t, _ in WHITESPACE])
def test_a_fold_pins_the_entry_with_its_whitespace(journal_text):
    j, entry = _pinned_journal(journal_text)
    fold = ledger_fold(journal=j, writer=ScriptedWriter([])).fold
    assert fold is not None
    pin = fold.state_dict["facts"][f"pin:{entry.entry_hash[:16]}"]
    assert pin["text"].encode("utf-8") == journal_text.encode("utf-8")
    assert fold.manifest["instructions"]["pins"] == 1
