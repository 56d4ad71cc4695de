"""Operator UI pages of the journal (docs/design.md section 8): thin function views, one module
per page, and the pieces every app's htmx views share.

* :mod:`.timeline_page` and :mod:`.entry_page`: the context of the timeline and of one
  entry (the pages themselves are the audit app's, which adds the comments it owns);
* :mod:`.artifact_page`: one artifact; :mod:`.waterfall_page`: one scope's waterfall;
* :mod:`.htmx`: the typed request and the fragment rule (``page.html#region`` for an htmx
  request); :mod:`.panel`: the side panel; :mod:`.scope_urls`: a scope's URL kwargs;
  :mod:`.query_params`: lenient ``?page=``, numbers and ranges.

Reads go through :mod:`journal_app.selectors` (tenant filter, ``Http404``). Every htmx link
and form keeps a real ``href``/``action``, so the pages work without JavaScript (STYLE.md 4).
"""
