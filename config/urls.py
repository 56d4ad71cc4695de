"""Root URLconf: the operator UI, auth, admin, the REST API v1 and ``/healthz``."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from config.api import api, api_not_found
from config.health import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("api/v1/", api.urls),
    re_path(r"^api/v1/(?P<rest>.*)$", api_not_found),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("ledger/", include("ledger_app.urls")),
    path("recovery/", include("recovery_app.urls")),
    path("", include("journal_app.urls")),
]
