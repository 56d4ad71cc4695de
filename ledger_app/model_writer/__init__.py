"""Writer, verifier, exactly one repair, and the labelled fallback (docs/design.md 5.3). Pure.

* :mod:`.compose`: :func:`compose`, what the fold service calls for any writer;
* :mod:`.model_writer`: :class:`ModelWriter`, the compose loop (writer -> verifier -> one
  repair -> mechanical fallback);
* :mod:`.verifier`: the verifier model's calls, verdicts on a round's items in batches;
* :mod:`.messages`: what the models are sent (rubric files, entries, state, repair feedback;
  secrets and hidden reasoning filtered);
* :mod:`.judges`: :class:`FoldContext`, the rules' and the reducer's judgements, code's ops;
* :mod:`.records`: :class:`Composition`, :class:`RoundRecord`, :class:`WriterFailed`, ...
"""

from __future__ import annotations

from ledger_app.model_writer.compose import compose
from ledger_app.model_writer.judges import FoldContext, closure_judgement, code_ops
from ledger_app.model_writer.messages import PROMPTS, Prompt, load_prompt
from ledger_app.model_writer.model_writer import (
    VERIFIER_PROMPT,
    WRITER_PROMPT,
    ModelWriter,
    is_model_writer,
)
from ledger_app.model_writer.records import (
    FALLBACK_NOTE,
    Composition,
    ItemRecord,
    Judgement,
    RoundRecord,
    WriterFailed,
)

__all__ = [
    "is_model_writer",
    "FALLBACK_NOTE",
    "PROMPTS",
    "VERIFIER_PROMPT",
    "WRITER_PROMPT",
    "Composition",
    "FoldContext",
    "ItemRecord",
    "Judgement",
    "ModelWriter",
    "Prompt",
    "RoundRecord",
    "WriterFailed",
    "closure_judgement",
    "code_ops",
    "compose",
    "load_prompt",
]
