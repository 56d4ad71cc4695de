"""The integrity checks of each fold against the journal: head, chain, ranges, manifest,
pins and support (the module docstring of :mod:`ledger_app.services.integrity` says what each
re-derives). Read-only: :class:`FoldChecker` reads the journal's entries once
(:func:`~ledger_app.services.integrity_rows.entry_rows`) and collects :class:`Problem` s.
"""

from __future__ import annotations

from typing import Any

from journal_app.hashing import display
from journal_app.models import Journal
from ledger_app.models import Fold
from ledger_app.pins import GOVERNING, REQUEST, attachment_problems
from ledger_app.services.entries import range_hash
from ledger_app.services.integrity_rows import EntryRow, Problem, entry_rows


def _cited(ops: list[Any]) -> list[str]:
    cited: list[str] = []
    for op in ops:
        if not isinstance(op, dict):
            continue
        fact = op.get("fact")
        if isinstance(fact, dict) and isinstance(fact.get("support"), list):
            cited += [
                s["entry"]
                for s in fact["support"]
                if isinstance(s, dict) and isinstance(s.get("entry"), str)
            ]
        if isinstance(op.get("evidence"), list):
            cited += [h for h in op["evidence"] if isinstance(h, str)]
    return cited


class FoldChecker:
    """The checks of one journal's folds, in fold order, collecting :attr:`problems`.

    Built from the journal (its entries read once, the figures problems first); each
    method checks one aspect of a fold and adds what it finds (:meth:`add`); nothing is
    written.
    """

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.by_seq, self.by_hash, self.problems = entry_rows(journal)

    def add(self, check: str, detail: str, **where: Any) -> None:
        self.problems.append(Problem(check, detail, **where))

    # -- journal head -------------------------------------------------------------------
    def head(self, folds: list[Fold]) -> None:
        j = self.journal
        last = max(self.by_seq) if self.by_seq else 0
        last_hash = self.by_seq[last].entry_hash if last else ""
        if (j.head_seq, j.head_hash) != (last, last_hash):
            self.add(
                "journal head",
                f"the journal's head is seq {j.head_seq} {display(j.head_hash)}; its entries "
                f"end at seq {last} {display(last_hash)}",
            )
        revision = max((f.revision for f in folds), default=0)
        if revision > min(j.head_seq, last):
            fold = max(folds, key=lambda f: f.revision)
            self.add(
                "journal head",
                f"fold {fold.number} saw the journal at revision {revision}, but the journal "
                f"now ends at seq {min(j.head_seq, last)}: entries were removed (a truncated "
                "journal)",
                fold=fold.number,
            )

    # -- one fold -------------------------------------------------------------------------
    def fold(self, fold: Fold, delta: dict[str, Any], prev: Fold | None, expected: int) -> None:
        n = fold.number
        if n != expected:
            self.add("fold chain", f"fold number {n}, expected {expected}", fold=n)
        if fold.previous_id != (prev.pk if prev else None):
            self.add(
                "fold chain",
                f"names fold pk {fold.previous_id} as its predecessor, not fold "
                f"{prev.number if prev else '(none)'}",
                fold=n,
            )
        if delta.get("fold") != n:
            self.add("fold chain", f"its delta says fold {delta.get('fold')!r}", fold=n)
        if delta.get("revision") != fold.revision:
            self.add(
                "fold chain",
                f"its delta says revision {delta.get('revision')!r}, the fold {fold.revision}",
                fold=n,
            )
        manifest = fold.manifest if isinstance(fold.manifest, dict) else {}
        for key, want in (
            ("revision", fold.revision),
            ("previous_fold", prev.number if prev else None),
        ):
            if key in manifest and manifest[key] != want:
                self.add("manifest", f"{key} is {manifest[key]!r}, expected {want!r}", fold=n)
        if "outcome" in manifest and manifest["outcome"] != fold.outcome:
            self.add(
                "manifest",
                f"outcome {manifest['outcome']!r}, the fold's is {fold.outcome!r}",
                fold=n,
            )
        self.support(fold, delta)

    def range(self, fold: Fold, delta: dict[str, Any], last_end: int, origin: Fold | None) -> None:
        n = fold.number
        start, end = fold.seq_start, fold.seq_end
        if start is None or end is None:
            self.add("ranges", "a range fold without seq bounds", fold=n)
            return
        if fold.kind == Fold.Kind.FOLD and start != last_end + 1:
            self.add(
                "ranges",
                f"starts at seq {start}; the previous range fold ended at {last_end}",
                fold=n,
            )
        if fold.kind == Fold.Kind.REFOLD and (
            origin is None or (origin.seq_start, origin.seq_end) != (start, end)
        ):
            self.add(
                "ranges",
                f"a refold of fold {delta.get('refold_of')!r} must cover that fold's range, "
                f"not seq {start}-{end}",
                fold=n,
            )
        if not 1 <= start <= end <= fold.revision:
            self.add(
                "ranges", f"seq {start}-{end} is not within 1..revision {fold.revision}", fold=n
            )
        covered = [self.by_seq.get(s) for s in range(start, end + 1)]
        missing = [s for s, r in zip(range(start, end + 1), covered, strict=True) if r is None]
        if missing:
            self.add(
                "ranges",
                f"covers seq {start}-{end}, but the journal has no entry at seq {missing[0]}",
                fold=n,
            )
        rows = [r for r in covered if r is not None]
        hashes = [r.entry_hash for r in rows]
        key = range_hash(hashes)
        manifest = fold.manifest if isinstance(fold.manifest, dict) else {}
        stored_key = fold.range_hash if fold.kind == Fold.Kind.FOLD else manifest.get("range_hash")
        if fold.kind == Fold.Kind.REFOLD and origin is not None:
            if manifest.get("refold_of") != origin.number:
                self.add(
                    "manifest",
                    f"refold_of {manifest.get('refold_of')!r}, the delta says {origin.number}",
                    fold=n,
                )
        if stored_key != key:
            self.add(
                "ranges",
                f"range_hash {stored_key} does not match the entries at seq {start}-{end} "
                f"(re-derived {key})",
                fold=n,
            )
        if fold.kind == Fold.Kind.FOLD and manifest.get("range_hash") != fold.range_hash:
            self.add(
                "manifest",
                f"range_hash {manifest.get('range_hash')!r}, the fold's is {fold.range_hash}",
                fold=n,
            )
        covered_m = manifest.get("covered")
        if not isinstance(covered_m, dict):
            self.add("manifest", "no 'covered' section", fold=n)
        else:
            for name, want in (
                ("seq_start", start),
                ("seq_end", end),
                ("entries", len(rows)),
                ("entry_hashes", hashes),
            ):
                if covered_m.get(name) != want:
                    shown = f"{len(want)} hashes" if name == "entry_hashes" else repr(want)
                    self.add(
                        "manifest",
                        f"covered.{name} differs from the journal (re-derived: {shown})",
                        fold=n,
                    )
        tokens = manifest.get("tokens")
        if (
            fold.kind == Fold.Kind.FOLD
            and isinstance(tokens, dict)
            and "covered" in tokens
            and tokens["covered"] != sum(r.token_count for r in rows)
        ):
            self.add(
                "manifest",
                f"tokens.covered {tokens['covered']!r}, the covered entries hold "
                f"{sum(r.token_count for r in rows)}",
                fold=n,
            )
        self.pins(fold, delta, rows)

    def pins(self, fold: Fold, delta: dict[str, Any], rows: list[EntryRow]) -> None:
        """The delta's required pins and pin facts against the journal, under the pin rules
        the delta names (``delta["pin_rules"]``, 1 when absent: :data:`PIN_RULES`)."""
        n = fold.number
        rules = int(delta.get("pin_rules") or 1)

        def pin_text(r: EntryRow) -> str | None:
            if rules < 2:
                return r.legacy_pin_text
            return r.pin_text if rules < 3 else r.pin_text3

        sources = {r.entry_hash: r for r in rows if pin_text(r) is not None}
        if fold.kind == Fold.Kind.FOLD:
            want = [{"entry": h, "text": pin_text(r)} for h, r in sources.items()]
            if delta.get("required_pins") != want:
                self.add(
                    "pins",
                    f"the delta's required pins differ from the {len(want)} authoritative "
                    "messages of the range, verbatim",
                    fold=n,
                )
        pinned: set[str] = set()
        for op in delta.get("ops", []):
            fact = op.get("fact") if isinstance(op, dict) else None
            if not (isinstance(fact, dict) and fact.get("pin")):
                continue
            support = fact.get("support") or [{}]
            h = support[0].get("entry") if isinstance(support[0], dict) else None
            source = self.by_hash.get(h or "")
            fact_id = str(fact.get("id"))
            if source is None or pin_text(source) is None:
                self.add(
                    "pins",
                    "a pin citing an entry that is not an authoritative message of this journal",
                    fold=n,
                    fact=fact_id,
                    entry=h,
                )
            elif fact.get("text") != pin_text(source):
                self.add(
                    "pins",
                    f"pin text differs from entry seq {source.seq}",
                    fold=n,
                    fact=fact_id,
                    entry=h,
                )
            elif fact_id != f"pin:{source.entry_hash[:16]}" or fact.get("priority") != "P0":
                self.add(
                    "pins",
                    "a pin's id or priority is not the one code writes",
                    fold=n,
                    fact=fact_id,
                )
            elif rules >= 3 and fact.get("pin_kind") not in (GOVERNING, REQUEST):
                self.add("pins", "a pin without its pin_kind", fold=n, fact=fact_id, entry=h)
            elif rules >= 3:
                for problem in attachment_problems(fact, source.legacy_pin_text):
                    self.add("pins", f"pin {problem}", fold=n, fact=fact_id, entry=h)
            if h:
                pinned.add(h)
        if fold.kind == Fold.Kind.FOLD and pinned != set(sources):
            lost = sorted(set(sources) - pinned)
            self.add(
                "pins",
                "the range's authoritative messages and the delta's pin ops differ"
                + (f" (no pin for seq {sources[lost[0]].seq})" if lost else ""),
                fold=n,
                entry=lost[0] if lost else None,
            )

    def support(self, fold: Fold, delta: dict[str, Any]) -> None:
        n = fold.number
        evidence = delta.get("evidence")
        if not isinstance(evidence, dict):
            self.add("support", "the delta has no evidence index", fold=n)
            return
        ops = delta.get("ops") if isinstance(delta.get("ops"), list) else []
        for h in dict.fromkeys(_cited(ops)):
            if h not in evidence:
                self.add("support", "cited but not in the delta's evidence", fold=n, entry=h)
        for h, info in evidence.items():
            row = self.by_hash.get(h)
            if row is None:
                self.add(
                    "support",
                    f"sha256:{h} is not an entry of this journal (any more)",
                    fold=n,
                    entry=h,
                )
                continue
            if row.seq > fold.revision:
                self.add(
                    "support",
                    f"entry seq {row.seq} is after the fold's revision {fold.revision}",
                    fold=n,
                    entry=h,
                )
            want = {
                "seq": row.seq,
                "kind": row.kind,
                "role": row.role,
                "is_error": row.is_error,
                "derived": row.derived,
            }
            got = {k: info.get(k) for k in want} if isinstance(info, dict) else {}
            if got != want:
                self.add(
                    "support",
                    f"the evidence index describes entry seq {row.seq} as {got}, the journal "
                    f"as {want}",
                    fold=n,
                    entry=h,
                )
            if fold.kind == Fold.Kind.FOLD and fold.seq_start is not None:
                inside = fold.seq_start <= row.seq <= (fold.seq_end or 0)
                if inside and isinstance(info, dict) and info.get("fold") != n:
                    self.add(
                        "support",
                        f"entry seq {row.seq} is in this fold's range; the evidence says fold "
                        f"{info.get('fold')!r}",
                        fold=n,
                        entry=h,
                    )
