"""Operator UI routes of the audit app (docs/design.md section 8).

No namespace of their own: ``config/urls.py`` serves them in the ``journal`` namespace, at
the paths and names they have always had (``journal:annotate``, ``journal:entry_comment``,
``journal:audit_log``, ``journal:timeline``, ``journal:entry``), so the journal app never
imports the audit app.
"""

from __future__ import annotations

from django.urls import path

from audit_app import views

_SCOPE = "t/<str:tenant>/<str:session>/<str:lane>/<str:branch>/"
urlpatterns = [
    path(_SCOPE, views.timeline, name="timeline"),
    path("e/<str:entry_hash>/", views.entry_detail, name="entry"),
    path("t/<str:tenant>/<str:session>/annotate/", views.annotate, name="annotate"),
    path("e/<str:entry_hash>/comments/", views.entry_comment, name="entry_comment"),
    path("audit/<str:tenant>/", views.audit_log, name="audit_log"),
]
