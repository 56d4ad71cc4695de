"""The folded prefix of a build: the rounds read as metadata only (docs/design.md 6).

Pure module: no Django, no database. The service
(:func:`ledger_app.services.context_reads.read_for_build`) and the builder
(:class:`ledger_app.context.build_state.Builder`) find the prefix with the one rule here, so
the rounds the service read without their bodies are the rounds the builder leaves out whole.
"""

from __future__ import annotations

from collections.abc import Sequence

from journal_app.rounds import Round

#: The folded prefix ends where the entries back from the fold's end hold this many times the
#: protected tail (tokens, by their stored counts): the fold's kept window
#: (:func:`ledger_app.context.compaction.fold_cut`) is one tail, so it lies in the entries
#: read whole with room to spare.
PREFIX_WINDOW_TAILS = 2


def prefix_rounds(
    rounds: Sequence[Round], threshold: int, covered_upto: int
) -> tuple[int, list[Round]]:
    """``(first seq read whole, the folded prefix's API rounds)``.

    The prefix is the longest run of the oldest API rounds (message and event rounds passed
    over) that each end before the threshold and at or before ``covered_upto``, none the
    journal's last. The threshold starts at ``threshold`` and is lowered to the first seq
    of the first API round after the run until the two agree, so every API round after the
    prefix starts at or after the returned seq, and the rule applied again with that seq
    finds the same rounds (the service reads from it whole; the builder is given it).

    Args:
        rounds: the journal's rounds in order (:func:`journal_app.rounds.group_rounds`).
        threshold: a seq; rounds ending at or after it are not in the prefix.
        covered_upto: the last seq the fold covers.

    Returns:
        The seq from which every entry outside the prefix's rounds is read whole, and the
        prefix's rounds in order (``[]``: none).
    """
    while True:
        prefix: list[Round] = []
        after = threshold
        for r in rounds:
            if r.kind != "api":
                continue
            if r.last_seq < threshold and r.last_seq <= covered_upto and not r.at_tail:
                prefix.append(r)
                continue
            after = min(threshold, r.first_seq)
            break
        if after == threshold:
            return threshold, prefix
        threshold = after
