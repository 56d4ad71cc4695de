from __future__ import annotations

from django.apps import AppConfig


class ProxyAppConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "proxy_app"
    verbose_name = "Proxy, MCP server and follow"
