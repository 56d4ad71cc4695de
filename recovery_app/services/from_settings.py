"""What recovery reads from settings: the attempt's budget and the model-backed analyst.

Both read ``django.conf.settings`` when called (never at import), so a test's ``settings``
fixture changes them; neither writes anything.
"""

from __future__ import annotations

import dataclasses

from django.conf import settings

from recovery_app.analyst import AnalystModel, ModelAnalyst
from recovery_app.budget import Budget


def recovery_budget() -> Budget:
    """The budget from ``settings.RECOVERY_MAX_*``, the only copy of its figures (defaults
    in ``config/settings.py``: 3 rounds, 4 searches, 8 reads, 4 sources, 8,000 tokens, 30 s)."""
    return Budget(
        rounds=settings.RECOVERY_MAX_ROUNDS,
        searches=settings.RECOVERY_MAX_SEARCHES,
        reads=settings.RECOVERY_MAX_READS,
        sources=settings.RECOVERY_MAX_SOURCES,
        tokens=settings.RECOVERY_MAX_TOKENS,
        seconds=settings.RECOVERY_MAX_SECONDS,
    )


def analyst_model_from_settings() -> AnalystModel | None:
    """The model-backed analyst when a model is configured, else ``None`` (the offline default).

    Configured means ``OPENAI_BASE_URL`` plus ``RECOVERY_ANALYST_MODEL`` (or, failing that,
    ``WRITER_MODEL``); calls go through :class:`ledger_app.model_client.ModelClient`.
    Called only once an attempt has been admitted and triggered.
    """
    base_url = settings.OPENAI_BASE_URL
    model = settings.RECOVERY_ANALYST_MODEL or settings.WRITER_MODEL
    if not (base_url and model):
        return None
    from ledger_app.model_client import ModelClient, ModelConfig

    config = dataclasses.replace(ModelConfig.from_settings(settings), writer_model=model)
    return ModelAnalyst(ModelClient(config), model)
