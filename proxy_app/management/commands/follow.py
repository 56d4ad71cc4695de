"""``manage.py follow PATH... [--tenant T [--create-tenant]]``: journal growing Claude Code
and Codex logs as they are written.

Each ``.jsonl`` file (folders are searched) becomes a session named from the file; new
complete records are appended as they arrive, a half-written last line waits, a restart
resumes where it stopped, a rewritten file becomes a new branch (reported). See
:mod:`proxy_app.follow`. A tenant that does not exist yet is refused, nothing followed,
unless it is ``default`` or ``--create-tenant`` is given
(:func:`journal_app.services.scope.tenant_for_command`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from journal_app.formats import FORMATS
from journal_app.management.tenant_option import add_tenant_arguments, command_tenant
from proxy_app.follow import follow_paths


class Command(BaseCommand):
    help = (
        "Follow growing Claude Code / Codex JSONL files (or folders of them) into the journal. "
        "Each file is its own session: a file in a followed folder is named by its path under "
        "it, folders joined by '.' (projects/-work-repo/live.jsonl -> work-repo.live); a file "
        "named directly is its name (live), or, when several files named directly share a "
        "name, its parent folders too (a/live.jsonl b/live.jsonl -> a.live, b.live)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", help="JSONL files or folders of them")
        add_tenant_arguments(parser)
        parser.add_argument(
            "--format", dest="fmt", choices=sorted(FORMATS), help="source format (default: detect)"
        )
        parser.add_argument("--once", action="store_true", help="one pass, then exit")

    def handle(self, *args: Any, **options: Any) -> None:
        missing = [p for p in options["paths"] if not Path(p).exists()]
        if missing:
            raise CommandError(f"no such file or folder: {', '.join(missing)}; nothing followed")
        tenant = command_tenant(options)
        self.stdout.write(f"following {', '.join(options['paths'])} (Ctrl-C to stop)")
        try:
            follow_paths(
                paths=options["paths"],
                tenant=tenant,
                fmt=options["fmt"],
                report=self.stdout.write,
                once=options["once"],
            )
        except KeyboardInterrupt:
            self.stdout.write("stopped")
