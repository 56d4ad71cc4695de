"""The loss report as a measure: what the offline ledger keeps of folded entries.

Every corpus transcript (``tests/fixtures/corpus``) is parsed by its importer and folded whole,
without a database, the way :func:`ledger_app.services.ledger_fold` folds with the offline
writer: the pins, the offline writer's ops judged by the verifier's rules
(:func:`ledger_app.offline.check_item`) and then by the reducer. The active facts are rendered
as a model sees them (:func:`ledger_app.budget.render_fact`) and
:func:`ledger_app.loss.loss_report` compares the identifiers of the folded entries with that
text: an identifier is *kept* when it occurs in a fact, else *recoverable*: listed with the
first entry (hash and seq) that holds it, so recovery (docs/design.md 7) can read it back.

Figures, summed over the corpus: the share of file paths, commands and numbers kept (goals
90%, 90%, 60%; the baseline column is the public measurement of summary compaction: 9.8%,
0.2%, 1.9%), and the share accounted for (kept + listed recoverable + counted beyond the
listing limit = total; goal 100%). Entry hashes are stand-ins (sha256 of file and index): the
report compares text, hashes only name entries. Pure; no database.

Run: ``python -m bench loss_report`` or ``python -m bench.loss_report``.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "corpus"
#: kind -> (goal share, public summary-compaction baseline share)
GOALS = {"path": (0.90, 0.098), "command": (0.90, 0.002), "number": (0.60, 0.019)}


def sources() -> list[Path]:
    """The corpus transcripts: every file of a format folder, an OpenCode export as one."""
    out: list[Path] = []
    for folder in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
        if folder.name == "opencode-export":
            out += sorted(p for p in folder.iterdir() if p.is_dir())
        else:
            out += sorted(p for p in folder.iterdir() if p.is_file())
    return out


def views_of(path: Path) -> list[Any]:
    """The entries of one transcript as :class:`ledger_app.entry_view.EntryView`."""
    from journal_app.content import content_text
    from journal_app.formats import parse_path
    from ledger_app.entry_view import EntryView

    session = parse_path(path)
    return [
        EntryView(
            seq=i,
            entry_hash=hashlib.sha256(f"{path.name}:{i}".encode()).hexdigest(),
            kind=p.kind,
            role=p.role,
            text=content_text(p.kind, p.content),
            content=p.content,
            tool_call_id=p.tool_call_id,
            tool_name=p.tool_name,
            derived=p.derived,
            is_error=bool(p.content.get("is_error")) if p.kind == "tool_result" else False,
            meta=p.metadata,
        )
        for i, p in enumerate(session.entries, 1)
    ]


def reduce_one_fold(views: list[Any], ops: list[dict[str, Any]]) -> Any:
    """The reducer's :class:`~ledger_app.reducer.Reduction` of ``ops`` as fold 1 over
    ``views`` (every view is evidence of that fold), from the empty state."""
    from ledger_app import reducer
    from ledger_app.pin_facts import required_pins

    evidence = {
        v.entry_hash: {
            "seq": v.seq,
            "kind": v.kind,
            "role": v.role,
            "is_error": v.is_error,
            "derived": v.derived,
            "fold": 1,
        }
        for v in views
    }
    delta = {
        "fold": 1,
        "revision": views[-1].seq if views else 0,
        "evidence": evidence,
        "required_pins": required_pins(views),
        "lifecycle_rules": reducer.LIFECYCLE_RULES,
        "ops": ops,
    }
    return reducer.apply_delta(copy.deepcopy(reducer.EMPTY_STATE), delta)


def ledger_text(views: list[Any]) -> str:
    """The rendered active facts of one offline fold over ``views``."""
    from ledger_app.budget import render_fact
    from ledger_app.offline import EvidenceIndex, OfflineWriter, check_item
    from ledger_app.pin_facts import is_pin_source, pin_fact

    index = EvidenceIndex(views)
    proposed = OfflineWriter().propose(views, {})
    kept = [op for op in proposed if check_item(op, index, {}).accepted]
    ops = [{"op": "add", "fact": pin_fact(v)} for v in views if is_pin_source(v)] + kept
    state = reduce_one_fold(views, ops).state
    facts = [f for f in state["facts"].values() if f.get("lifecycle") == "active"]
    return "\n".join(render_fact(f) for f in facts)


def measure(path: Path) -> dict[str, Any]:
    """The loss report of one transcript folded whole (see the module docstring)."""
    from ledger_app.loss import loss_report

    views = views_of(path)
    report = loss_report(views, ledger_text(views))
    return {
        "source": str(path.relative_to(CORPUS)),
        "entries": len(views),
        "total": report.total,
        "kept": report.kept,
        "listed": len(report.lost),
        "beyond_listing": report.lost_truncated,
        "by_kind": report.by_kind,
        "lost": report.lost,
    }


def run() -> dict[str, Any]:
    """Measure every transcript, print the shares, return ``{"rows", "summary"}``."""
    import django

    django.setup()
    rows = [measure(p) for p in sources()]
    summary = []
    for kind, (goal, baseline) in GOALS.items():
        total = sum(r["by_kind"].get(kind, {}).get("total", 0) for r in rows)
        kept = sum(r["by_kind"].get(kind, {}).get("kept", 0) for r in rows)
        share = kept / total if total else None
        print(
            f"loss report: {kind:8} kept {kept:>6,} of {total:>6,} = {share or 0:.1%} (goal {goal:.0%})"
        )
        summary.append(
            {
                "metric": f"{kind}s of folded entries kept in ledger facts",
                "what": f"share of the {kind}s found in folded corpus entries that a ledger "
                "fact quotes | baseline: the published share a summary compaction keeps "
                "(a fixed figure, not measured here)",
                "value": round(share * 100, 1) if share is not None else None,
                "unit": "%",
                "baseline": baseline * 100,
                "ratio": round(share / baseline, 1) if share is not None else None,
                "target": f">= {goal * 100:.0f}",
                "met": share is not None and share >= goal,
            }
        )
    total = sum(r["total"] for r in rows)
    accounted = sum(r["kept"] + r["listed"] + r["beyond_listing"] for r in rows)
    print(
        f"loss report: {accounted:,} of {total:,} identifiers accounted (kept or listed recoverable)"
    )
    summary.append(
        {
            "metric": "identifiers accounted for (kept, or listed with their entry)",
            "what": "identifiers of folded corpus entries either quoted by a fact or listed "
            "as recoverable with their entry | no baseline",
            "value": round(accounted / total * 100, 1) if total else None,
            "unit": "%",
            "target": "= 100",
            "met": accounted == total,
        }
    )
    for r in rows:
        print(
            f"  {r['source']}: {r['kept']:,}/{r['total']:,} kept, {r['listed']:,} listed recoverable"
        )
    return {"rows": [{k: v for k, v in r.items() if k != "lost"} for r in rows], "summary": summary}


if __name__ == "__main__":
    import os
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    run()
