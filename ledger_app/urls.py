"""Operator UI routes of the ledger (docs/design.md section 8); ``urlpatterns`` is included at
``"ledger/"``.

``journal_pages`` are the session pages (:mod:`ledger_app.views.sessions`): ``config/urls.py``
serves them in the ``journal`` namespace at their historical names and paths, the sessions
list at the site's root. The session export (``ledger:export``) is
:mod:`recovery_app.export_views`, added to this namespace there too.
"""

from __future__ import annotations

from django.urls import path

from ledger_app import views

app_name = "ledger"
journal_pages = [
    path("", views.session_list, name="session_list"),
    path("t/<str:tenant>/<str:session>/", views.session_overview, name="session"),
]
_SCOPE = "<str:tenant>/<str:session>/<str:lane>/<str:branch>/"
urlpatterns = [
    path("dashboard/", views.dashboard, name="dashboard"),
    path("reviews/", views.review_list, name="reviews"),
    path("reviews/<int:pk>/", views.review_detail, name="review"),
    path(_SCOPE, views.facts, name="facts"),
    path(_SCOPE + "facts/<path:fact_id>/", views.fact_detail, name="fact"),
    path(_SCOPE + "folds/", views.fold_list, name="folds"),
    path(_SCOPE + "folds/run/", views.fold_now, name="fold_now"),
    path(_SCOPE + "folds/compare/", views.fold_compare, name="fold_compare"),
    path(_SCOPE + "folds/<int:number>/", views.fold_detail, name="fold"),
    path(_SCOPE + "folds/<int:number>/verifier/", views.fold_verdicts, name="verdicts"),
    path(
        _SCOPE + "folds/<int:number>/invariants/",
        views.fold_invariants_panel,
        name="fold_invariants",
    ),
    path(_SCOPE + "folds/<int:a>/diff/<int:b>/", views.fold_diff, name="fold_diff"),
    path(_SCOPE + "context/", views.context_views, name="context"),
]
