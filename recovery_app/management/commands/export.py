"""``ledgerkeep export SCOPE -o FILE``: the session export (JSON Lines) the UI's admin link
downloads, written to a file (README, "Command line")."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit_app.services import export_record
from journal_app.services import JournalError, journals_for_scope
from recovery_app.session_transfer import session_export


class Command(BaseCommand):
    help = (
        "Write the export of one session (tenant/session, optionally /lane[/branch]) to FILE "
        "as JSON Lines: entries as stored, folds, reviews, comments; `import_journal FILE` "
        "imports it hash for hash. Logged in the audit log as session.export."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("scope", help="tenant/session[/lane[/branch]]")
        parser.add_argument("-o", "--output", required=True, help="file to write ('-': stdout)")

    def handle(self, *args: Any, **opts: Any) -> None:
        scope = opts["scope"].strip("/")
        parts = scope.split("/")
        if len(parts) < 2:
            raise CommandError(f"scope {scope!r} names no session: give tenant/session")
        try:
            journals = journals_for_scope(scope)
        except JournalError as exc:
            raise CommandError(str(exc)) from None
        session = journals[0].session
        lane, branch = (parts + ["", ""])[2:4]
        if opts["output"] == "-":
            try:
                summary = session_export(
                    session=session,
                    out=self.stdout._out.buffer,
                    lane=lane,
                    branch=branch,
                    via="cli",
                )
                self.stdout._out.buffer.flush()
            except BrokenPipeError:
                # the reader stopped early (``| head``): nothing more to say, no export recorded
                os.dup2(os.open(os.devnull, os.O_WRONLY), self.stdout._out.fileno())
                raise CommandError("the output was closed before the export ended") from None
        else:
            target = Path(opts["output"])
            folder = target.parent if str(target.parent) else Path(".")
            if not folder.is_dir():
                raise CommandError(f"cannot write {target}: the folder {folder} does not exist")
            # written beside the target, then renamed: a failed export leaves no partial file
            try:
                fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.")
            except OSError as exc:
                raise CommandError(f"cannot write {target}: {exc.strerror}") from None
            try:
                with os.fdopen(fd, "wb") as out:
                    summary = session_export(
                        session=session, out=out, lane=lane, branch=branch, via="cli"
                    )
                os.replace(tmp, target)
            except OSError as exc:
                Path(tmp).unlink(missing_ok=True)
                raise CommandError(f"cannot write {target}: {exc.strerror or exc}") from None
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        export_record(
            user=None,
            session=session,
            details={**summary.to_dict(), "lane": lane, "branch": branch, "via": "cli"},
        )
        if opts["output"] != "-":
            d = summary.to_dict()
            self.stderr.write(
                f"exported {session.tenant.slug}/{session.key} to {opts['output']}: "
                f"{d.get('entries', 0)} entries, {d.get('folds', 0)} folds, "
                f"sha256:{d.get('sha256', '')}"
            )
