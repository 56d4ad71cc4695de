"""``follow``: a Claude Code log written line by line, a torn last line, restarts, a rewrite."""

from __future__ import annotations

import json
import threading
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from journal_app.formats import codex
from journal_app.formats.source import Source, loads
from journal_app.models import Journal
from journal_app.services import journal_import
from proxy_app.follow import (
    FollowState,
    _settled,
    follow_file,
    follow_paths,
    follow_session_key,
)
from proxy_app.matching import parsed_key
from tests.proxy_app.conftest import entries, shape

pytestmark = pytest.mark.django_db


@pytest.fixture
def lines(corpus) -> list[bytes]:
    path = corpus / "claude-code-jsonl" / "claude-code-session-frontend-refactor.jsonl"
    return path.read_bytes().splitlines(keepends=True)


def conversational(rows):
    return [s for s, e in zip(shape(rows), rows, strict=True) if e.kind != "event"]


def test_a_file_written_line_by_line_journals_each_record_once(tmp_path, lines, corpus):
    log = tmp_path / "agent-run.jsonl"
    # 30 complete lines and half of the next one
    torn = lines[30][: len(lines[30]) // 2]
    log.write_bytes(b"".join(lines[:30]) + torn)
    first = follow_file(path=log, tenant="acme")
    assert first.session == "agent-run"
    assert first.waiting == len(torn)
    assert first.appended > 0
    head = len(entries("agent-run"))
    # a restart with nothing new appends nothing (no state of its own needed)
    again = follow_file(path=log, tenant="acme")
    assert again.appended == 0 and again.waiting == len(torn)
    assert len(entries("agent-run")) == head
    # the torn line completes, more lines arrive, one at a time
    with log.open("ab") as fh:
        fh.write(lines[30][len(torn) :])
    for line in lines[31:]:
        with log.open("ab") as fh:
            fh.write(line)
        follow_file(path=log, tenant="acme")
    assert follow_file(path=log, tenant="acme").appended == 0
    # the same conversation a batch import of the finished file gives, message for message
    batch = journal_import(path=log, tenant="acme", session="batch")
    followed = entries("agent-run")
    imported = entries("batch")
    assert conversational(followed) == conversational(imported)
    assert [e.body_hash for e in followed if e.kind != "event"] == [
        e.body_hash for e in imported if e.kind != "event"
    ]
    assert batch.append.appended == len(imported)
    assert Journal.objects.filter(session__key="agent-run").count() == 1


def test_a_rewritten_file_becomes_a_branch_and_is_reported(tmp_path, lines):
    log = tmp_path / "rewritten.jsonl"
    log.write_bytes(b"".join(lines[:40]))
    follow_file(path=log, tenant="acme")
    main = [e.entry_hash for e in entries("rewritten")]
    # the runtime rewrote its log: the user's first request edited, the rest dropped
    user = 5  # line 6: "Can you add the first two ..."
    changed = lines[user].replace(b'"content":"Can you', b'"content":"EDITED Can you', 1)
    assert changed != lines[user]
    log.write_bytes(b"".join(lines[:user]) + changed)
    out = StringIO()
    call_command("follow", str(log), "--tenant", "acme", "--once", stdout=out)
    report = out.getvalue()
    assert "the file was rewritten: new branch from main@" in report
    assert [e.entry_hash for e in entries("rewritten")] == main  # never rewritten
    branch = entries("rewritten", "b2")
    assert any(e.text.startswith("EDITED ") for e in branch)
    assert any("branched_from" in e.meta_dict for e in branch)


def test_the_watch_follows_a_folder_as_files_grow(tmp_path, lines, transactional_db):
    folder = tmp_path / "projects" / "-work-repo"
    folder.mkdir(parents=True)
    log = folder / "live.jsonl"
    log.write_bytes(b"".join(lines[:10]))
    stop = threading.Event()
    reports: list[str] = []
    thread = threading.Thread(
        target=follow_paths,
        kwargs={
            "paths": [tmp_path / "projects"],
            "tenant": "acme",
            "report": reports.append,
            "stop": stop,
        },
        daemon=True,
    )
    thread.start()
    # the watcher's reports are the signal: the test reads the database only once the
    # watcher has stopped (SQLite's shared in-memory test database locks whole tables)
    try:
        wait_for(lambda: sum("live.jsonl" in r for r in reports) >= 1)
        with log.open("ab") as fh:
            fh.write(b"".join(lines[10:40]))
        wait_for(lambda: sum("live.jsonl" in r for r in reports) >= 2)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
    first = int(reports[0].split(": +")[1].split()[0])
    second = int(reports[1].split(": +")[1].split()[0])
    assert first > 0 and second > 0
    assert len(entries("work-repo.live")) == first + second


def wait_for(condition, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_a_bad_complete_line_is_reported_once_and_later_lines_carry_on(tmp_path, lines):
    log = tmp_path / "broken.jsonl"
    log.write_bytes(b"".join(lines[:5]) + b"{not json\n")
    out = StringIO()
    call_command("follow", str(log), "--once", stdout=out)
    assert f"{log}, line 6: skipped" in out.getvalue()
    assert "not valid JSON" in out.getvalue()
    head = len(entries("broken"))
    # later valid lines are journaled (they were refused for good before), and a torn last
    # line still waits for its end
    torn = lines[6][: len(lines[6]) // 2]
    log.write_bytes(b"".join(lines[:5]) + b"{not json\n" + lines[5] + torn)
    out = StringIO()
    call_command("follow", str(log), "--once", stdout=out)
    assert "line 6" not in out.getvalue()  # recorded: not reported again
    grown = entries("broken")
    assert len(grown) > head
    assert follow_file(path=log, tenant="default").waiting == len(torn)
    # the skip is in the journal once, at its place, and the line itself is not
    skips = [e for e in grown if e.content.get("type") == "unreadable_record"]
    assert [(s.content["line"], s.derived) for s in skips] == [(6, True)]
    assert "not json" not in "".join(e.text for e in grown)
    # a restart (a new pass over the whole file) appends and reports nothing
    with log.open("ab") as fh:
        fh.write(lines[6][len(torn) :])
    result = follow_file(path=log, tenant="default")
    assert result.bad_lines == [] and result.appended > 0
    again = follow_file(path=log, tenant="default")
    assert again.appended == 0 and again.warnings() == []
    assert Journal.objects.filter(session__key="broken").count() == 1
    # the journal's conversation is the file's without the bad line
    batch_log = tmp_path / "clean.jsonl"
    batch_log.write_bytes(b"".join(lines[:7]))
    journal_import(path=batch_log, tenant="default", session="clean")
    assert conversational(entries("broken")) == conversational(entries("clean"))


def test_a_record_the_importer_refuses_is_skipped_naming_its_line(tmp_path, lines):
    log = tmp_path / "odd.jsonl"
    record = next(r for r in map(json.loads, lines[:5]) if r.get("type") == "user")
    bad = {**record, "uuid": "bad-record", "message": {"role": "user", "content": None}}
    log.write_bytes(b"".join(lines[:5]) + json.dumps(bad).encode() + b"\n" + lines[5])
    result = follow_file(path=log, tenant="default")
    assert [b.line for b in result.bad_lines] == [6]
    assert "line 6" in result.warnings()[0] and "content is null" in result.warnings()[0]
    assert result.appended > 0
    assert follow_file(path=log, tenant="default").appended == 0


def test_a_codex_rollout_written_line_by_line_ends_as_its_one_shot_import(tmp_path, corpus):
    """Codex writes ``event_msg/agent_reasoning`` (and message) lines before the
    ``response_item`` lines that repeat them; the importer keeps one of each pair, so
    ``follow`` waits for the repeat before journaling such a line: one branch, equal to a
    one-shot import of the whole file."""
    source = corpus / "codex-rollout-jsonl" / "codex-vscode-long-monorepo-session.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    log = tmp_path / "live.jsonl"
    log.write_bytes(b"")
    state = FollowState()  # each pass reads from where the last one ended
    for n, line in enumerate(lines, start=1):
        with log.open("ab") as f:
            f.write(line)
        if n % 7 == 0 or n == len(lines):  # every line's reading: the test below
            follow_file(path=log, tenant="acme", session="live", state=state)
    assert state.end == len(source.read_bytes()) and len(state.lines) == len(lines)

    journal_import(path=source, tenant="acme", session="oneshot")
    assert list(Journal.objects.filter(session__key="live").values_list("branch", flat=True)) == [
        "main"
    ]
    followed = [(e.kind, e.role, e.content) for e in entries("live")]
    imported = [(e.kind, e.role, e.content) for e in entries("oneshot")]
    assert len(imported) > 400 and followed == imported


def test_every_prefix_of_a_codex_rollout_reads_as_a_prefix_of_the_whole(corpus):
    """What ``follow`` journals after each line (the settled rows' entries) is a prefix of
    the one-shot reading, by match key, for all 823 lines of the corpus session."""
    path = corpus / "codex-rollout-jsonl" / "codex-vscode-long-monorepo-session.jsonl"
    rows = [(n, loads(line)) for n, line in enumerate(path.read_text().splitlines(), 1)]

    def keys(part):
        parsed = codex.parse(Source(path=path, kind="jsonl", data=part))
        return [parsed_key(e, every=True) for e in parsed.entries]

    whole = keys(rows)
    for k in range(1, len(rows) + 1):
        settled = _settled(rows[:k])
        if settled:
            read = keys(settled)
            assert read == whole[: len(read)], f"after line {k}"
    assert _settled(rows) == rows


def test_a_path_that_does_not_exist_is_an_error_and_nothing_is_followed(tmp_path):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no such file or folder: .*missing.jsonl"):
        call_command("follow", str(tmp_path / "missing.jsonl"), "--once", stdout=StringIO())
    assert Journal.objects.count() == 0


def test_a_pass_reads_from_the_last_offset(tmp_path, lines, monkeypatch):
    log = tmp_path / "live.jsonl"
    log.write_bytes(b"".join(lines[:10]) + lines[10][:20])  # a half-written 11th line
    state = FollowState()
    first = follow_file(path=log, tenant="acme", session="live", state=state)
    assert first.appended > 0 and first.waiting == 20
    assert state.end == len(b"".join(lines[:10]))
    idle = follow_file(path=log, tenant="acme", session="live", state=state)
    assert (idle.appended, idle.skipped) == (0, "nothing new")
    with log.open("ab") as f:
        f.write(lines[10][20:] + b"".join(lines[11:20]))
    read: list[int] = []
    original = FollowState.__dict__["reset"]
    monkeypatch.setattr(FollowState, "reset", lambda self: read.append(1) or original(self))
    more = follow_file(path=log, tenant="acme", session="live", state=state)
    assert more.appended > 0 and read == []  # the new bytes only
    assert len(entries("live")) == first.appended + more.appended
    # a file changed before the offset is read whole again: its rewrite is a branch
    changed = lines[5].replace(b'"content":"Can you', b'"content":"EDITED Can you', 1)
    log.write_bytes(b"".join(lines[:5]) + changed + b"".join(lines[6:20]))
    rewritten = follow_file(path=log, tenant="acme", session="live", state=state)
    assert read == [1] and rewritten.branched_from is not None


def test_same_named_files_in_different_folders_are_different_sessions(tmp_path):
    root = tmp_path / "projects"
    a, b = root / "-work-a" / "live.jsonl", root / "-work-b" / "live.jsonl"
    assert follow_session_key(a, [root]) == "work-a.live"
    assert follow_session_key(b, [root]) == "work-b.live"
    assert follow_session_key(root / "top.jsonl", [root]) == "top"
    long = root / ("x" * 80) / ("y" * 80) / "live.jsonl"
    key = follow_session_key(long, [root])
    assert len(key) == 100 and key.endswith("y.live")
    other = follow_session_key(root / ("z" * 80) / ("y" * 80) / "live.jsonl", [root])
    assert other != key


def test_a_folder_named_relatively_still_names_files_reported_absolutely(tmp_path, monkeypatch):
    """``follow codexlogs`` from the folder above: the watcher reports changed files by their
    absolute paths, the folder was given relative; same-named files stay apart."""
    monkeypatch.chdir(tmp_path)
    for day in ("2026/12/05", "2026/12/06"):
        (tmp_path / "codexlogs" / day).mkdir(parents=True)
        (tmp_path / "codexlogs" / day / "rollout-a.jsonl").write_text("")
    keys = {
        follow_session_key(tmp_path / "codexlogs" / day / "rollout-a.jsonl", [Path("codexlogs")])
        for day in ("2026/12/05", "2026/12/06")
    }
    assert keys == {"2026.12.05.rollout-a", "2026.12.06.rollout-a"}
    relative = follow_session_key(Path("codexlogs/2026/12/06/rollout-a.jsonl"), [Path("codexlogs")])
    assert relative == "2026.12.06.rollout-a"
