"""Operator UI routes of recovery (DESIGN.md section 8); included at ``"recovery/"``."""

from __future__ import annotations

from django.urls import path

from recovery_app import views

app_name = "recovery"
_SCOPE = "<str:tenant>/<str:session>/<str:lane>/<str:branch>/"
urlpatterns = [
    path(_SCOPE, views.receipt_list, name="receipts"),
    path(_SCOPE + "<int:receipt>/", views.receipt_detail, name="receipt"),
]
