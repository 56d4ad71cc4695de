"""Shared fixtures. The corpus is a copy of shared/corpus kept in tests/fixtures/corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

CORPUS = Path(__file__).parent / "fixtures" / "corpus"


@pytest.fixture
def corpus() -> Path:
    return CORPUS


@pytest.fixture(autouse=True)
def _no_refused_key_limit(settings):
    """Refused API keys are counted per client address (``API_AUTH_FAILURE_RATE``); every
    test client is 127.0.0.1, so the suite's many 401 checks would share one counter. Tests
    of that limit set a rate themselves (tests/api/test_rate_limit.py)."""
    settings.API_AUTH_FAILURE_RATE = ""
