"""``manage.py import_journal PATH [--format F] [--tenant T --session S --lane L --branch B]``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from journal_app.formats import FORMATS, FormatError, ParsedSession
from journal_app.hashing import display
from journal_app.services import ConflictError, JournalError, journal_import


class Command(BaseCommand):
    help = (
        "Import an agent transcript into the journal (one transaction: all or nothing). "
        "Formats: " + ", ".join(FORMATS) + ". The format is detected unless --format is given. "
        "Importing the same file into the same scope again changes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="transcript file, or an OpenCode export folder")
        parser.add_argument(
            "--format", dest="fmt", choices=sorted(FORMATS), help="source format (default: detect)"
        )
        parser.add_argument(
            "--tenant", default="default", help="tenant slug (default: %(default)s)"
        )
        parser.add_argument(
            "--session", default=None, help="session key (default: from the file name)"
        )
        parser.add_argument("--lane", default="main", help="lane (default: %(default)s)")
        parser.add_argument("--branch", default="main", help="branch (default: %(default)s)")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args: Any, **opts: Any) -> None:
        bar: tqdm | None = None
        quiet = opts["no_progress"] or opts["verbosity"] == 0

        def on_parsed(parsed: ParsedSession) -> None:
            nonlocal bar
            if not quiet:
                self.stderr.write(
                    f"parsed {opts['path']} as {parsed.format}: {len(parsed.entries)} entries"
                )
                bar = tqdm(
                    total=len(parsed.entries),
                    unit="entry",
                    desc="hashing and writing",
                    file=self.stderr._out,
                )

        def progress(done: int, total: int) -> None:
            if bar is not None:
                bar.n = done
                bar.refresh()

        try:
            result = journal_import(
                path=opts["path"],
                fmt=opts["fmt"],
                tenant=opts["tenant"],
                session=opts["session"],
                lane=opts["lane"],
                branch=opts["branch"],
                progress=progress,
                on_parsed=on_parsed,
            )
        except FormatError as exc:
            raise CommandError(f"import failed, nothing written: {exc}") from None
        except ConflictError as exc:
            raise CommandError(
                f"import of {opts['path']} refused, nothing written: {exc}"
            ) from None
        except JournalError as exc:
            raise CommandError(f"import failed, nothing written: {exc}") from None
        finally:
            if bar is not None:
                bar.close()
        c = result.counts
        lines = [
            f"scope      {j.scope_label}  (head seq {j.head_seq}, {display(j.head_hash)})"
            for j in result.journals
        ]
        lines += [
            f"format     {result.parsed.format}",
            f"entries    {result.append.appended} appended, {result.append.unchanged} already present",
            f"contents   messages {c.get('message', 0)}, tool calls {c.get('tool_call', 0)}, "
            f"tool results {c.get('tool_result', 0)} ({c.get('failed_tool_results', 0)} failed), "
            f"reasoning {c.get('reasoning', 0)}, events {c.get('event', 0)}, derived {c.get('derived', 0)}",
            f"artifacts  {len({e.artifact_id for e in result.append.entries if e.artifact_id})} "
            "oversized tool results referenced as artifacts by the new entries",
            f"next       manage.py verify_journal {result.journal.session.tenant.slug}/{result.journal.session.key}"
            f"   |   manage.py fold {result.journal.session.tenant.slug}/{result.journal.session.key}",
        ]
        self.stdout.write("\n".join(lines))
