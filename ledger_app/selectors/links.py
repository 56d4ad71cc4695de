"""Support links: a fact's cited entries as links to the raw entry page and the API (the one
helper of every page and endpoint that shows evidence; docs/design.md 5.1 and 8).

No database access: ``known`` maps hex entry hashes to the
:class:`~journal_app.models.Entry` rows read once by
:func:`ledger_app.selectors.entries_known`. Re-exported by
:mod:`ledger_app.selectors.presenters`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from journal_app.hashing import display
from journal_app.models import Entry


def fact_dom_id(fact_id: str) -> str:
    """A stable HTML id for a fact (fact ids hold ``:`` and other characters ids avoid)."""
    return "fact-" + hashlib.sha256(fact_id.encode("utf-8")).hexdigest()[:12]


@dataclass
class SupportLink:
    """One support item of a fact (or one evidence hash), resolved in the fact's scope.

    ``url`` opens the raw entry page (cited chunk or quote highlighted); ``api_url`` reads
    it over the API. ``entry`` is ``None`` when the hash names no entry of this journal
    (never valid support, docs/design.md 5.1).
    """

    hash: str
    url: str
    api_url: str
    quote: str = ""
    chunk: int | None = None
    entry: Entry | None = None

    def to_dict(self) -> dict[str, Any]:
        """The API's ``SupportOut``."""
        e = self.entry
        return {
            "entry": self.hash,
            "url": self.api_url,
            "resolved": e is not None,
            "seq": e.seq if e else None,
            "kind": e.kind if e else None,
            "role": e.role if e else None,
            "quote": self.quote or None,
            "chunk": self.chunk,
        }


def support_hashes(facts: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every hex entry hash the facts' support cites (for one ``entries_known`` query)."""
    return [
        str(s.get("entry", ""))
        for f in facts
        for s in f.get("support", []) or []
        if isinstance(s, dict)
    ]


def evidence_fact(hashes: Iterable[Any]) -> dict[str, Any]:
    """A fact-shaped holder of bare evidence hashes, for :func:`support_links`."""
    return {"support": [{"entry": str(h)} for h in hashes]}


def support_links(fact: Mapping[str, Any] | None, known: Mapping[str, Entry]) -> list[SupportLink]:
    """The support of ``fact`` as links, in order (the one helper of UI and API)."""
    links = []
    for item in (fact or {}).get("support", []) or []:
        if not isinstance(item, dict):
            continue
        digest = str(item.get("entry", ""))
        chunk = item.get("chunk")
        if chunk is None and isinstance(item.get("chunks"), list) and item["chunks"]:
            chunk = item["chunks"][0]
        chunk = chunk if isinstance(chunk, int) and not isinstance(chunk, bool) else None
        quote = item.get("quote") if isinstance(item.get("quote"), str) else ""
        query: dict[str, Any] = {}
        if chunk is not None:
            query["chunk"] = chunk
        chunks = item.get("chunks")
        if isinstance(chunks, list) and len(chunks) == 2 and all(type(c) is int for c in chunks):
            query["chunks"] = f"{chunks[0]}-{chunks[1]}"
        span = item.get("range")
        if isinstance(span, list) and len(span) == 2 and all(type(c) is int for c in span):
            query["bytes"] = f"{span[0]}-{span[1]}"
        if quote:
            query["quote"] = quote
        url = reverse("journal:entry", args=[display(digest)])
        if query:
            url += "?" + urlencode(query)
        if quote:
            url += "#quote"
        elif chunk is not None:
            url += f"#chunk-{chunk}"
        links.append(
            SupportLink(
                hash=display(digest),
                url=url,
                api_url=f"/api/v1/entries/{display(digest)}",
                quote=quote,
                chunk=chunk,
                entry=known.get(digest),
            )
        )
    return links
