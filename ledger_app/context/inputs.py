"""What a context build takes in: target formats, the fold and artifact callbacks, and the
error for inputs that cannot describe a request. Pure module: no Django, no database.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ledger_app.validation import ArtifactInfo

#: Target format -> the ``format`` label of the model view.
TARGETS = {"openai": "openai-chat", "anthropic": "anthropic-messages"}

#: ``fold(upto) -> (ledger state, covered_upto)``: grows the ledger up to seq ``upto``.
FoldCallback = Callable[[int], tuple[Mapping[str, Any], int]]
#: ``reference -> ArtifactInfo | None``: what the store says about an artifact reference.
ArtifactResolver = Callable[[str], ArtifactInfo | None]


class ContextInputError(ValueError):
    """Budgets or options that cannot describe a request (a budget below one, unknown format,
    an output reserve not below the window). ``field`` names the input at fault."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
