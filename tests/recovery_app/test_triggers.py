"""The trigger scan (pure): identifiers, the fixed vocabulary, the 24-entry window."""

from recovery_app.triggers import WINDOW, ScanItem, find_identifiers, find_phrases, scan

DOUBT = "The migration 0042_add_refund_index may have been wrong: the earlier result may have been wrong."


def _items(*texts, role="user", start=1):
    return [ScanItem(start + i, "message", role, t) for i, t in enumerate(texts)]


def test_it_fires_on_a_named_migration_and_doubt():
    result = scan(_items("Fine.", DOUBT))
    assert result.fired and result.trigger_seqs == [2]
    assert result.terms[0] == "0042_add_refund_index"
    assert {"seq": 2, "phrase": "may have been"} in result.phrases
    assert result.window == (1, 2)
    assert "0042_add_refund_index" in result.reason and "'may have been'" in result.reason


def test_use_the_same_method_as_last_time_does_not_fire():
    result = scan(_items("Use the same method as last time.", "Please continue."))
    assert not result.fired and result.trigger_seqs == [] and result.terms == []
    assert result.reason == "no identifier or uncertainty/correction phrase in the last 2 entries"


def test_it_scans_only_the_most_recent_24_entries():
    old = _items(DOUBT)
    recent = _items(*["ok"] * WINDOW, start=2)
    assert not scan(old + recent).fired
    assert scan(old + recent[:-1]).fired


def test_tool_traffic_and_derived_entries_never_fire():
    items = [
        ScanItem(1, "tool_call", "assistant", 'exec({"command": "git revert a1b2c3d"})'),
        ScanItem(2, "tool_result", "tool", "Reverted billing/refunds.py, was wrong"),
        ScanItem(3, "event", "runtime", "summary: the migration may have been wrong", derived=True),
        ScanItem(4, "message", "user", "summary: it was wrong", derived=True),
        ScanItem(5, "reasoning", "assistant", "maybe this was wrong"),
    ]
    assert not scan(items).fired


def test_an_identifier_fires_only_from_an_authoritative_message_but_doubt_from_any():
    assert not scan(_items("Reading billing/refunds.py now.", role="assistant")).fired
    assert scan(_items("Look at billing/refunds.py.", role="user")).fired
    assert scan(_items("Actually the earlier run failed.", role="assistant")).fired


def test_matches_already_scanned_do_not_fire_again():
    result = scan(_items("Fine.", DOUBT), skip_upto=2)
    assert not result.fired and "already scanned (seq <= 2)" in result.reason
    assert result.terms == ["0042_add_refund_index"]  # still listed for the record


def test_it_finds_each_kind_of_identifier_once():
    text = (
        "See ABC-123 and #45; commit a1b2c3d4 (sha256:" + "ab" * 32 + "); run "
        "python manage.py migrate billing.0042_add_refund_index --fake -x in src/app/main.py, "
        "then retry call_12."
    )
    found = find_identifiers(text)
    kinds = {v: k for k, v in found}
    assert kinds["ABC-123"] == "ticket" and kinds["#45"] == "ticket"
    assert kinds["a1b2c3d4"] == "hash" and kinds["sha256:" + "ab" * 32] == "hash"
    assert kinds["billing.0042_add_refund_index"] == "migration"
    assert kinds["--fake"] == "flag" and kinds["-x"] == "flag"
    assert kinds["src/app/main.py"] == "path" and kinds["manage.py"] == "path"
    assert kinds["call_12"] == "id"
    assert len(found) == len({v for _, v in found})


def test_plain_words_numbers_and_encodings_are_not_identifiers():
    assert find_identifiers("We shipped 1234567 rows, e.g. as UTF-8, to deadbeef.") == []
    assert find_identifiers("use the same method as last time") == []


def test_the_vocabulary_is_matched_on_word_boundaries_case_insensitively():
    assert find_phrases("ACTUALLY, please Roll  Back the change") == ["actually", "roll back"]
    assert find_phrases("It reverted cleanly; the wrongful path") == ["reverted"]
    assert find_phrases("factually") == []


def test_terms_come_from_the_firing_messages_first():
    items = [
        ScanItem(1, "message", "user", "Ship ABC-123."),
        ScanItem(2, "message", "assistant", "Done with src/app.py."),
        ScanItem(3, "message", "user", "Actually, 0042_add_refund_index was wrong."),
    ]
    assert scan(items, skip_upto=2).terms == ["0042_add_refund_index"]
    # a phrase alone fires; the doubt is about what the window's messages name
    items[2] = ScanItem(3, "message", "user", "Actually, that was wrong.")
    assert scan(items, skip_upto=2).terms == ["ABC-123", "src/app.py"]


def test_identifiers_only_in_the_agents_messages_are_named_in_the_reason_not_denied():
    items = [
        ScanItem(1, "message", "user", "Please continue."),
        ScanItem(2, "message", "assistant", "I edited billing/refunds.py and ran 0042_add_index."),
    ]
    result = scan(items)
    assert not result.fired
    assert "no identifier" not in result.reason
    assert result.reason.startswith("2 identifier(s) in the last 2 entries, all in the agent's")


def test_nothing_found_says_what_was_read():
    from recovery_app.services.attempt import nothing_found_reason

    read_no_claim = nothing_found_reason(queries=2, verified=2, discarded=[], rejected=[])
    assert read_no_claim.startswith("2 verified read(s) gave no accepted claim")
    assert "no raw entry matched" not in read_no_claim
    rejected = nothing_found_reason(
        queries=1, verified=1, discarded=[], rejected=[{"reason": "quote not found"}]
    )
    assert "claim rejected: quote not found" in rejected
    nothing = nothing_found_reason(queries=3, verified=0, discarded=[], rejected=[])
    assert nothing == "no raw entry matched 3 queries"
