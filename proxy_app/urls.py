"""``/proxy/``: the compacting proxy's endpoints (mounted by ``config/urls.py``).

Any other path under ``/proxy/`` is a JSON 404 naming the served endpoints
(:func:`proxy_app.views.proxy_not_found`), never Django's HTML page.
"""

from __future__ import annotations

from django.urls import path, re_path

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

#: the served endpoints' paths, relative to the mount point, as the 404 lists them
SERVED = tuple(str(pattern.pattern) for pattern in urlpatterns)

urlpatterns.append(
    re_path(r"^(?P<rest>.*)$", views.proxy_not_found, {"served": SERVED}, name="not_found")
)
