"""The per-fold loss report and identifier extraction. Pure: no database."""

import pytest

from ledger_app import loss
from ledger_app.entry_view import EntryView
from ledger_app.loss import Identifier, extract_identifiers, identifiers_of_entry, loss_report

CALL, RESULT, USER = "c1" * 32, "b2" * 32, "a3" * 32
MIGRATE = "python manage.py migrate payments 0097 --skip-locked-tables"


def call(command, *, seq=2, entry_hash=CALL, call_id="call_8f3a9b2c1d4e"):
    return EntryView(
        seq=seq,
        entry_hash=entry_hash,
        kind="tool_call",
        role="assistant",
        text=f'exec({{"command": "{command}"}})',
        content={"name": "exec", "arguments": {"command": command}},
        tool_call_id=call_id,
        tool_name="exec",
    )


def result(output, *, seq=3, entry_hash=RESULT, call_id="call_8f3a9b2c1d4e"):
    return EntryView(
        seq=seq,
        entry_hash=entry_hash,
        kind="tool_result",
        role="tool",
        text=output,
        content={"output": output, "is_error": False},
        tool_call_id=call_id,
    )


def message(text, *, role="user", seq=1, entry_hash=USER, kind="message", derived=False):
    return EntryView(
        seq=seq,
        entry_hash=entry_hash,
        kind=kind,
        role=role,
        text=text,
        content={"text": text},
        derived=derived,
    )


def kinds(text):
    return [(i.kind, i.value) for i in extract_identifiers(text)]


def test_it_reports_the_migration_flag_name_and_timing_lost_with_their_entries():
    entries = [
        message("Migrate the payments app.", seq=1),
        call(MIGRATE),
        result("Applying payments.0097_auto... OK (1200 ms)"),
    ]
    ledger = (
        "[tool:x] P2 verified_state active verified: `exec` ran manage.py; output 44 characters"
    )
    report = loss_report(entries, ledger)

    lost = {(item["kind"], item["value"]): item for item in report.lost}
    assert lost[("flag", "--skip-locked-tables")]["entry"] == CALL
    assert lost[("flag", "--skip-locked-tables")]["seq"] == 2
    assert lost[("migration", "payments.0097_auto")]["entry"] == RESULT
    assert lost[("number", "1200 ms")]["entry"] == RESULT
    assert lost[("command", MIGRATE)]["entry"] == CALL
    assert ("path", "manage.py") not in lost
    assert report.total == 5
    assert report.kept == 1
    assert report.by_kind["path"] == {"total": 1, "kept": 1}
    assert report.by_kind["flag"] == {"total": 1, "kept": 0}
    assert report.by_kind["hash"] == {"total": 0, "kept": 0}
    data = report.to_dict()
    assert data["lost_count"] == 4 and data["lost_truncated"] == 0
    assert data["lost"] == report.lost


def test_it_counts_identifiers_the_ledger_cites_as_kept():
    entries = [call(MIGRATE), result("Applying payments.0097_auto... OK (1200 ms)")]
    ledger = f"ran `{MIGRATE}`: applied payments.0097_auto in 1200 ms"
    report = loss_report(entries, ledger)

    assert report.total == report.kept == 5
    assert report.lost == []


def test_it_keeps_only_whole_tokens():
    entries = [message("edit a.py, run 8 tests with -x")]
    report = loss_report(entries, "edited data.py; 18 tests passed with --x")

    assert [item["value"] for item in report.lost] == ["a.py", "8 tests", "-x"]
    assert report.kept == 0


def test_it_collapses_whitespace_when_matching_a_command():
    cmd = "pytest   tests/ledger_app\n  -k budget"
    report = loss_report([call(cmd)], "ran pytest tests/ledger_app -k budget")

    assert report.lost == []
    assert identifiers_of_entry(call(cmd))[0] == Identifier(
        "command", "pytest tests/ledger_app -k budget"
    )


def test_it_points_at_the_first_entry_holding_an_identifier():
    entries = [
        message("look at billing/refunds.py", seq=1, entry_hash="01" * 32),
        message("billing/refunds.py again", seq=5, entry_hash="05" * 32),
    ]
    report = loss_report(entries, "")

    assert report.total == 1
    assert report.lost == [
        {"kind": "path", "value": "billing/refunds.py", "entry": "01" * 32, "seq": 1}
    ]


def test_it_caps_the_lost_list_and_counts_the_rest(monkeypatch):
    monkeypatch.setattr(loss, "LOST_LIMIT", 3)
    text = " ".join(f"src/mod_{i}.py" for i in range(5))
    report = loss_report([message(text)], "")

    assert len(report.lost) == 3
    assert report.lost_truncated == 2
    assert report.total == 5 and report.kept == 0


def test_the_default_cap_is_500():
    text = " ".join(f"ABC-{i}" for i in range(1, 601))
    report = loss_report([message(text)], "")

    assert loss.LOST_LIMIT == 500
    assert len(report.lost) == 500 and report.lost_truncated == 100


def test_it_skips_reasoning_derived_entries_and_tool_call_ids():
    assert identifiers_of_entry(message("see a.py", kind="reasoning", role="assistant")) == []
    assert identifiers_of_entry(message("summary: a.py", kind="event", derived=True)) == []
    entry = result("done for call_8f3a9b2c1d4e and toolu_01AbC9f3e2; r7", call_id="r7")
    assert identifiers_of_entry(entry) == []


def test_it_reads_tool_call_arguments_not_their_json():
    entry = EntryView(
        seq=1,
        entry_hash=CALL,
        kind="tool_call",
        role="assistant",
        text='read_file({"path": "C:\\\\Users\\\\me\\\\notes.md"})',
        content={"name": "read_file", "arguments": {"path": "C:\\Users\\me\\notes.md"}},
        tool_call_id="toolu_01",
        tool_name="read_file",
    )
    assert identifiers_of_entry(entry) == [Identifier("path", "C:\\Users\\me\\notes.md")]


def test_it_is_deterministic():
    text = "ABC-1 a.py https://x.org/y 4d74c33 --fast 3 GB 0001_initial a.py"
    assert extract_identifiers(text) == extract_identifiers(text)
    assert [i.value for i in extract_identifiers(text)] == [
        "ABC-1",
        "a.py",
        "https://x.org/y",
        "4d74c33",
        "--fast",
        "3 GB",
        "0001_initial",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # paths
        ("edit billing/refunds.py now", [("path", "billing/refunds.py")]),
        ("tail /var/log/x.log.", [("path", "/var/log/x.log")]),
        ("run ./a.sh", [("path", "./a.sh")]),
        ("python manage.py", [("path", "manage.py")]),
        (
            "open ~/notes.md and C:\\Users\\me\\a.txt",
            [("path", "~/notes.md"), ("path", "C:\\Users\\me\\a.txt")],
        ),
        ("tests/ledger_app and src/", [("path", "tests/ledger_app"), ("path", "src/")]),
        ("e.g. this, i.e. that", []),
        ("bump to v1.2 or 3.11", []),
        ("and/or P0/P1 TCP/IP 24/7", []),
        ("use os.path and self.name at example.com", []),
        ("type /compact", []),
        # urls
        ("see https://example.com/a/b.py?x=1).", [("url", "https://example.com/a/b.py?x=1")]),
        # hashes
        (
            "commit 4d74c33 and sha256:1a2b3c4d5e6f",
            [("hash", "4d74c33"), ("hash", "sha256:1a2b3c4d5e6f")],
        ),
        (
            "id 550e8400-e29b-41d4-a716-446655440000",
            [("hash", "550e8400-e29b-41d4-a716-446655440000")],
        ),
        ("deadbeef facade 1234567 abc123", []),
        # flags
        ("pytest -x --fail-fast", [("flag", "-x"), ("flag", "--fail-fast")]),
        ("--output=./out.json", [("flag", "--output"), ("path", "./out.json")]),
        ("re-run it - twice, -5 degrees, ---", []),
        # numbers with units
        (
            "12.4ms, 3 GB, 8 tests, 270,000 tokens, 99%",
            [
                ("number", "12.4ms"),
                ("number", "3 GB"),
                ("number", "8 tests"),
                ("number", "270,000 tokens"),
                ("number", "99%"),
            ],
        ),
        ("took 5m30s and cost $12.50", [("number", "5m30s"), ("number", "$12.50")]),
        ("there are 42 of them on x86", []),
        # ids
        ("fixes ABC-123 and #1234", [("id", "ABC-123"), ("id", "#1234")]),
        ("see CVE-2024-1234", [("id", "CVE-2024-1234")]),
        ("UTF-8 SHA-256 &#39; abc-123", []),
        ("call_8f3a9b2c1d4e toolu_01AbC9f3e2 fc_68a1b2c3d4", []),
        # migrations
        (
            "applied payments.0097_auto and 0001_initial",
            [("migration", "payments.0097_auto"), ("migration", "0001_initial")],
        ),
        ("migrate payments 0097", []),
    ],
)
def test_it_extracts_each_kind(text, expected):
    assert kinds(text) == expected


def test_plain_words_are_not_path_candidates(monkeypatch):
    # issue 18: every word used to go through _is_path (7.4 million calls in one fold)
    from journal_app import identifiers

    calls = []
    real = identifiers._is_path
    monkeypatch.setattr(identifiers, "_is_path", lambda t: calls.append(t) or real(t))

    found = extract_identifiers("the quick brown fox edits billing/refunds.py and tests/ today")

    assert calls == ["billing/refunds.py", "tests/"]
    assert [i.value for i in found] == ["billing/refunds.py", "tests/"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see a.py.", ["a.py"]),
        ("C:\\Users\\me\\a.txt and a:\\n", ["C:\\Users\\me\\a.txt", "a:\\n"]),
        ("~/notes.md ./run.sh ../x", ["~/notes.md", "./run.sh", "../x"]),
        ("run -rf --skip-locked-tables #1234 in 12.4ms for $12.50", None),
    ],
)
def test_the_fast_patterns_find_what_the_plain_ones_found(text, expected):
    import re

    from journal_app import identifiers

    fast = extract_identifiers(text)
    plain = {
        "path": r"(?<![\w.~/\\:@+-])(?:[A-Za-z]:)?[\w.~/\\@+-]*[\w/\\]",
        "flag": identifiers._FLAG.pattern.removeprefix("(?=-)(?:")[:-1],
        "issue": identifiers._ISSUE.pattern.removeprefix("(?=#)"),
    }
    patterns = tuple(
        (
            kind,
            re.compile(plain["path"])
            if p is identifiers._PATH_TOKEN
            else re.compile(plain["flag"])
            if p is identifiers._FLAG
            else re.compile(plain["issue"])
            if p is identifiers._ISSUE
            else re.compile(p.pattern.replace("(?=[\\d$])", "", 1), p.flags)
            if p is identifiers._NUMBER
            else p,
        )
        for kind, p in identifiers._PATTERNS
    )
    original = identifiers._PATTERNS
    identifiers._PATTERNS = patterns
    try:
        slow = extract_identifiers(text)
    finally:
        identifiers._PATTERNS = original
    assert fast == slow
    if expected is not None:
        assert [i.value for i in fast if i.kind == "path"] == expected


def test_mentions_read_the_views_stored_identifiers(monkeypatch):
    from ledger_app import mechanical

    monkeypatch.setattr(mechanical, "identifiers_of", lambda **kw: pytest.fail("extracted again"))
    stored = result("wrote out.csv in 3 s")
    stored.identifiers = (Identifier("path", "out.csv"), Identifier("number", "3 s"))

    assert mechanical.mentions("Ran the export", stored) == "; mentions: out.csv, 3 s"
    assert mechanical.mentions("Ran the export to out.csv", stored) == "; mentions: 3 s"
