"""Operator UI routes of the ledger (DESIGN.md section 8); included at ``"ledger/"``."""

from __future__ import annotations

from django.urls import path

from ledger_app import views

app_name = "ledger"
_SCOPE = "<str:tenant>/<str:session>/<str:lane>/<str:branch>/"
urlpatterns = [
    path(_SCOPE, views.facts, name="facts"),
    path(_SCOPE + "folds/", views.fold_list, name="folds"),
    path(_SCOPE + "folds/<int:number>/", views.fold_detail, name="fold"),
]
