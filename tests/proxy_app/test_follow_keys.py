"""``follow a/live.jsonl b/live.jsonl``: files named directly that share a name are two
sessions, named with their folders, the same on every pass (:func:`direct_file_keys`)."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from journal_app.models import Entry, Session
from proxy_app.follow import direct_file_keys, follow_paths, follow_session_key


@pytest.fixture
def lines(corpus) -> list[bytes]:
    path = corpus / "claude-code-jsonl" / "claude-code-session-frontend-refactor.jsonl"
    return path.read_bytes().splitlines(keepends=True)


def test_same_named_files_named_directly_get_their_folder(tmp_path):
    a, b = tmp_path / "a" / "live.jsonl", tmp_path / "b" / "live.jsonl"
    roots = [a, b, tmp_path / "c" / "other.jsonl"]
    assert follow_session_key(a, roots) == "a.live"
    assert follow_session_key(b, roots) == "b.live"
    assert follow_session_key(tmp_path / "c" / "other.jsonl", roots) == "other"  # no twin
    # the order of the arguments does not change the keys
    assert follow_session_key(a, roots[::-1]) == "a.live"
    # one file alone keeps its plain name
    assert follow_session_key(a, [a]) == "live"


def test_folders_are_added_until_the_files_differ(tmp_path):
    x, y = tmp_path / "x" / "repo" / "live.jsonl", tmp_path / "y" / "repo" / "live.jsonl"
    keys = direct_file_keys([x, y])
    assert keys == {x.resolve(): "x.repo.live", y.resolve(): "y.repo.live"}


def test_a_file_named_relatively_and_reported_absolutely_has_one_key(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    roots = [Path("a/live.jsonl"), Path("b/live.jsonl")]
    assert follow_session_key(Path("a/live.jsonl"), roots) == "a.live"
    assert follow_session_key(tmp_path / "a" / "live.jsonl", roots) == "a.live"
    # the same file named twice is one file
    assert direct_file_keys([Path("a/live.jsonl"), tmp_path / "a" / "live.jsonl"]) == {
        (tmp_path / "a" / "live.jsonl").resolve(): "live"
    }


def test_names_that_read_alike_in_one_folder_stay_apart(tmp_path):
    upper, lower = tmp_path / "Live.jsonl", tmp_path / "live.jsonl"
    keys = direct_file_keys([upper, lower])
    assert len(set(keys.values())) == 2
    assert all(k.endswith(".live") for k in keys.values())
    assert direct_file_keys([lower, upper]) == keys  # stable


def test_a_folder_argument_is_not_a_file_named_directly(tmp_path):
    (tmp_path / "projects" / "-work-a").mkdir(parents=True)
    a = tmp_path / "a" / "live.jsonl"
    roots = [tmp_path / "projects", a]
    assert direct_file_keys(roots) == {a.resolve(): "live"}
    nested = tmp_path / "projects" / "-work-a" / "live.jsonl"
    assert follow_session_key(nested, roots) == "work-a.live"  # the folder rule, unchanged


@pytest.mark.django_db
def test_two_same_named_files_followed_directly_are_two_sessions(tmp_path, lines):
    a, b = tmp_path / "a" / "live.jsonl", tmp_path / "b" / "live.jsonl"
    a.parent.mkdir()
    b.parent.mkdir()
    a.write_bytes(b"".join(lines[:20]))
    b.write_bytes(b"".join(lines[:40]))
    reports: list[str] = []
    follow_paths(paths=[a, b], tenant="acme", report=reports.append, once=True)
    sessions = list(Session.objects.filter(tenant__slug="acme").values_list("key", flat=True))
    assert sorted(sessions) == ["a.live", "b.live"]
    count = {key: Entry.objects.filter(journal__session__key=key).count() for key in sessions}
    assert 0 < count["a.live"] < count["b.live"]  # each its own file's entries, not mixed
    assert not Session.objects.filter(key="live").exists()
    # a second pass, as the command runs it: the same two sessions, nothing appended
    out = StringIO()
    call_command("follow", str(a), str(b), "--tenant", "acme", "--once", stdout=out)
    assert out.getvalue().splitlines() == [f"following {a}, {b} (Ctrl-C to stop)"]
    assert {
        key: Entry.objects.filter(journal__session__key=key).count() for key in sessions
    } == count


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("first", "second"),
    [("x.y/live.jsonl", "x/y/live.jsonl"), ("my proj/live.jsonl", "my-proj/live.jsonl")],
)
def test_files_whose_readable_keys_coincide_are_two_sessions(tmp_path, lines, first, second):
    root = tmp_path / "projects"
    one, two = root / first, root / second
    for path, n in ((one, 20), (two, 40)):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"".join(lines[:n]))
    assert follow_session_key(one, [root]) == follow_session_key(two, [root])  # lossy
    follow_paths(paths=[root], tenant="acme", report=lambda line: None, once=True)
    rows = dict(Session.objects.filter(tenant__slug="acme").values_list("source_name", "key"))
    assert set(rows) == {str(one.resolve()), str(two.resolve())}
    assert len(set(rows.values())) == 2
    plain = follow_session_key(one, [root])
    assert plain in rows.values()  # the first keeps the readable key, the other has a hash
    count = {k: Entry.objects.filter(journal__session__key=k).count() for k in rows.values()}
    assert sorted(count.values()) != [0, 0] and len(set(count.values())) == 2
    # a later pass (a restart) finds each file's own session: nothing appended, no branch
    follow_paths(paths=[root], tenant="acme", report=lambda line: None, once=True)
    assert {
        k: Entry.objects.filter(journal__session__key=k).count() for k in rows.values()
    } == count


@pytest.mark.django_db
def test_following_a_file_continues_the_session_its_import_made(tmp_path, lines):
    from journal_app.services import journal_import

    path = tmp_path / "live.jsonl"
    path.write_bytes(b"".join(lines[:20]))
    journal_import(path=path, tenant="acme")
    follow_paths(paths=[path], tenant="acme", report=lambda line: None, once=True)
    assert list(Session.objects.filter(tenant__slug="acme").values_list("key", flat=True)) == [
        "live"
    ]
