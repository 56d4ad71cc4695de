"""Every state change the proxy makes, through the journal's and ledger's own services.

A proxied call runs, in order (``proxy_app/forwarding.py`` calls each):

* :mod:`.scope`: ``proxy_authenticate`` (the key) and ``proxy_scope`` (tenant, session from
  the header or derived from the first system and user message, lane, branch);
* :mod:`.sent_request`: ``request_read`` (the body checked, its history as items),
  ``budgets_for`` (working budget and window) and ``request_tokens``;
* :mod:`.conversation`: ``conversation_record`` places the resent history in the journal:
  only the new suffix is appended (``journal_app.services.journal_append``), the same
  history twice appends nothing, and a history that diverges opens a new branch at the
  divergence point (:mod:`.placement`, through the prefix index :mod:`.prefix_index`);
* :mod:`.compaction`: ``request_compact`` decides whether the request goes out as sent or
  as the context ``ledger_app.services.context.context_build`` makes (the one context
  service); folds happen there and in the automatic fold after an append, never here;
* :mod:`.answers`: ``answer_record`` journals the upstream's answer (text, tool calls,
  provider usage), complete or interrupted; ``previous_history`` reads the history a
  Responses ``previous_response_id`` continues.

:mod:`.locks` holds the session lock every placement takes. The names below are re-exported
for the proxy's callers (``proxy_app.forwarding``, ``proxy_app.follow``).
"""

from proxy_app.services.answers import (
    answer_record,
    previous_history,
    provider_figures,
    upstream_failure_record,
)
from proxy_app.services.compaction import Prepared, request_compact
from proxy_app.services.conversation import conversation_record
from proxy_app.services.locks import session_lock, sqlite_serial
from proxy_app.services.placement import Recorded
from proxy_app.services.prefix_index import RequestPrefix
from proxy_app.services.scope import (
    HEADER_BRANCH,
    HEADER_BUDGET,
    HEADER_KEY,
    HEADER_LANE,
    HEADER_SESSION,
    ProxyScope,
    proxy_authenticate,
    proxy_scope,
)
from proxy_app.services.sent_request import budgets_for, request_read, request_tokens

__all__ = [
    "HEADER_BRANCH",
    "HEADER_BUDGET",
    "HEADER_KEY",
    "HEADER_LANE",
    "HEADER_SESSION",
    "Prepared",
    "ProxyScope",
    "Recorded",
    "RequestPrefix",
    "answer_record",
    "budgets_for",
    "conversation_record",
    "previous_history",
    "provider_figures",
    "upstream_failure_record",
    "proxy_authenticate",
    "proxy_scope",
    "request_compact",
    "request_read",
    "request_tokens",
    "session_lock",
    "sqlite_serial",
]
