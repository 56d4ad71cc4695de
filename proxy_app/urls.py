"""``/proxy/``: the compacting proxy's endpoints (mounted by ``config/urls.py``)."""

from __future__ import annotations

from django.urls import path

from proxy_app import views

app_name = "proxy"

urlpatterns = [
    path("openai/v1/chat/completions", views.openai_chat_completions, name="openai_chat"),
    path("anthropic/v1/messages", views.anthropic_messages, name="anthropic_messages"),
]
