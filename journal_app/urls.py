"""Operator UI routes of the journal and the audit app (DESIGN.md section 8); included at ``""``."""

from __future__ import annotations

from django.urls import path

from audit_app import views as audit_views
from journal_app import views

app_name = "journal"
_SCOPE = "t/<str:tenant>/<str:session>/<str:lane>/<str:branch>/"
urlpatterns = [
    path("", views.session_list, name="session_list"),
    path("t/<str:tenant>/<str:session>/", views.session_overview, name="session"),
    path("t/<str:tenant>/<str:session>/annotate/", audit_views.annotate, name="annotate"),
    path(_SCOPE, views.timeline, name="timeline"),
    path(_SCOPE + "comments/", audit_views.fact_comment, name="fact_comment"),
    path("e/<str:entry_hash>/", views.entry_detail, name="entry"),
    path("e/<str:entry_hash>/comments/", audit_views.entry_comment, name="entry_comment"),
    path("a/<str:tenant>/<str:content_hash>/", views.artifact_detail, name="artifact"),
    path("audit/<str:tenant>/", audit_views.audit_log, name="audit_log"),
]
