"""Import at constant memory ("done when" 3): the largest corpus source and
a generated transcript import in a worker limited to 512 MB of address space, with the head
hashes an independent in-memory computation gives.

The child process sets ``RLIMIT_AS`` (what ``ulimit -v`` sets) to 512 MB before Django, the
tokenizer and the import load: the address space, not just the resident set, so it is the
stricter limit (the tokenizer's tables fit: the child's ``VmPeak`` is about 230 MB). It
migrates its own SQLite file, so it runs on any configured database. The generated file is
``IMPORT_MEMORY_MB`` MB (default 6, about 40 s here under load; ``IMPORT_MEMORY_MB=400`` for the
issue's 400 MB: passed in about 4 minutes on this 2-core machine on 2026-12-03).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from bench.generator import write_large
from bench.memory import largest_source
from journal_app.chain import prepare_entries
from journal_app.formats import parse_path, source
from journal_app.services import default_session_key

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 512 * 1024 * 1024

CHILD = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (@LIMIT@, @LIMIT@))
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from journal_app.services import journal_import
out = []
for path in sys.argv[1:]:
    r = journal_import(path=path, tenant="mem")
    out.append({j.lane: [j.head_seq, j.head_hash] for j in r.journals})
peak = [l for l in open("/proc/self/status") if l.startswith("VmPeak")]
print(json.dumps({"heads": out, "vmpeak": peak[0].split()[1] if peak else ""}))
""".replace("@LIMIT@", str(LIMIT))


def _expected(path: Path, monkeypatch) -> dict[str, list]:
    """Head seq and hash per lane, computed in memory (the whole file, one append per lane)."""
    monkeypatch.setattr(source, "STREAM_FROM_BYTES", 1 << 62)
    session = parse_path(path)
    lanes: dict[str, list] = {}
    for e in session.entries:
        lanes.setdefault(e.lane or "main", []).append(e)
    heads = {}
    for lane, items in lanes.items():
        prepared = prepare_entries(
            scope={
                "tenant": "mem",
                "session": default_session_key(path),
                "lane": lane,
                "branch": "main",
            },
            start_seq=1,
            parent_hash="",
            items=items,
            chunk_bytes=settings.JOURNAL_CHUNK_BYTES,
            encoding=settings.TOKEN_ENCODING,
        )
        heads[lane] = [len(prepared), prepared[-1].entry_hash]
    return heads


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc: Linux")
def test_large_imports_fit_in_512_mb_with_the_in_memory_hashes(tmp_path, monkeypatch):
    generated = tmp_path / "generated-session.jsonl"
    mb = float(os.environ.get("IMPORT_MEMORY_MB", "6"))
    write_large(generated, int(mb * 1e6), "claude-code", seed=5)
    assert generated.stat().st_size >= source.STREAM_FROM_BYTES  # the streaming readers
    paths = [largest_source(), generated]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'child.sqlite3'}",
        "MEDIA_ROOT": str(tmp_path / "media"),
        "LEDGER_FOLD_THRESHOLD_TOKENS": str(10**12),
    }
    run = subprocess.run(
        [sys.executable, "-c", CHILD, *map(str, paths)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    child = json.loads(run.stdout.strip().splitlines()[-1])
    assert child["heads"] == [_expected(p, monkeypatch) for p in paths]
    assert int(child["vmpeak"]) * 1024 <= LIMIT
