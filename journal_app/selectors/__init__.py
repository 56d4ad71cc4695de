"""Tenant-filtered reads of the journal for the operator UI: the public face of the package.

Every read a view makes of a tenant's data goes through here, so the membership filter is
written once (:mod:`.access`: a user sees the tenants they hold a membership of, superusers
all; anything else answers ``Http404``, never 403). The reads live in modules named for
what they read; this module only re-exports them, so callers write ``selectors.<read>``:

* :mod:`.access`: the tenant filter, one session, journal, entry or artifact of the user's,
  the user's role, who may read the audit log or export;
* :mod:`.entries`: a journal's entries for the pages (the timeline's page and rounds, the
  filter expression as SQL, times, token buckets, neighbours, entries by hash);
* :mod:`.costs`: the computed cost of journals, sessions and tenants;
* :mod:`.waterfall_spans`: one page of a journal's waterfall.
"""

from __future__ import annotations

from journal_app.selectors.access import (
    AUDIT_LOG_PERMISSION,
    FOLDING_ROLES,
    User,
    artifact_for_user,
    entry_for_user,
    get_journal_for_user,
    get_journal_with_role,
    get_session_for_user,
    may_export,
    may_read_audit_log,
    parse_hash,
    tenants_for_user,
)
from journal_app.selectors.costs import journal_costs, model_prices, session_costs, tenant_costs
from journal_app.selectors.entries import (
    ROUND_WINDOW,
    JournalEntries,
    entries_by_hash,
    entry_filter,
    entry_started,
    journal_start,
    neighbour_hashes,
    page_rounds,
    paired_entries,
    rounds_for_seqs,
    token_buckets,
    unanswered_calls,
)
from journal_app.selectors.waterfall_spans import (
    WATERFALL_ENTRIES,
    WATERFALL_MARGIN,
    journal_waterfall,
)

__all__ = [
    "AUDIT_LOG_PERMISSION",
    "FOLDING_ROLES",
    "ROUND_WINDOW",
    "WATERFALL_ENTRIES",
    "WATERFALL_MARGIN",
    "JournalEntries",
    "User",
    "artifact_for_user",
    "entries_by_hash",
    "entry_filter",
    "entry_for_user",
    "entry_started",
    "get_journal_for_user",
    "get_journal_with_role",
    "get_session_for_user",
    "journal_costs",
    "journal_start",
    "journal_waterfall",
    "may_export",
    "may_read_audit_log",
    "model_prices",
    "neighbour_hashes",
    "paired_entries",
    "page_rounds",
    "parse_hash",
    "rounds_for_seqs",
    "session_costs",
    "tenant_costs",
    "tenants_for_user",
    "token_buckets",
    "unanswered_calls",
]
