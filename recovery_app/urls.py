"""Operator UI routes of recovery (docs/design.md section 8); ``urlpatterns`` is included at
``"recovery/"``.

``ledger_pages`` is the session export (:mod:`recovery_app.export_views`: it carries the
receipts): ``config/urls.py`` serves it in the ``ledger`` namespace at its historical name
and path (``ledger:export``, ``ledger/<tenant>/<session>/export/``).
"""

from __future__ import annotations

from django.urls import path

from recovery_app import export_views, views
from recovery_app.search_views import content_search

app_name = "recovery"
ledger_pages = [
    path("<str:tenant>/<str:session>/export/", export_views.export, name="export"),
]
_SCOPE = "<str:tenant>/<str:session>/<str:lane>/<str:branch>/"
urlpatterns = [
    path("search/", content_search, name="search"),
    path(_SCOPE, views.receipt_list, name="receipts"),
    path(_SCOPE + "<int:receipt>/", views.receipt_detail, name="receipt"),
]
