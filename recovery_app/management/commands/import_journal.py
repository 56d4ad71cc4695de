"""``manage.py import_journal PATH [--format F] [--tenant T [--create-tenant] --session S
--lane L --branch B]``.

A tenant that does not exist yet is refused before anything is read, unless it is ``default``
or ``--create-tenant`` is given (:func:`journal_app.services.scope.tenant_for_command`); the
import creates it in its own transaction.

Two progress bars (journal_app/progress.py, as the other long commands): the source's bytes
read, hashed and written, then the automatic fold after the commit (entries folded of the
head, from each stored fold), each a final line when not on a terminal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import InterfaceError, OperationalError
from django.db.models import Sum
from django.db.models.signals import post_save
from django.utils import timezone

from journal_app.formats import FORMATS, FormatError, ParsedSession
from journal_app.hashing import display
from journal_app.management.tenant_option import add_tenant_arguments, command_tenant
from journal_app.models import Journal
from journal_app.progress import Progress
from journal_app.services import CommitUnconfirmed, ConflictError, JournalError
from journal_app.services.imports import default_session_key, import_committed_lost
from ledger_app.errors import LedgerError
from ledger_app.models import Fold, TaskRun
from ledger_app.services.reimport_copy import ReimportResult
from recovery_app.session_transfer import transcript_import


class Command(BaseCommand):
    help = (
        "Import an agent transcript into the journal (one transaction: all or nothing). "
        "Formats: " + ", ".join(FORMATS) + ". The format is detected unless --format is given. "
        "Importing the same file into the same scope again changes nothing. A ledgerkeep "
        "export brings back its ledger too (folds, retirements and decisions, comments, "
        "receipts), re-verified, into any tenant and session."
    )

    #: How the "next" line names the command runner: ``manage.py`` in a checkout, the
    #: ``ledgerkeep`` console command from an installed wheel (``argv[0]``).
    prog = "manage.py"

    def run_from_argv(self, argv: list[str]) -> None:
        self.prog = Path(argv[0]).name or self.prog
        super().run_from_argv(argv)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="transcript file, or an OpenCode export folder")
        parser.add_argument(
            "--format", dest="fmt", choices=sorted(FORMATS), help="source format (default: detect)"
        )
        add_tenant_arguments(parser)
        parser.add_argument(
            "--session", default=None, help="session key (default: from the file name)"
        )
        parser.add_argument("--lane", default="main", help="lane (default: %(default)s)")
        parser.add_argument("--branch", default="main", help="branch (default: %(default)s)")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args: Any, **opts: Any) -> None:
        command_tenant(opts, refused=f"import of {opts['path']} refused: ")
        bar: Progress | None = None
        started = timezone.now()
        quiet = opts["no_progress"] or opts["verbosity"] == 0

        def on_parsed(parsed: ParsedSession) -> None:
            nonlocal bar
            if not quiet:
                self.stderr.write(
                    f"reading {opts['path']} as {parsed.format}", style_func=lambda s: s
                )
                bar = Progress(
                    total=_source_bytes(opts["path"]),
                    unit="B",
                    bytes_=True,  # SI: 1.12MB, 56.3MB/s
                    desc="reading, hashing and writing",
                    file=self.stderr._out,
                )

        def progress(done: int, total: int) -> None:
            # bytes of the source read so far (the bar shows MB and MB/s)
            if bar is not None:
                bar.update_to(done)

        folding: Progress | None = None
        heads: dict[int, int] = {}
        folded: dict[int, int] = {}

        def on_fold(sender: type[Fold], *, instance: Fold, created: bool, **kw: Any) -> None:
            # the automatic fold runs in-process once the import commits: each stored fold
            # moves the bar to its seq_end (of the heads of the journals being folded)
            nonlocal bar, folding
            if quiet or not created or instance.kind != Fold.Kind.FOLD:
                return
            jid = instance.journal_id
            if jid not in heads:
                heads[jid] = Journal.objects.values_list("head_seq", flat=True).get(pk=jid)
            if folding is None:
                if bar is not None:  # the import is committed: its bar is done
                    bar.update_to(bar.total)
                    bar.close()
                    bar = None
                folding = Progress(
                    total=sum(heads.values()), desc="folding", unit="entries", file=self.stderr._out
                )
            folded[jid] = instance.seq_end or 0
            folding.update_to(sum(folded.values()), sum(heads.values()))

        post_save.connect(on_fold, sender=Fold, weak=False, dispatch_uid=id(on_fold))
        try:
            done = transcript_import(
                path=opts["path"],
                fmt=opts["fmt"],
                tenant=opts["tenant"],
                session=opts["session"],
                lane=opts["lane"],
                branch=opts["branch"],
                progress=progress,
                on_parsed=on_parsed,
            )
            result, reimported = done.imported, done.ledgers
        except LedgerError as exc:
            raise CommandError(
                f"import of {opts['path']} refused, nothing written: {exc}"
            ) from None
        except FormatError as exc:
            raise CommandError(f"import failed, nothing written: {exc}") from None
        except ConflictError as exc:
            raise CommandError(
                f"import of {opts['path']} refused, nothing written: {exc}"
            ) from None
        except CommitUnconfirmed as exc:  # lost at the commit: written or not, unknown
            raise CommandError(f"import of {opts['path']}: {exc}") from None
        except JournalError as exc:
            raise CommandError(f"import failed, nothing written: {exc}") from None
        except BaseException:
            for unfinished in (bar, folding):
                if unfinished is not None:
                    unfinished.close(ok=False)
            raise
        finally:
            post_save.disconnect(sender=Fold, dispatch_uid=id(on_fold))
        if bar is not None:
            bar.update_to(bar.total)  # a folder source reports no bytes on the way
            bar.close()
        if folding is not None:
            folding.close()
        try:  # committed: a connection lost from here on must say what was committed
            self._summary(result, reimported, started)
        except (OperationalError, InterfaceError) as exc:
            session = opts["session"] or default_session_key(opts["path"])
            scope = f"{opts['tenant']}/{session}/{opts['lane']}/{opts['branch']}"
            lost = import_committed_lost(
                result=result, name=Path(opts["path"]).name, scope=scope, exc=exc
            )
            raise CommandError(str(lost)) from None

    def _summary(self, result: Any, reimported: dict[int, Any], started: Any) -> None:
        """Print what the import did and the folds after it; a failed fold run is an error."""
        c = result.counts
        lines = [
            f"scope      {j.scope_label}  (head seq {j.head_seq}, {display(j.head_hash)})"
            for j in result.journals
        ]
        lines += [
            f"format     {result.parsed.format}",
            f"entries    {result.append.appended} appended, {result.append.unchanged} already present"
            + (
                f", {c['duplicates']} repeated source record(s) read once"
                if c.get("duplicates")
                else ""
            ),
            f"contents   messages {c.get('message', 0)}, tool calls {c.get('tool_call', 0)}, "
            f"tool results {c.get('tool_result', 0)} ({c.get('failed_tool_results', 0)} failed), "
            f"reasoning {c.get('reasoning', 0)}, events {c.get('event', 0)}, derived {c.get('derived', 0)}",
            f"artifacts  {result.artifacts} "
            "oversized tool results referenced as artifacts by the new entries",
        ]
        lines += [
            _reimported(j, reimported[j.pk]) if j.pk in reimported else _folded(j, started)
            for j in result.journals
        ]
        scope = f"{result.journal.session.tenant.slug}/{result.journal.session.key}"
        lines.append(
            f"next       {self.prog} verify_journal {scope}   |   {self.prog} compact {scope}"
        )
        self.stdout.write("\n".join(lines))
        failed = [
            f"{j.scope_label}: {run.error or run.status}"
            for j in result.journals
            for run in TaskRun.objects.filter(journal=j, created_at__gte=started, status="failed")
        ]
        if failed:
            # the entries are committed; a fold that could not be written is an error, never a
            # silently partial ledger (`compact` folds what is left)
            raise CommandError(
                f"the import committed its entries, but {len(failed)} automatic fold run(s) "
                "failed:\n  " + "\n  ".join(failed[:20]) + f"\nfold the rest with `{self.prog} "
                f"compact {scope}`"
            )


def _source_bytes(path: str) -> int:
    """Bytes of a source file, or of every file in an export folder."""
    p = Path(path)
    if p.is_dir():
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return p.stat().st_size if p.exists() else 0


def _reimported(journal: Any, r: ReimportResult) -> str:
    """The ledger line for a journal re-imported from a ledgerkeep export."""
    if r.unchanged:
        return f"ledger     {journal.scope_label}: the exported ledger is already here"
    text = (
        f"ledger     {journal.scope_label}: {r.folds} fold(s), {r.retirements} retirement "
        f"request(s) ({r.decisions} decided), {r.comments} comment(s), {r.annotations} "
        f"annotation(s), {r.receipts} receipt(s) re-imported and verified"
    )
    return text + "".join(f"\n           skipped: {s}" for s in r.skipped)


def _folded(journal: Any, started: Any) -> str:
    """What the automatic fold after the import did for ``journal``: folds, writer, reason."""
    folds = list(Fold.objects.filter(journal=journal, created_at__gte=started).order_by("number"))
    ranges = [f for f in folds if f.kind == Fold.Kind.FOLD]
    if ranges:
        writers = sorted({f.writer for f in ranges})
        fallbacks = [f for f in ranges if f.outcome == Fold.Outcome.FALLBACK]
        text = (
            f"folded     {journal.scope_label}: {len(ranges)} fold(s) by writer "
            f"{', '.join(writers)} over seq {ranges[0].seq_start}-{ranges[-1].seq_end}"
        )
        if fallbacks:
            why = fallbacks[0].manifest.get("note") or fallbacks[0].manifest.get("outcome", "")
            text += f"; {len(fallbacks)} labelled fallback ({why})"
        consolidated = [f for f in folds if f.kind == Fold.Kind.CONSOLIDATION]
        if consolidated:
            text += f"; consolidated into fold {consolidated[-1].number}"
        return text
    failed = (
        TaskRun.objects.filter(journal=journal, created_at__gte=started, status="failed")
        .order_by("-pk")
        .first()
    )
    if failed is not None:
        return f"folded     {journal.scope_label}: the automatic fold failed: {failed.error}"
    folded_to = (
        Fold.objects.filter(journal=journal, kind=Fold.Kind.FOLD)
        .order_by("-number")
        .values_list("seq_end", flat=True)
        .first()
        or 0
    )
    unfolded = journal.entries.filter(seq__gt=folded_to).aggregate(t=Sum("token_count"))["t"] or 0
    if folded_to and not unfolded:
        return (
            f"folded     {journal.scope_label}: nothing new; the ledger already covers seq "
            f"1-{folded_to}"
        )
    if unfolded >= settings.LEDGER_FOLD_THRESHOLD_TOKENS:
        return (
            f"folded     {journal.scope_label}: not yet; {unfolded} unfolded tokens are over "
            f"LEDGER_FOLD_THRESHOLD_TOKENS {settings.LEDGER_FOLD_THRESHOLD_TOKENS}, so a fold "
            "is queued for the worker (`compact` folds it now)"
        )
    return (
        f"folded     {journal.scope_label}: nothing yet ({unfolded} unfolded tokens, below "
        f"LEDGER_FOLD_THRESHOLD_TOKENS {settings.LEDGER_FOLD_THRESHOLD_TOKENS}); "
        "`compact` folds it now"
    )
