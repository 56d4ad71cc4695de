"""The OpenAI Chat Completions proxy, end to end: the real ``openai`` client, the live server,
a scripted upstream on 127.0.0.1 (Tests)."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from journal_app.models import Entry, Journal, Session
from ledger_app.models import Fold
from tests.proxy_app.conftest import entries, shape

SYSTEM = "You are a careful coding agent. Never push to main."


def client(live_server, key: str, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{live_server.url}/proxy/openai/v1",
        api_key="sk-client-secret",
        default_headers={"X-Ledgerkeep-Key": key, **headers},
        max_retries=0,
        timeout=10,
    )


def tool_results(message, outputs: dict[str, str]) -> list[dict]:
    return [
        {"role": "tool", "tool_call_id": c.id, "content": outputs[c.function.name]}
        for c in message.tool_calls
    ]


def run_five_turns(live_server, key, upstream, **headers):
    """A runtime's loop: full history every call, parallel tool calls answered together."""
    upstream.push(calls=[("call_a", "read_file", {"path": "a.py"}), ("call_b", "ls", {"dir": "."})])
    upstream.push(calls=[("call_c", "run_tests", {"k": "auth"})])
    upstream.push(text="The tests fail in auth.py line 3.")
    upstream.push(calls=[("call_d", "edit", {"path": "auth.py"}), ("call_e", "run_tests", {})])
    upstream.push(text="Fixed: all 12 tests pass.")
    c = client(live_server, key, **headers)
    messages: list = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Fix auth."},
    ]
    outputs = {
        "read_file": "def auth(): ...",
        "ls": "a.py auth.py",
        "run_tests": "1 failed",
        "edit": "ok",
    }
    raws = []
    for turn in range(5):
        raw = c.chat.completions.with_raw_response.create(model="scripted-model", messages=messages)
        raws.append(raw)
        answer = raw.parse().choices[0].message
        messages.append(answer)
        if answer.tool_calls:
            messages += tool_results(answer, outputs)
        elif turn == 2:
            messages.append({"role": "user", "content": "Then fix it."})
    return messages, raws


def test_five_turns_with_parallel_calls_journal_each_message_once(live_server, key, upstream):
    messages, raws = run_five_turns(live_server, key, upstream)
    session = raws[0].headers["X-Ledgerkeep-Session"]
    assert session.startswith("px-")
    assert {r.headers["X-Ledgerkeep-Session"] for r in raws} == {session}
    rows = entries(session)
    assert shape(rows) == [
        ("message", "system", SYSTEM),
        ("message", "user", "Fix auth."),
        ("tool_call", "assistant", "call_a"),
        ("tool_call", "assistant", "call_b"),
        ("tool_result", "tool", "call_a"),
        ("tool_result", "tool", "call_b"),
        ("tool_call", "assistant", "call_c"),
        ("tool_result", "tool", "call_c"),
        ("message", "assistant", "The tests fail in auth.py line 3."),
        ("message", "user", "Then fix it."),
        ("tool_call", "assistant", "call_d"),
        ("tool_call", "assistant", "call_e"),
        ("tool_result", "tool", "call_d"),
        ("tool_result", "tool", "call_e"),
        ("message", "assistant", "Fixed: all 12 tests pass."),
    ]
    # one branch only; the provider's usage is the answer's token figure
    assert Journal.objects.filter(session__key=session).count() == 1
    assert rows[-1].meta_dict["usage"] == {
        "prompt_tokens": 120,
        "completion_tokens": 30,
        "total_tokens": 150,
    }
    assert rows[2].meta_dict["finish_reason"] == "tool_calls"
    # the upstream got the requests unchanged, with the client's own credentials
    assert upstream.requests[4]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_e",
        "content": "1 failed",
    }
    assert upstream.headers[0]["authorization"] == "Bearer sk-client-secret"
    assert "x-ledgerkeep-key" not in upstream.headers[0]
    assert raws[-1].headers["X-Ledgerkeep-Compacted"] == "false"
    assert Session.objects.get(key=session).source_format == "proxy-openai"


def test_the_same_request_twice_appends_nothing(live_server, key, upstream):
    upstream.push(text="Hello.")
    upstream.push(text="Hello.")
    c = client(live_server, key, **{"X-Ledgerkeep-Session": "twice"})
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi"}]
    c.chat.completions.create(model="m", messages=messages)
    before = [e.entry_hash for e in entries("twice")]
    c.chat.completions.create(model="m", messages=messages)
    assert [e.entry_hash for e in entries("twice")] == before
    assert len(before) == 3
    assert Journal.objects.filter(session__key="twice").count() == 1


def test_an_edited_history_becomes_a_branch(live_server, key, upstream):
    upstream.push(text="Paris.")
    upstream.push(text="Use a list.")
    upstream.push(text="Rome.")
    upstream.push(text="Sure.")
    c = client(live_server, key, **{"X-Ledgerkeep-Session": "edit"})
    first = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Capital of France?"},
    ]
    a1 = c.chat.completions.create(model="m", messages=first).choices[0].message.content
    second = [*first, {"role": "assistant", "content": a1}, {"role": "user", "content": "Format?"}]
    c.chat.completions.create(model="m", messages=second)
    main_before = [e.entry_hash for e in entries("edit")]
    # edit-and-resend: the first user message changed
    edited = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Capital of Italy?"},
    ]
    raw = c.chat.completions.with_raw_response.create(model="m", messages=edited)
    assert raw.headers["X-Ledgerkeep-Branch"] == "b2"
    assert raw.headers["X-Ledgerkeep-Branched-From"] == "main@1"
    # main is untouched; the branch holds the shared prefix, then the edit and its answer
    assert [e.entry_hash for e in entries("edit")] == main_before
    branch = entries("edit", "b2")
    assert shape(branch) == [
        ("message", "system", SYSTEM),
        ("message", "user", "Capital of Italy?"),
        ("message", "assistant", "Rome."),
    ]
    assert branch[1].meta_dict["branched_from"]["entry"] == "sha256:" + main_before[0]
    # continuing the edited conversation goes on in the branch, without another fork
    follow = [
        *edited,
        {"role": "assistant", "content": "Rome."},
        {"role": "user", "content": "Thanks"},
    ]
    raw = c.chat.completions.with_raw_response.create(model="m", messages=follow)
    assert raw.headers["X-Ledgerkeep-Branch"] == "b2"
    assert len(entries("edit", "b2")) == 5
    assert Journal.objects.filter(session__key="edit").count() == 2


def test_a_request_over_the_working_budget_reaches_the_upstream_compacted(
    live_server, key, upstream
):
    # a long tool-using conversation, journaled call by call with a large budget
    turns = 6
    for n in range(turns):
        upstream.push(calls=[(f"call_{n}a", "grep", {"q": n}), (f"call_{n}b", "cat", {"f": n})])
    upstream.push(text="done")
    c = client(live_server, key, **{"X-Ledgerkeep-Session": "long"})
    messages: list = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Find the flaky test in tests/test_sync.py."},
    ]
    for _ in range(turns):
        answer = c.chat.completions.create(model="m", messages=messages).choices[0].message
        messages.append(answer)
        messages += [
            {
                "role": "tool",
                "tool_call_id": t.id,
                "content": f"output {t.id} " + "lorem ipsum " * 150,
            }
            for t in answer.tool_calls
        ]
    small = client(
        live_server, key, **{"X-Ledgerkeep-Session": "long", "X-Ledgerkeep-Working-Budget": "1500"}
    )
    raw = small.chat.completions.with_raw_response.create(model="m", messages=messages)
    assert raw.parse().choices[0].message.content == "done"
    assert raw.headers["X-Ledgerkeep-Compacted"] == "true"
    before = int(raw.headers["X-Ledgerkeep-Tokens-Before"])
    after = int(raw.headers["X-Ledgerkeep-Tokens-After"])
    assert before > 1500 >= after
    assert Fold.objects.filter(journal__session__key="long").exists()
    assert raw.headers["X-Ledgerkeep-Fold"].isdigit()
    sent = upstream.requests[-1]["messages"]
    assert len(json.dumps(sent)) < len(json.dumps(upstream.requests[-2]["messages"]))
    # every pin verbatim, first; every tool call paired with its result
    assert sent[0] == {"role": "system", "content": SYSTEM}
    assert {"role": "user", "content": "Find the flaky test in tests/test_sync.py."} in sent
    calls = [t["id"] for m in sent for t in m.get("tool_calls") or []]
    results = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert sorted(calls) == sorted(results)
    # the ledger checkpoint carries support hashes
    assert any("sha256:" in (m.get("content") or "") for m in sent if m["role"] != "tool")


def test_no_valid_context_is_the_explicit_failure_and_nothing_is_forwarded(
    live_server, key, upstream
):
    c = client(live_server, key, **{"X-Ledgerkeep-Working-Budget": "20"})
    messages = [
        {"role": "system", "content": SYSTEM + " " + "rule " * 400},
        {"role": "user", "content": "go"},
    ]
    with pytest.raises(openai.UnprocessableEntityError) as info:
        c.chat.completions.create(model="m", messages=messages)
    body = info.value.response.json()
    assert body["code"] == "context_failed"
    assert set(body) == {"code", "message", "field", "entry"}
    assert upstream.requests == []
    session = info.value.response.headers["X-Ledgerkeep-Session"]
    assert len(entries(session)) == 2  # the client's messages are kept
    # recorded once, with the budget the agent sent (not the headroom attempt's), for the
    # session's overview
    from audit_app.models import AuditEvent

    failed = AuditEvent.objects.filter(action="context.failed")
    assert [(e.details["surface"], e.details["working_budget"]) for e in failed] == [("proxy", 20)]


def test_streaming_passes_events_through_and_journals_the_answer(live_server, key, upstream):
    upstream.push(text="one two three four")
    upstream.push(calls=[("call_s", "ls", {"dir": "src"})])
    c = client(live_server, key, **{"X-Ledgerkeep-Session": "stream"})
    messages: list = [{"role": "user", "content": "count"}]
    pieces = [
        ch.choices[0].delta.content
        for ch in c.chat.completions.create(model="m", messages=messages, stream=True)
        if ch.choices and ch.choices[0].delta.content
    ]
    assert "".join(pieces) == "one two three four"
    assert len(pieces) == 4  # the chunks arrived as the upstream sent them
    messages.append({"role": "assistant", "content": "one two three four"})
    messages.append({"role": "user", "content": "list src"})
    stream = c.chat.completions.create(model="m", messages=messages, stream=True)
    args = "".join(
        ch.choices[0].delta.tool_calls[0].function.arguments or ""
        for ch in stream
        if ch.choices and ch.choices[0].delta.tool_calls
    )
    assert json.loads(args) == {"dir": "src"}
    rows = entries("stream")
    assert shape(rows) == [
        ("message", "user", "count"),
        ("message", "assistant", "one two three four"),
        ("message", "user", "list src"),
        ("tool_call", "assistant", "call_s"),
    ]
    assert rows[3].content == {"name": "ls", "arguments": {"dir": "src"}}
    assert rows[1].meta_dict["streamed"] is True
    assert "interrupted" not in rows[1].meta_dict


def test_a_client_that_leaves_mid_stream_leaves_the_partial_answer_interrupted(
    live_server, key, upstream
):
    upstream.push(text=" ".join(f"w{n}" for n in range(200)), chunk_delay=0.01)
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "talk"}]}
    url = f"{live_server.url}/proxy/openai/v1/chat/completions"
    headers = {"X-Ledgerkeep-Key": key, "X-Ledgerkeep-Session": "leave"}
    with httpx.Client(timeout=10) as h, h.stream("POST", url, json=body, headers=headers) as r:
        assert r.status_code == 200
        got = b""
        for chunk in r.iter_bytes():
            got += chunk
            if got.count(b"data:") >= 5:
                break
    # the server notices the closed socket on a later write, then journals what it had
    import time

    for _ in range(200):  # a deadline of 20 s on a loaded machine, not a timing check
        rows = entries("leave")
        if len(rows) == 2:
            break
        time.sleep(0.1)
    assert len(rows) == 2
    partial = rows[1]
    assert partial.meta_dict["interrupted"] is True
    assert partial.text.startswith("w0 w1 w2")
    assert not partial.text.endswith("w199")
    # the retry (the same request) still matches: the interrupted answer is not history
    upstream.push(text="short")
    with httpx.Client(timeout=10) as h:
        r = h.post(url, json={**body, "stream": False}, headers=headers)
    assert r.status_code == 200
    rows = entries("leave")
    assert [e.text for e in rows][2:] == ["short"]
    assert Journal.objects.filter(session__key="leave").count() == 1


def test_upstream_errors_come_back_and_the_messages_are_journaled(
    live_server, key, upstream, settings
):
    c = client(live_server, key, **{"X-Ledgerkeep-Session": "errors"})
    messages = [{"role": "user", "content": "first"}]
    upstream.push(status=500)
    with pytest.raises(openai.InternalServerError) as info:
        c.chat.completions.create(model="m", messages=messages)
    assert info.value.response.json() == {
        "error": {"message": "scripted failure", "type": "server"}
    }
    assert shape(entries("errors")) == [("message", "user", "first")]

    settings.UPSTREAM_TIMEOUT_SECONDS = 0.3
    upstream.push(text="late", delay=1.5)
    messages = [
        *messages,
        {"role": "assistant", "content": "?"},
        {"role": "user", "content": "second"},
    ]
    with pytest.raises(openai.APIStatusError) as info:
        c.chat.completions.create(model="m", messages=messages)
    assert info.value.status_code == 504
    assert info.value.response.json()["code"] == "upstream_timeout"
    assert [e.text for e in entries("errors")] == ["first", "?", "second"]

    settings.UPSTREAM_OPENAI_BASE_URL = "http://127.0.0.1:9/v1"  # nothing listens there
    messages = [*messages, {"role": "user", "content": "third"}]
    with pytest.raises(openai.APIStatusError) as info:
        c.chat.completions.create(model="m", messages=messages)
    assert info.value.status_code == 502
    assert info.value.response.json()["code"] == "upstream_unreachable"
    assert [e.text for e in entries("errors")][-1] == "third"
    # each failed call is recorded for the session's overview: status, error, after which seq
    from audit_app.models import AuditEvent

    failed = AuditEvent.objects.filter(action="model_call.failed").order_by("pk")
    assert [(e.details["status"], e.details["revision"]) for e in failed] == [
        (500, 1),
        (504, 3),
        (502, 4),
    ]
    assert "scripted failure" in failed[0].details["error"]
    assert failed[0].details["surface"] == "proxy" and failed[0].details["format"] == "openai"


def test_the_server_key_replaces_the_client_credentials(live_server, key, upstream, settings):
    settings.UPSTREAM_OPENAI_API_KEY = "sk-server"
    upstream.push(text="ok")
    client(live_server, key).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}]
    )
    assert upstream.headers[0]["authorization"] == "Bearer sk-server"


# ---------------------------------------------------------------- bad input


def post(live_server, body, headers) -> httpx.Response:
    return httpx.post(
        f"{live_server.url}/proxy/openai/v1/chat/completions", json=body, headers=headers
    )


GOOD = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("header", [None, "lk_00000000_" + "x" * 43, "nonsense"])
def test_a_missing_or_wrong_key_is_401_before_anything(live_server, upstream, tenant, header):
    headers = {"X-Ledgerkeep-Key": header} if header else {}
    r = post(live_server, GOOD, headers)
    assert r.status_code == 401
    assert r.json()["code"] == "unauthenticated"
    assert upstream.requests == []
    assert Entry.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": [{"content": "hi"}]}, "messages[0].role"),
        ({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
        (
            {"model": "m", "messages": [{"role": "tool", "tool_call_id": "nope", "content": "x"}]},
            "messages[0].tool_call_id",
        ),
        ({**GOOD, "max_tokens": "many"}, "max_tokens"),
        ({**GOOD, "stream": "yes"}, "stream"),
    ],
)
def test_a_body_that_is_not_a_chat_request_is_422_naming_the_field(
    live_server, key, upstream, body, field
):
    r = post(live_server, body, {"X-Ledgerkeep-Key": key})
    assert r.status_code == 422
    assert r.json()["field"] == field
    assert upstream.requests == []
    assert Entry.objects.count() == 0
    assert Session.objects.count() == 0


def test_sessions_are_per_tenant_and_a_name_in_use_elsewhere_is_created_here(
    live_server, key, other_key, upstream, tenant
):
    upstream.push(text="theirs")
    upstream.push(text="ours")
    r = post(live_server, GOOD, {"X-Ledgerkeep-Key": other_key, "X-Ledgerkeep-Session": "secret"})
    assert r.status_code == 200
    theirs = [e.entry_hash for e in Entry.objects.filter(journal__session__tenant__slug="globex")]
    r = post(live_server, GOOD, {"X-Ledgerkeep-Key": key, "X-Ledgerkeep-Session": "secret"})
    # neither refused nor told that another tenant has a session of that name
    assert r.status_code == 200, r.text
    assert r.headers["X-Ledgerkeep-Session"] == "secret"
    ours = Session.objects.get(tenant=tenant, key="secret")
    assert [
        (e.role, e.text) for e in Entry.objects.filter(journal__session=ours).order_by("seq")
    ] == [("user", "hi"), ("assistant", "ours")]
    # the other tenant's session is untouched
    assert [
        e.entry_hash for e in Entry.objects.filter(journal__session__tenant__slug="globex")
    ] == theirs
    assert Session.objects.filter(key="secret").count() == 2


@pytest.mark.parametrize(
    "header", ["X-Ledgerkeep-Session", "X-Ledgerkeep-Lane", "X-Ledgerkeep-Branch"]
)
def test_a_bad_scope_header_is_422_naming_the_header(live_server, key, upstream, header):
    r = post(live_server, GOOD, {"X-Ledgerkeep-Key": key, header: "no spaces!"})
    assert r.status_code == 422
    assert r.json()["field"] == header
    assert r.json()["code"] == "validation_error"
    assert upstream.requests == []
    assert Session.objects.count() == 0
    assert Entry.objects.count() == 0


def test_a_body_that_is_not_json_is_400_malformed_json(live_server, key, upstream):
    r = httpx.post(
        f"{live_server.url}/proxy/openai/v1/chat/completions",
        content=b"{not json",
        headers={"X-Ledgerkeep-Key": key, "Content-Type": "application/json"},
    )
    assert r.status_code == 400
    assert r.json()["code"] == "malformed_json"
    assert upstream.requests == []


def test_a_bad_budget_header_is_422(live_server, key, upstream):
    r = post(live_server, GOOD, {"X-Ledgerkeep-Key": key, "X-Ledgerkeep-Working-Budget": "lots"})
    assert r.status_code == 422
    assert r.json()["field"] == "X-Ledgerkeep-Working-Budget"
    assert upstream.requests == []


def test_only_post_is_served(live_server, key):
    r = httpx.get(
        f"{live_server.url}/proxy/openai/v1/chat/completions", headers={"X-Ledgerkeep-Key": key}
    )
    assert r.status_code == 405
    assert r.headers["Allow"] == "POST"
    assert r.json()["code"] == "method_not_allowed"


# ---------------------------------------------------------------- provider token figures


def test_the_answer_carries_the_provider_output_tokens_as_its_figure(live_server, key, upstream):
    upstream.push(text="A long enough answer in several words.", usage=(120, 777))
    upstream.push(
        text="Reading both.",
        calls=[("call_a", "read", {"path": "a.py"}), ("call_b", "ls", {"dir": "."})],
        usage=(150, 91),
    )
    c = client(live_server, key, **{"X-Ledgerkeep-Session": "figures"})
    messages: list = [{"role": "user", "content": "hi"}]
    c.chat.completions.create(model="m", messages=messages)
    rows = entries("figures")
    answer = rows[1]
    assert (answer.role, answer.token_count) == ("assistant", 777)
    assert answer.token_source == "provider:completion_tokens"
    assert rows[0].token_source.startswith("tiktoken")  # the user's message is counted
    # an answer of several entries shares the one figure out; the shares sum to it
    messages += [
        {"role": "assistant", "content": "A long enough answer in several words."},
        {"role": "user", "content": "read a.py and list"},
    ]
    c.chat.completions.create(model="m", messages=messages)
    rows = entries("figures")[3:]
    assert [e.kind for e in rows] == ["message", "tool_call", "tool_call"]
    assert sum(e.token_count for e in rows) == 91
    assert {e.token_source for e in rows} == {"provider:completion_tokens/share"}
    assert all(e.token_count > 0 for e in rows)


def test_a_streamed_answer_carries_the_provider_figure(live_server, key, upstream):
    upstream.push(text="one two three", usage=(10, 55))
    c = client(live_server, key, **{"X-Ledgerkeep-Session": "sfig"})
    list(
        c.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "count"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    answer = entries("sfig")[1]
    assert (answer.token_count, answer.token_source) == (55, "provider:completion_tokens")
