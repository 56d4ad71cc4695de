"""Root URLconf: the operator UI, auth, admin, the REST API v1 and ``/healthz``.

The ``journal`` namespace gathers the journal's pages with the audit app's pages and actions
and the ledger's session pages and fact comment (their historical ``journal:`` names and
paths): the wiring lives
here, at the top, so no app imports an app above it (README "Architecture"). The same
holds for the ``ledger`` namespace: the session export is recovery's page (it carries the
receipts) at its historical ``ledger:export`` name and path.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from audit_app import urls as audit_urls
from audit_app.raw_views import entry_raw
from audit_app.views import AuditedLoginView
from config.api import api, api_not_found
from config.health import healthz
from journal_app import urls as journal_urls
from ledger_app import urls as ledger_urls
from ledger_app.comment_views import fact_comment
from recovery_app import urls as recovery_urls

_SCOPE = "t/<str:tenant>/<str:session>/<str:lane>/<str:branch>/"
journal_ui = [
    *ledger_urls.journal_pages,
    *journal_urls.urlpatterns,
    *audit_urls.urlpatterns,
    path("e/<str:entry_hash>/raw/", entry_raw, name="entry_raw"),
    path(_SCOPE + "comments/", fact_comment, name="fact_comment"),
]

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("api/v1/", api.urls),
    re_path(r"^api/v1/(?P<rest>.*)$", api_not_found),
    path("admin/", admin.site.urls),
    path("accounts/login/", AuditedLoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path(
        "ledger/",
        include(([*ledger_urls.urlpatterns, *recovery_urls.ledger_pages], ledger_urls.app_name)),
    ),
    path("recovery/", include("recovery_app.urls")),
    path("proxy/", include("proxy_app.urls")),
    path("", include((journal_ui, journal_urls.app_name))),
]
