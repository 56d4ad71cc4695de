"""``gc_artifacts``: list (and with ``--delete`` remove) artifact files nothing references.

An import that fails or is killed rolls back its artifact rows but not the files it wrote
. Those files, and temporary files of an interrupted write, are never referenced;
this command finds them (:func:`journal_app.artifact_storage.artifact_orphans`). A dry run
by default: it prints what it would delete. Files younger than ``--min-age`` minutes are
left alone, since an import still in its transaction holds them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from journal_app.artifact_storage import DEFAULT_MIN_AGE, artifact_gc, artifact_orphans
from journal_app.models import Artifact


def _referenced() -> set[str]:
    return set(Artifact.objects.values_list("storage_name", flat=True))


class Command(BaseCommand):
    help = "List artifact files no artifact references (dry run); --delete removes them."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--delete", action="store_true", help="delete the orphans (default: only list them)"
        )
        parser.add_argument(
            "--min-age",
            type=float,
            default=DEFAULT_MIN_AGE.total_seconds() / 60,
            help="minutes: younger files are kept (an import may still hold them); default 60",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        min_age = timedelta(minutes=opts["min_age"])
        orphans = artifact_orphans(referenced=_referenced(), min_age=min_age)
        for orphan in orphans:
            kind = "temporary" if orphan.temporary else "unreferenced"
            self.stdout.write(f"{orphan.name}  {orphan.size} bytes  {kind}")
        size = sum(o.size for o in orphans)
        if not opts["delete"]:
            self.stdout.write(
                f"{len(orphans)} orphan file(s), {size} bytes; dry run: nothing deleted "
                "(--delete to remove them)"
            )
            return
        deleted = artifact_gc(referenced=_referenced(), orphans=orphans, min_age=min_age)
        self.stdout.write(f"{deleted} orphan file(s) deleted of {len(orphans)} found, {size} bytes")
