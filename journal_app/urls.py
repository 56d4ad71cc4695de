"""Operator UI routes of the journal (DESIGN.md section 8); included at ``""``."""

from __future__ import annotations

from django.urls import path

from journal_app import views

app_name = "journal"
urlpatterns = [
    path("", views.session_list, name="session_list"),
    path("t/<str:tenant>/<str:session>/", views.session_detail, name="session"),
    path(
        "t/<str:tenant>/<str:session>/<str:lane>/<str:branch>/",
        views.timeline,
        name="timeline",
    ),
    path("e/<str:entry_hash>/", views.entry_detail, name="entry"),
    path("a/<str:tenant>/<str:content_hash>/", views.artifact_detail, name="artifact"),
]
