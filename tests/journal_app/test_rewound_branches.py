"""A Claude Code rewind (edit-and-resend) is a branch, never the live context (issue 15,
item 5; fresh-eyes finding: the abandoned "rm -rf logs/" became a P0 pin).

Records off the live ``parentUuid`` path go to a journal branch of their own
(``rewound-<uuid>``); the live branch holds the shared prefix and the rewound-to path.
"""

from __future__ import annotations

import json

import pytest

from journal_app.content import content_text
from journal_app.formats import claude_code
from journal_app.formats.source import read_source
from journal_app.models import Journal
from journal_app.services import journal_import
from ledger_app.services import ledger_fold
from ledger_app.services.context import context_build

pytestmark = pytest.mark.django_db

ABANDONED = "Delete all the logs with rm -rf logs/"


def _rec(uuid, parent, rtype, content, **extra):
    return {
        "type": rtype,
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "s-1",
        "timestamp": f"2026-01-01T00:00:0{uuid[-1]}Z",
        "message": {"role": rtype, "content": content},
        **extra,
    }


def _session(tmp_path):
    records = [
        _rec("u0000001", None, "user", "Look at the logs folder."),
        _rec("a0000002", "u0000001", "assistant", [{"type": "text", "text": "It holds 3 files."}]),
        _rec("u0000003", "a0000002", "user", ABANDONED),  # rewound: edited and resent
        _rec("a0000004", "u0000003", "assistant", [{"type": "text", "text": "OK, deleting."}]),
        _rec("u0000005", "a0000002", "user", "Summarize the logs instead."),
        _rec("a0000006", "u0000005", "assistant", [{"type": "text", "text": "Summary: all ok."}]),
    ]
    path = tmp_path / "rewind.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def test_the_importer_puts_the_rewound_records_on_their_own_branch(tmp_path):
    parsed = claude_code.parse(read_source(_session(tmp_path)))
    branches = {content_text(e.kind, e.content): e.branch for e in parsed.entries}
    assert branches[ABANDONED] == "rewound-u0000003"
    assert branches["OK, deleting."] == "rewound-u0000003"
    assert branches["Summarize the logs instead."] == ""
    assert branches["Look at the logs folder."] == ""
    assert parsed.metadata["rewound_branches"] == {"rewound-u0000003": 2}


def _write(tmp_path, records):
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return claude_code.parse(read_source(path))


def test_parallel_tool_calls_written_as_a_tree_stay_on_the_live_branch(tmp_path):
    """Fresh-eyes finding: Claude Code writes parallel calls as a tree (the first result's
    parent is the first call, a sibling of the second call); that is no rewind, and the
    import must keep every call and result on the live branch."""
    use = lambda i, n: [{"type": "tool_use", "id": i, "name": n, "input": {}}]  # noqa: E731
    res = lambda i: [{"type": "tool_result", "tool_use_id": i, "content": "ok"}]  # noqa: E731
    parsed = _write(
        tmp_path,
        [
            _rec("u0000001", None, "user", "Read both files."),
            _rec("b0000002", "u0000001", "assistant", use("wa", "Read")),
            _rec("c0000003", "b0000002", "assistant", use("wb", "Read")),
            _rec("d0000004", "b0000002", "user", res("wa")),
            _rec("e0000005", "c0000003", "user", res("wb")),
            _rec("f0000006", "e0000005", "assistant", [{"type": "text", "text": "Both read."}]),
        ],
    )
    assert {e.branch for e in parsed.entries} == {""}
    assert [e.kind for e in parsed.entries].count("tool_result") == 2


def test_a_rewound_first_message_is_a_branch_too(tmp_path):
    """Fresh-eyes finding: the first prompt edited and resent leaves a second root; it was
    kept on the live branch (and pinned, and sent to the model)."""
    parsed = _write(
        tmp_path,
        [
            _rec("a0000001", None, "user", "ABANDONED: delete the production database now"),
            _rec("a0000002", "a0000001", "assistant", [{"type": "text", "text": "Deleting."}]),
            _rec("b0000003", None, "user", "LIVE: list the files"),
            _rec("b0000004", "b0000003", "assistant", [{"type": "text", "text": "a.py"}]),
        ],
    )
    branches = {content_text(e.kind, e.content): e.branch for e in parsed.entries}
    assert branches["ABANDONED: delete the production database now"] == "rewound-a0000001"
    assert branches["Deleting."] == "rewound-a0000001"
    assert branches["LIVE: list the files"] == "" and branches["a.py"] == ""


def test_a_session_without_rewinds_is_one_branch(tmp_path):
    path = _session(tmp_path)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:2] + lines[4:]) + "\n")
    # the live path now skips nothing: every record stays on the named branch
    parsed = claude_code.parse(read_source(path))
    assert {e.branch for e in parsed.entries} == {""}
    assert "rewound_branches" not in parsed.metadata


def test_the_live_branch_folds_and_builds_without_the_abandoned_request(tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path / "media"
    result = journal_import(path=_session(tmp_path), tenant="acme", session="rewind")
    live = result.journal
    assert (live.lane, live.branch) == ("main", "main")
    assert [j.branch for j in result.journals] == ["main", "rewound-u0000003"]
    rewound = Journal.objects.get(session=live.session, branch="rewound-u0000003")
    assert [e.text for e in rewound.entries.order_by("seq")] == [ABANDONED, "OK, deleting."]
    assert ABANDONED not in [e.text for e in live.entries.all()]

    fold = ledger_fold(journal=live).fold
    pins = [f["text"] for f in fold.state_dict["facts"].values() if f.get("pin")]
    assert "Summarize the logs instead." in pins and ABANDONED not in pins
    context = context_build(journal=live, working_budget=10_000, hard_limit=10_000)
    assert context.status == "ok" and ABANDONED not in json.dumps(context.model_view)

    again = journal_import(path=_session(tmp_path), tenant="acme", session="rewind")
    assert again.append.appended == 0  # idempotent on every branch
