"""Shared fixtures. The corpus is a copy of shared/corpus kept in tests/fixtures/corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

CORPUS = Path(__file__).parent / "fixtures" / "corpus"


@pytest.fixture
def corpus() -> Path:
    return CORPUS
