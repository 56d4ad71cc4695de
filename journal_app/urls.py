"""Operator UI routes of the journal (DESIGN.md section 8); included at ``""``.

``config/urls.py`` serves these in the ``journal`` namespace together with the audit app's
comment, annotation and audit-log routes and the ledger's fact comment, which keep their
``journal:`` names; the journal, the base app, imports neither.
"""

from __future__ import annotations

from django.urls import path

from journal_app import views

app_name = "journal"
_SCOPE = "t/<str:tenant>/<str:session>/<str:lane>/<str:branch>/"
urlpatterns = [
    path("", views.session_list, name="session_list"),
    path("t/<str:tenant>/<str:session>/", views.session_overview, name="session"),
    path(_SCOPE, views.timeline, name="timeline"),
    path(_SCOPE + "waterfall/", views.waterfall_view, name="waterfall"),
    path("e/<str:entry_hash>/", views.entry_detail, name="entry"),
    path("a/<str:tenant>/<str:content_hash>/", views.artifact_detail, name="artifact"),
    path("panel/close/", views.panel_close, name="panel_close"),
]
