"""Operator UI routes of the journal (docs/design.md section 8); included at ``""``.

``config/urls.py`` serves these in the ``journal`` namespace together with the pages that
show data of the apps above (the audit app's timeline, entry, comment, annotation and
audit-log routes; the ledger's sessions list, session overview and fact comment), which keep
their ``journal:`` names and paths; the journal, the base app, imports neither
(docs/architecture.md, "Layers").
"""

from __future__ import annotations

from django.urls import path

from journal_app.views.artifact_page import artifact_detail
from journal_app.views.panel import panel_close
from journal_app.views.waterfall_page import waterfall_view

app_name = "journal"
_SCOPE = "t/<str:tenant>/<str:session>/<str:lane>/<str:branch>/"
urlpatterns = [
    path(_SCOPE + "waterfall/", waterfall_view, name="waterfall"),
    path("a/<str:tenant>/<str:content_hash>/", artifact_detail, name="artifact"),
    path("panel/close/", panel_close, name="panel_close"),
]
