"""``/proxy/``: the compacting proxy's endpoints (mounted by ``config/urls.py``)."""

from __future__ import annotations

from django.urls import path

from proxy_app import views

app_name = "proxy"

urlpatterns = [
    path("openai/v1/chat/completions", views.openai_chat_completions, name="openai_chat"),
    path("openai/v1/responses", views.openai_responses, name="openai_responses"),
    path("openai/v1/models", views.openai_models, name="openai_models"),
    path("openai/v1/embeddings", views.openai_embeddings, name="openai_embeddings"),
    path("anthropic/v1/messages", views.anthropic_messages, name="anthropic_messages"),
    path(
        "anthropic/v1/messages/count_tokens",
        views.anthropic_count_tokens,
        name="anthropic_count_tokens",
    ),
    path("anthropic/v1/models", views.anthropic_models, name="anthropic_models"),
]
