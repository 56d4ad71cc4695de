"""Every invariant check names itself and what it concerns (docs/design.md section 6)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger_app.validation import (
    ArtifactInfo,
    Expectations,
    Meter,
    detect_format,
    redact,
    secret_spans,
    validate_frontend,
    validate_request,
)

CALL_A, CALL_B = "sha256:" + "a" * 64, "sha256:" + "b" * 64
RESULT_A, RESULT_B = "c" * 64, "d" * 64
OPENAI_KEY = "sk-PLACEHOLDER-not-a-real-key-000000000000"


def parallel_openai():
    return [
        {"role": "user", "content": "Read both files."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read", "arguments": "{}"},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "read", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "one"},
        {"role": "tool", "tool_call_id": "call_2", "content": "two"},
        {"role": "assistant", "content": "Both read."},
    ]


def parallel_anthropic():
    return {
        "system": "Be careful.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Read both files."}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}},
                    {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "one"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "two"},
                ],
            },
        ],
    }


def checks(report):
    return [p.check for p in report.problems]


def test_a_valid_openai_request_passes_every_structural_check():
    report = validate_request(parallel_openai())
    assert report.ok, report.problems
    assert report.format == "openai" and report.tokens > 0


def test_a_valid_anthropic_request_passes_every_structural_check():
    report = validate_request(parallel_anthropic())
    assert report.ok, report.problems
    assert report.format == "anthropic"


def test_dropping_one_of_two_parallel_results_names_the_call_and_its_entry():
    messages = parallel_openai()
    del messages[3]
    expect = Expectations(calls={"call_1": CALL_A, "call_2": CALL_B})
    report = validate_request(messages, expect=expect)
    [problem] = report.failed("orphan_tool_call")
    assert problem.ref == "call_2" and problem.index == 1
    assert problem.entry == CALL_B
    assert "one of 2 parallel calls" in problem.message


def test_dropping_one_of_two_parallel_anthropic_results_names_the_tool_use():
    request = parallel_anthropic()
    request["messages"][2]["content"].pop()
    report = validate_request(request)
    assert checks(report) == ["orphan_tool_call"]
    assert report.problems[0].ref == "toolu_2"


def test_a_parallel_result_after_another_message_is_a_split_not_two_orphans():
    messages = parallel_openai()
    result_b = messages.pop(3)
    messages.insert(4, result_b)  # after "Both read."
    report = validate_request(messages)
    assert checks(report) == ["split_parallel_calls"]
    assert report.problems[0].ref == "call_2"


def test_a_result_without_its_call_is_an_orphan_result_naming_its_entry():
    messages = parallel_openai()[2:]  # starts at the first tool result (case 01's bug)
    expect = Expectations(results={"call_1": RESULT_A, "call_2": RESULT_B})
    report = validate_request(messages, expect=expect)
    orphans = report.failed("orphan_tool_result")
    assert [p.ref for p in orphans] == ["call_1", "call_2"]
    assert orphans[0].entry == "sha256:" + RESULT_A and orphans[0].index == 0


def test_an_anthropic_tool_use_without_result_in_the_next_message_is_an_orphan():
    # case 04: the dangling tool_use before a plain user turn
    request = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Rename it."}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_A", "name": "Edit", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "text", "text": "Actually, run the tests first."}],
            },
        ]
    }
    report = validate_request(request)
    assert checks(report) == ["orphan_tool_call"] and report.problems[0].ref == "toolu_A"


def test_empty_and_reasoning_only_messages_are_reported():
    messages = [
        {"role": "user", "content": ""},
        {"role": "assistant", "content": None, "reasoning_content": "thinking hard"},
        {"role": "user", "content": [{"type": "text", "text": ""}]},
    ]
    report = validate_request(messages)
    assert checks(report) == ["empty_message", "reasoning_only_message", "empty_message"]
    anthropic = {
        "messages": [
            {"role": "user", "content": "Hi"},
            {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "hmm", "signature": "x"}],
            },
        ]
    }
    assert checks(validate_request(anthropic)) == ["reasoning_only_message"]


def test_a_lone_surrogate_is_reported_with_its_path():
    messages = json.loads('[{"role": "user", "content": "bad \\ud800 text"}]')
    report = validate_request(messages)
    [problem] = report.failed("lone_surrogate")
    assert problem.ref == "messages[0].content" and problem.index == 0
    assert "U+D800" in problem.message


def test_a_duplicate_call_id_is_reported():
    messages = parallel_openai()
    messages[1]["tool_calls"][1]["id"] = "call_1"
    messages[3]["tool_call_id"] = "call_1"
    assert "duplicate_tool_call_id" in checks(validate_request(messages))


def test_budgets_are_checked_against_working_and_hard_limit_minus_reserve():
    meter = Meter(count=lambda t: 0, per_message=10, per_request=0)
    messages = parallel_openai()  # 5 messages = 50 tokens
    assert validate_request(messages, working_budget=50, hard_limit=60, meter=meter).ok
    report = validate_request(
        messages, working_budget=49, hard_limit=60, output_reserve=11, meter=meter
    )
    assert checks(report) == ["within_working_budget", "within_hard_limit"]
    assert "60 minus the output reserve 11 = 49" in report.problems[1].message


def test_an_image_costs_a_flat_figure_not_its_base64_payload():
    payload = "A" * 400_000
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What does this show?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{payload}"}},
            ],
        }
    ]
    report = validate_request(messages)
    assert 1000 < report.tokens < 1100


def test_altering_one_byte_of_a_pin_fails_naming_the_pin_and_its_entry():
    rule = "You are READ-ONLY: never call write or edit."
    entry = "e" * 64
    expect = Expectations(pins=[("pin:eeee", entry, rule)])
    good = [{"role": "system", "content": rule}, {"role": "user", "content": "Go."}]
    assert validate_request(good, expect=expect).ok
    bad = [{"role": "system", "content": rule.replace("READ-ONLY", "READ-0NLY")}, good[1]]
    [problem] = validate_request(bad, expect=expect).failed("pin_verbatim")
    assert problem.ref == "pin:eeee" and problem.entry == "sha256:" + entry


def test_the_current_user_goal_must_be_present():
    expect = Expectations(goal=("f" * 64, "Add pagination."))
    report = validate_request([{"role": "user", "content": "Something else."}], expect=expect)
    assert checks(report) == ["current_user_goal"]


def test_interrupted_calls_and_pending_approvals_must_be_in_the_task_state():
    expect = Expectations(interrupted=[("t2", "1" * 64)], approvals=[("ap-9", "2" * 64)])
    plain = [{"role": "user", "content": "Continue."}]
    report = validate_request(plain, expect=expect)
    assert checks(report) == ["task_state", "task_state"]
    assert {p.ref for p in report.problems} == {"t2", "ap-9"}
    stated = plain + [
        {
            "role": "user",
            "content": "[task state: open]\n- interrupted call t2 ...\n- pending approval ap-9 ...",
        }
    ]
    assert validate_request(stated, expect=expect).ok


def receipt_message(reference, content_hash):
    return {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": f"[artifact receipt: stored outside]\nreference: {reference}\ncontent_hash: sha256:{content_hash}",
    }


def test_a_receipt_pointing_at_a_missing_artifact_fails_naming_the_reference_and_entry():
    digest = "9" * 64
    ref = f"artifact://acme/{digest}"
    messages = parallel_openai()[:3]
    messages[1]["tool_calls"].pop()
    messages[2] = receipt_message(ref, digest)
    expect = Expectations(sources=[["u" * 64], [CALL_A], [RESULT_A]])
    report = validate_request(messages, expect=expect, resolve_artifact=lambda r: None)
    [problem] = report.failed("artifact_reference")
    assert problem.ref == ref and problem.index == 2 and problem.entry == "sha256:" + RESULT_A
    # the same receipt resolves when the store knows it, and fails when its bytes changed
    known = {ref: ArtifactInfo(digest, True)}
    assert validate_request(messages, expect=expect, resolve_artifact=known.get).ok
    changed = {ref: ArtifactInfo(digest, False)}
    assert checks(validate_request(messages, expect=expect, resolve_artifact=changed.get)) == [
        "artifact_hash"
    ]


def test_a_receipt_stating_another_hash_fails_the_hash_check():
    digest, other = "9" * 64, "8" * 64
    ref = f"artifact://acme/{digest}"
    messages = parallel_openai()[:3]
    messages[1]["tool_calls"].pop()
    messages[2] = receipt_message(ref, other)
    report = validate_request(
        messages, expect=Expectations(), resolve_artifact={ref: ArtifactInfo(digest)}.get
    )
    assert checks(report) == ["artifact_hash"]


def test_a_secret_left_in_a_tool_result_fails_naming_the_message_and_entry():
    messages = parallel_openai()[:3]
    messages[1]["tool_calls"].pop()
    messages[2]["content"] = f"OPENAI_API_KEY={OPENAI_KEY}\nEDITOR=vim"
    expect = Expectations(sources=[["u" * 64], [CALL_A], [RESULT_A]])
    report = validate_request(messages, expect=expect, check_secrets=True)
    [problem] = report.failed("no_secrets")
    assert problem.index == 2 and problem.entry == "sha256:" + RESULT_A


def test_a_secret_left_in_a_frontend_tool_result_fails_naming_the_entry():
    view = {
        "items": [
            {
                "seq": 3,
                "role": "tool",
                "kind": "tool_result",
                "tool": "terminal",
                "text": f"KEY={OPENAI_KEY}",
            }
        ]
    }
    report = validate_frontend(view, entry_of={3: RESULT_A})
    [problem] = report.failed("no_secrets")
    assert problem.entry == "sha256:" + RESULT_A and "seq 3" in problem.message


def test_hidden_reasoning_and_private_metadata_fail_the_frontend_view():
    thought = "I should not reveal that the migration is risky to the user."
    view = {
        "items": [
            {"seq": 1, "role": "assistant", "kind": "reasoning", "text": "x"},
            {"seq": 2, "role": "assistant", "kind": "message", "text": f"Done. {thought}"},
            {"seq": 3, "role": "tool", "kind": "tool_result", "text": "ok", "tool_call_id": "c1"},
        ]
    }
    report = validate_frontend(view, reasoning=[thought])
    assert checks(report) == ["no_hidden_reasoning", "no_hidden_reasoning", "no_private_metadata"]


def test_redaction_keeps_names_and_removes_values():
    text = f"OPENAI_API_KEY={OPENAI_KEY}\nAWS_SECRET_ACCESS_KEY=PLACEHOLDERnotArealSecret0000000000000000\nEDITOR=vim"
    clean, kinds = redact(text)
    assert OPENAI_KEY not in clean and "PLACEHOLDERnotArealSecret" not in clean
    assert (
        "OPENAI_API_KEY=" in clean and "AWS_SECRET_ACCESS_KEY=" in clean and "EDITOR=vim" in clean
    )
    assert len(kinds) == 2
    assert secret_spans(clean) == []


def test_content_hashes_are_not_taken_for_secrets():
    text = "content_hash: sha256:" + "ab12" * 16 + "\nreference: artifact://t/" + "cd34" * 16
    assert secret_spans(text) == []


def test_anything_that_is_not_a_request_is_reported_not_raised():
    for junk in (None, 3, "text", {"messages": "nope"}, [1, None, {"role": 5}]):
        report = validate_request(junk)
        assert not report.ok
        assert {p.check for p in report.problems} == {"malformed_message"}


def test_format_detection():
    assert detect_format(parallel_openai()) == "openai"
    assert detect_format(parallel_anthropic()) == "anthropic"
    assert detect_format([{"role": "user", "content": "hi"}]) == "openai"


def test_an_anthropic_request_must_open_with_a_user_turn():
    request = {"messages": [{"role": "assistant", "content": [{"type": "text", "text": "Hello."}]}]}
    [problem] = validate_request(request, fmt="anthropic").problems
    assert problem.check == "malformed_message" and problem.index == 0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "role",
                    "content",
                    "tool_calls",
                    "tool_call_id",
                    "type",
                    "id",
                    "text",
                    "function",
                    "name",
                    "arguments",
                    "tool_use_id",
                    "input",
                    "system",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(request=json_values, fmt=st.sampled_from([None, "openai", "anthropic"]))
def test_any_json_value_gets_a_report_never_an_exception(request, fmt):
    report = validate_request(
        request, fmt=fmt, working_budget=50, hard_limit=60, check_secrets=True
    )
    assert report.to_dict()["format"] in ("openai", "anthropic")
