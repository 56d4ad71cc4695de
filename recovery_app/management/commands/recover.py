"""``manage.py recover SCOPE [--query Q]``: one recovery attempt, and its receipt printed."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from journal_app.services import JournalError, journals_for_scope
from recovery_app.lexical import QueryInvalid, parse_query
from recovery_app.models import Receipt
from recovery_app.services import recovery_run


class Command(BaseCommand):
    help = (
        "Run one recovery attempt on the journal of SCOPE (tenant/session/lane/branch) at its "
        "head: the trigger scan of the last 24 entries, or --query instead; print the receipt."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "scope", help="tenant/session/lane/branch (lane and branch default to main)"
        )
        parser.add_argument("--query", help="search these terms instead of scanning for a trigger")
        parser.add_argument("--json", action="store_true", help="print the receipt as JSON")

    def handle(self, *args: Any, **opts: Any) -> None:
        parts = opts["scope"].strip("/").split("/")
        if len(parts) < 2:
            raise CommandError(f"scope {opts['scope']!r}: give at least tenant/session")
        parts += ["main"] * (4 - len(parts))
        try:
            journals = journals_for_scope("/".join(parts))
        except JournalError as exc:
            raise CommandError(str(exc)) from None
        if opts["query"] is not None:
            try:
                parse_query(opts["query"])
            except QueryInvalid as exc:
                raise CommandError(str(exc)) from None
        receipt = recovery_run(journal=journals[0], query=opts["query"])
        if opts["json"]:
            self.stdout.write(json.dumps(receipt_dict(receipt), indent=1, ensure_ascii=False))
        else:
            self.stdout.write(receipt_text(receipt))


def receipt_dict(r: Receipt) -> dict[str, Any]:
    """Every field of a receipt, JSON-ready."""
    return {
        "receipt": r.pk,
        "scope": r.journal.scope_label,
        "kind": r.kind,
        "outcome": r.outcome,
        "reason": r.reason,
        "trigger": r.trigger,
        "snapshot": r.snapshot,
        "queries": r.queries,
        "reads": r.reads,
        "sources": r.sources,
        "claims": r.claims,
        "rejected_claims": r.rejected_claims,
        "recovered": r.recovered,
        "budget": r.budget,
        "usage": r.usage,
        "model_requests": r.model_requests,
        "analyst": r.analyst,
    }


def receipt_text(r: Receipt) -> str:
    """The receipt as a few aligned lines for a terminal."""
    snap = r.snapshot
    lines = [
        f"receipt    {r.pk} ({r.kind}) {r.journal.scope_label}",
        f"outcome    {r.outcome}: {r.reason}",
        f"trigger    {r.trigger.get('reason', '')}",
        f"snapshot   {snap.get('scope')} at revision {snap.get('revision')}"
        + ("" if snap.get("frozen") else " (not frozen)")
        if snap
        else "snapshot   none",
    ]
    for q in r.queries:
        leads = ", ".join(f"seq {x['seq']}" for x in q["leads"]) or "no leads"
        lines.append(f"query      round {q['round']} {q['query']!r}: {leads}")
    for rd in r.reads:
        status = "verified" if rd.get("ok") else "DISCARDED " + ", ".join(rd.get("failed") or [])
        lines.append(
            f"read       seq {rd['seq']} sha256:{rd['entry'][:16]}… {status}"
            + (f": {rd['reason']}" if rd.get("reason") else "")
        )
    for c in r.claims:
        lines.append(f"claim      [{c['status']}] {c['claim']}")
        for x in c["citations"]:
            lines.append(
                f"             seq {x['seq']} sha256:{x['entry'][:16]}… bytes {x['range'][0]}-{x['range'][1]}: {x['quote']!r}"
            )
    for c in r.rejected_claims:
        lines.append(f"rejected   {c.get('claim', '')!r}: {c['reason']}")
    u = r.usage
    lines.append(
        f"used       {u.get('rounds', 0)} rounds, {u.get('searches', 0)} searches, "
        f"{u.get('reads', 0)} reads, {u.get('sources', 0)} sources, {u.get('tokens', 0)} tokens, "
        f"{u.get('seconds', 0)} s; model requests {r.model_requests}"
    )
    return "\n".join(lines)
