"""The rules the reducer judges each op by (the package docstring lists them, docs/design.md 5.2, 5.5).

Pure module: no Django, no database. Each ``check_*`` returns the reason an op is rejected
(``""`` when it passes); :func:`demote`, :func:`end_by_key` and :func:`end_carried` change
the facts they are given in place (the lifecycles that end); :func:`check_pin` raises
:class:`~ledger_app.reducer.records.PinViolation`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ledger_app.facts import (
    AUTHORITATIVE_ROLES,
    AUTHORS,
    CATEGORIES,
    CONFIDENCES,
    LIFECYCLES,
    PRIORITIES,
    Fact,
)
from ledger_app.reducer.reads import carried_ids
from ledger_app.reducer.records import PinViolation


def check_fact_shape(fact: Any) -> str:
    """Why ``fact`` is not a well-formed fact (its fields and their values), ``""`` when it is."""
    if not isinstance(fact, dict):
        return "fact must be an object"
    for name, allowed in (
        ("category", CATEGORIES),
        ("priority", PRIORITIES),
        ("confidence", CONFIDENCES),
    ):
        if fact.get(name) not in allowed:
            return f"field {name!r}: {fact.get(name)!r} is not one of {', '.join(allowed)}"
    if fact.get("lifecycle", "active") not in LIFECYCLES:
        return f"field 'lifecycle': {fact.get('lifecycle')!r} is not one of {', '.join(LIFECYCLES)}"
    if not isinstance(fact.get("text"), str) or not fact["text"]:
        return "field 'text': a fact needs non-empty text"
    support = fact.get("support")
    if not isinstance(support, list) or not support:
        return "field 'support': a fact needs at least one supporting entry"
    for s in support:
        if not isinstance(s, dict) or not isinstance(s.get("entry"), str):
            return "field 'support': each item needs an 'entry' hash"
    if fact.get("author", "writer") not in AUTHORS:
        return f"field 'author': {fact.get('author')!r} is not one of {', '.join(AUTHORS)}"
    return ""


def unresolved_support(fact: Fact, evidence: Mapping[str, Mapping[str, Any]]) -> str:
    """Why a support hash of ``fact`` is not in ``evidence`` (bad input), ``""`` when all are."""
    for s in fact["support"]:
        if s["entry"] not in evidence:
            return (
                f"support sha256:{s['entry']} does not resolve to a raw entry of this scope "
                "at or before the fold's revision"
            )
    return ""


def check_support(fact: Fact, evidence: Mapping[str, Mapping[str, Any]]) -> str:
    """Why ``fact`` cites a derived entry (a summary or compaction marker), ``""`` otherwise."""
    for s in fact["support"]:
        info = evidence[s["entry"]]
        if info.get("derived"):
            return f"support sha256:{s['entry']} is a summary or compaction marker, never valid support"
    return ""


def check_confidence(fact: Fact, evidence: Mapping[str, Mapping[str, Any]]) -> str:
    """Why ``fact``'s confidence is not supported: ``verified`` needs a tool result, and a
    failed one supports no success claim (docs/design.md 5.2, 5.3); ``""`` when it is."""
    infos = [evidence[s["entry"]] for s in fact["support"]]
    if fact["confidence"] == "verified" and not fact.get("pin"):
        results = [i for i in infos if i.get("kind") == "tool_result"]
        if not results:
            return (
                "confidence 'verified' needs a tool result that demonstrates it; "
                "an assistant statement stays 'reported'"
            )
        # a search that found nothing exits non-zero: code states "no match", not a success
        no_match = fact.get("outcome") == "no_match" and fact.get("author") in ("code", "offline")
        if (
            fact["category"] != "blocker"
            and not no_match
            and all(i.get("is_error") for i in results)
        ):
            return "a failed tool result cannot support a success claim"
    return ""


def authoritative_later(
    evidence_ids: Iterable[str], evidence: Mapping[str, Mapping[str, Any]], after_fold: int
) -> bool:
    """Whether ``evidence_ids`` hold an authoritative message (user, developer, system; not
    derived, not a harness record) from a fold after ``after_fold``."""
    for h in evidence_ids:
        info = evidence.get(h)
        if (
            info
            and info.get("kind") == "message"
            and info.get("role") in AUTHORITATIVE_ROLES
            and not info.get("derived")
            and not info.get("harness")  # harness records speak for no one
            and int(info.get("fold", 0)) > after_fold
        ):
            return True
    return False


def completion(evidence_ids: Iterable[str], evidence: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether ``evidence_ids`` hold a tool result that did not fail (completion evidence)."""
    for h in evidence_ids:
        info = evidence.get(h)
        if info and info.get("kind") == "tool_result" and not info.get("is_error"):
            return True
    return False


def demote(fact: Fact) -> None:
    """A superseded or closed P1/P2 fact becomes P3 history (docs/design.md 5.5)."""
    if fact.get("priority") in ("P1", "P2") and not fact.get("pin"):
        fact["was_priority"] = fact["priority"]
        fact["priority"] = "P3"


def end_by_key(old: Fact, new: Fact, fold: int, evidence: Mapping[str, Mapping[str, Any]]) -> str:
    """End ``old`` because ``new`` holds its command key; returns the lifecycle it ends in."""
    if old.get("outcome") == "failure" and new.get("outcome") == "success":
        shown = [
            s["entry"]
            for s in new["support"]
            if evidence.get(s["entry"], {}).get("kind") == "tool_result"
        ]
        old["lifecycle"] = "closed"
        old["ended_by"] = {
            "fold": fold,
            "evidence": shown or [s["entry"] for s in new["support"]],
            "by": new["id"],
        }
    else:
        old["lifecycle"] = "superseded"
        old["superseded_by"] = new["id"]
    demote(old)
    return str(old["lifecycle"])


def end_carried(
    facts: dict[str, Fact], pin_id: str, evidence: list[str], fold: int, seq: Any
) -> list[str]:
    """A request that closes ends the active P1 facts that carried it out (docs/design.md 5.5:
    its file edits' outcomes and its ``done:`` record drop to P3 history, cited by the
    closed pin, which a context shows as one "done at seq N" line); a consequential action
    other than a file edit (a migration, a deploy) stays P1 until superseded. Returns the
    ids ended."""
    ended = []
    for fid in sorted(carried_ids(pin_id, evidence)):
        fact = facts.get(fid)
        if (
            fact is None
            or fact.get("pin")
            or fact.get("lifecycle", "active") != "active"
            or fact.get("priority") != "P1"
            or fact.get("outcome") == "failure"
            # a change outside the conversation that lasts (a migration, a deploy, a push)
            # stays P1 until superseded; a file's edit is in the file, its request done
            or (
                fact.get("consequential")
                and not str(fact.get("command_key", "")).startswith("edit:")
            )
        ):
            continue
        fact["lifecycle"] = "closed"
        fact["ended_by"] = {"fold": fold, "evidence": list(evidence), "by": pin_id}
        if isinstance(seq, int):
            fact["ended_by"]["seq"] = seq
        demote(fact)
        ended.append(fid)
    return ended


def check_pin(facts: Mapping[str, Fact], entry: str, text: str) -> None:
    """Raise :class:`PinViolation` unless an active P0 pin cites ``entry`` with ``text`` exactly."""
    by_id = facts.get(f"pin:{entry[:16]}")
    candidates = [by_id] if by_id is not None and by_id.get("pin") else facts.values()
    found = False
    for f in candidates:
        if f.get("pin") and any(s["entry"] == entry for s in f["support"]):
            found = True
            if f["text"] != text:
                raise PinViolation(entry, "pin text differs from the journal entry")
            if f["priority"] != "P0":
                raise PinViolation(entry, "pin is not P0")
    if not found:
        raise PinViolation(entry, "required pin is missing")
