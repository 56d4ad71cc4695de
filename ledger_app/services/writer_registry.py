"""The writer registry: which writer folds (docs/design.md 5.3). The only place writers are named.

``model`` when a model is configured (``OPENAI_BASE_URL`` and ``WRITER_MODEL``), else
``offline``; ``mechanical`` is asked for by name only (it is otherwise the labelled fallback
a model fold falls back to after a rejected repair, inside
:func:`ledger_app.model_writer.compose`). Every entry point (the fold service, ``compact``,
the task, the API, ``compact --refold``) resolves a writer through :func:`writer_resolve`.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from ledger_app.errors import LedgerError
from ledger_app.mechanical_writer import MechanicalWriter, Writer
from ledger_app.model_client import ModelConfig
from ledger_app.model_writer import ModelWriter
from ledger_app.offline import OfflineWriter

#: Writer names a caller may ask for, in the order ``--help`` lists them.
WRITER_NAMES: tuple[str, ...] = ("offline", "model", "mechanical")
#: Writers that need no configuration: name -> class.
WRITERS: dict[str, type] = {"mechanical": MechanicalWriter, "offline": OfflineWriter}


class WriterUnknown(LedgerError):
    """A writer name that is not one of :data:`WRITER_NAMES`; ``field`` is ``writer``."""

    status = 422
    code = "unknown_writer"


class ModelNotConfigured(LedgerError):
    """``writer="model"`` with no model configured; ``field`` is ``writer``."""

    status = 422
    code = "model_not_configured"


def model_config() -> ModelConfig:
    """The model endpoint and names from the settings (``OPENAI_BASE_URL``, ``WRITER_MODEL``...)."""
    return ModelConfig.from_settings(settings)


def default_writer() -> str:
    """``"model"`` when a model is configured (``OPENAI_BASE_URL``), else ``"offline"``."""
    return "model" if model_config().configured else "offline"


def writer_resolve(writer: str | Writer | ModelWriter | None = None) -> Any:
    """A writer object for a name, the configured default for ``None``, or the object given.

    Args:
        writer: ``None`` (the configured default, :func:`default_writer`), a name from
            :data:`WRITER_NAMES`, or a writer object (tests).

    Returns:
        A writer with ``id``, ``label``, ``prompt_version`` and ``propose`` (or a
        :class:`~ledger_app.model_writer.ModelWriter`).

    Raises:
        WriterUnknown: an unknown name (the message lists the known ones).
        ModelNotConfigured: ``"model"`` with no model configured (names the settings).
    """
    if writer is None:
        writer = default_writer()
    if not isinstance(writer, str):
        return writer
    if writer == "model":
        config = model_config()
        if not config.configured:
            raise ModelNotConfigured(
                "writer 'model' needs a model: set OPENAI_BASE_URL and WRITER_MODEL "
                "(or use writer 'offline')",
                field="writer",
            )
        return ModelWriter(config)
    if writer not in WRITERS:
        raise WriterUnknown(
            f"unknown writer {writer!r} (known: {', '.join(WRITER_NAMES)})", field="writer"
        )
    return WRITERS[writer]()
