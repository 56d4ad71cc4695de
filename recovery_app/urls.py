"""Operator UI routes of recovery (DESIGN.md section 8); included at ``"recovery/"``."""

from __future__ import annotations

from django.urls import path

from recovery_app import views
from recovery_app.search_views import content_search

app_name = "recovery"
_SCOPE = "<str:tenant>/<str:session>/<str:lane>/<str:branch>/"
urlpatterns = [
    path("search/", content_search, name="search"),
    path(_SCOPE, views.receipt_list, name="receipts"),
    path(_SCOPE + "<int:receipt>/", views.receipt_detail, name="receipt"),
]
