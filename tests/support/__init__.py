"""Test support: the scripted OpenAI-compatible server (:mod:`tests.support.scripted_server`).

Test modules wrap it in a fixture of their own::

    @pytest.fixture
    def scripted():
        with ScriptedServer() as server:
            yield server
"""

from __future__ import annotations

from tests.support.scripted_server import ScriptedServer

__all__ = ["ScriptedServer"]
