"""The model client: the real ``openai`` client against the scripted server (docs/design.md 5.3)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ledger_app.model_client import (
    ModelClient,
    ModelConfig,
    ModelNotConfigured,
    ModelRequestRefused,
    ModelUnavailable,
)
from ledger_app.proposals import WriterProposal, parse_reply, writer_schema
from tests.support import ScriptedServer


@pytest.fixture
def scripted():
    with ScriptedServer() as server:
        yield server


MESSAGES = [{"role": "system", "content": "rubric"}, {"role": "user", "content": "entries"}]


def _call(client: ModelClient, role: str = "writer"):
    return client.complete(
        role=role, messages=MESSAGES, schema_name="ledger_delta", schema=writer_schema()
    )


def test_it_asks_for_the_schema_and_records_usage_and_latency(scripted):
    scripted.push_json({"facts": [], "ends": []}, usage=(321, 45))
    reply = _call(ModelClient(scripted.config()))
    assert parse_reply(reply.text, WriterProposal)[0] == WriterProposal()
    body = scripted.requests[0]
    assert body["model"] == "scripted-writer"
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == writer_schema()
    assert body["messages"] == MESSAGES
    r = reply.record
    assert (r.input_tokens, r.output_tokens, r.attempts, r.status) == (321, 45, 1, "ok")
    assert r.response_format == "json_schema" and r.latency_s > 0 and r.total_s >= r.latency_s


def test_the_verifier_role_uses_the_verifier_model(scripted):
    scripted.push_json({"verdicts": []})
    reply = _call(ModelClient(scripted.config()), role="verifier")
    assert scripted.requests[0]["model"] == "scripted-verifier"
    assert reply.record.model == "scripted-verifier" and reply.record.role == "verifier"


@pytest.mark.parametrize("status", [500, 502, 503, 429])
def test_it_retries_transient_http_errors_with_backoff(scripted, status):
    waits: list[float] = []
    scripted.push_error(status)
    scripted.push_error(status)
    scripted.push_json({"facts": []})
    reply = _call(ModelClient(scripted.config(max_attempts=4), sleep=waits.append))
    assert reply.record.attempts == 3 and scripted.request_count == 3
    assert len(reply.record.errors) == 2 and f"HTTP {status}" in reply.record.errors[0]
    assert len(waits) == 2 and all(0 < w <= 0.02 for w in waits)


def test_a_timeout_is_retried_when_asked(scripted):
    scripted.push_json({"facts": []}, delay=1.5)
    scripted.push_json({"facts": [], "ends": []})
    reply = _call(ModelClient(scripted.config(timeout_s=0.3, retry_on_timeout=True)))
    assert reply.record.attempts == 2
    assert "APITimeoutError" in reply.record.errors[0]


def test_a_timeout_is_not_retried_by_default(scripted):
    scripted.push_json({"facts": []}, delay=1.5)
    scripted.push_json({"facts": [], "ends": []})
    with pytest.raises(ModelUnavailable) as caught:
        _call(ModelClient(scripted.config(timeout_s=0.3, max_attempts=4)))
    assert caught.value.attempts == 1 and scripted.request_count == 1
    assert "MODEL_RETRY_ON_TIMEOUT" in caught.value.record.errors[-1]


def test_it_gives_up_after_the_last_attempt(scripted):
    for _ in range(3):
        scripted.push_error(500)
    with pytest.raises(ModelUnavailable) as caught:
        _call(ModelClient(scripted.config(max_attempts=3)))
    assert caught.value.attempts == 3 and scripted.request_count == 3
    assert caught.value.record.status == "unavailable" and len(caught.value.record.errors) == 3
    assert "gave no answer after 3 attempt(s)" in str(caught.value)


def test_a_refused_connection_is_unavailable_not_a_crash():
    server = ScriptedServer()
    config = server.config(max_attempts=2)
    server.stop()  # nothing listens on the port any more
    with pytest.raises(ModelUnavailable) as caught:
        _call(ModelClient(config))
    assert caught.value.attempts == 2 and "APIConnectionError" in caught.value.last_error


@pytest.mark.parametrize("body", [b"<html>bad gateway</html>", b'{"choices": "nope"}'])
def test_a_body_that_is_not_a_chat_completion_is_an_empty_reply_not_a_crash(scripted, body):
    scripted.push_raw(body)
    reply = _call(ModelClient(scripted.config()))
    assert reply.text == "" and reply.record.status == "malformed"
    assert "malformed response body" in reply.record.errors[-1]
    assert parse_reply(reply.text, WriterProposal) == (None, "empty reply (no content)")


def test_a_client_error_is_not_retried(scripted):
    scripted.push_error(404, message="no such model")
    with pytest.raises(ModelRequestRefused) as caught:
        _call(ModelClient(scripted.config()))
    assert caught.value.status == 404 and scripted.request_count == 1


@pytest.mark.parametrize("status", [501, 505])
def test_a_server_that_does_not_implement_the_request_is_refused_at_once(scripted, status):
    """A plain web server at the base URL answers 501: the same every time, not retried."""
    scripted.push_error(status, message="Unsupported method ('POST')")
    scripted.push_json({"facts": []})
    with pytest.raises(ModelRequestRefused) as caught:
        _call(ModelClient(scripted.config(max_attempts=4)))
    assert caught.value.status == status and scripted.request_count == 1
    assert caught.value.record.status == "refused"


def test_a_server_without_schema_mode_gets_json_mode_and_is_remembered():
    with ScriptedServer(reject_schema=True) as server:
        server.push_json({"facts": []})
        server.push_json({"facts": []})
        client = ModelClient(server.config())
        first = _call(client)
        second = _call(client)
        formats = [r["response_format"]["type"] for r in server.requests]
    assert formats == ["json_schema", "json_object", "json_object"]
    assert first.record.response_format == second.record.response_format == "json_object"
    assert "no JSON-schema mode" in first.record.errors[0]
    assert first.record.attempts == 2 and second.record.attempts == 1


def test_json_mode_can_be_chosen_in_the_settings(scripted):
    scripted.push_json({"facts": []})
    _call(ModelClient(scripted.config(response_format="json_object")))
    assert scripted.requests[0]["response_format"] == {"type": "json_object"}


def test_settings_name_the_endpoint_and_models(settings):
    settings.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"
    settings.OPENAI_API_KEY = "k"
    settings.WRITER_MODEL = "w"
    settings.VERIFIER_MODEL = ""
    settings.MODEL_TIMEOUT_SECONDS = "7.5"
    settings.MODEL_MAX_ATTEMPTS = 2
    config = ModelConfig.from_settings(settings)
    assert config.configured and config.verifier == "w"
    # backoff_max_s: the settings' default, the only copy of the figure
    assert (config.timeout_s, config.max_attempts, config.backoff_max_s) == (7.5, 2, 8.0)
    assert (config.stream, config.stall_s, config.max_output_tokens) == (True, 60.0, 4096)


def test_a_namespace_without_a_setting_is_refused_by_name():
    with pytest.raises(AttributeError, match="MODEL_TIMEOUT_SECONDS"):
        ModelConfig.from_settings(
            SimpleNamespace(
                OPENAI_BASE_URL="",
                WRITER_MODEL="w",
                VERIFIER_MODEL="",
                OPENAI_API_KEY="",
                MODEL_WINDOWS={},
            )
        )


def test_without_a_base_url_no_client_can_be_made(settings):
    settings.OPENAI_BASE_URL = ""
    settings.WRITER_MODEL = "w"
    config = ModelConfig.from_settings(settings)
    assert not config.configured
    with pytest.raises(ModelNotConfigured, match="OPENAI_BASE_URL"):
        ModelClient(config)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{not json", "not JSON"),
        ("", "empty reply"),
        ("[1, 2]", "expected a JSON object"),
        ('{"facts": [{"key": "f1", "category": "objective"}]}', "facts.0.priority"),
        (
            '{"facts": [{"key": "f1", "category": "verified_state", "priority": "P0", '
            '"confidence": "verified", "text": "x", "support": [1]}]}',
            "facts.0.priority",
        ),
    ],
)
def test_invalid_replies_are_reasons_not_exceptions(text, reason):
    parsed, error = parse_reply(text, WriterProposal)
    assert parsed is None and reason in error


def test_a_fenced_or_chatty_reply_still_validates():
    fenced = '```json\n{"facts": []}\n```'
    chatty = 'Here is the delta:\n{"facts": [], "ends": []}\nHope this helps.'
    assert parse_reply(fenced, WriterProposal)[0] == WriterProposal()
    assert parse_reply(chatty, WriterProposal)[0] == WriterProposal()


def test_an_object_without_facts_or_ends_names_its_keys():
    assert parse_reply('{"delta": [], "notes": "x"}', WriterProposal) == (
        None,
        "(top level): Value error, no facts or ends in the answer, only unknown field(s): "
        "delta, notes",
    )
    assert parse_reply("{}", WriterProposal)[0] == WriterProposal()  # nothing to propose
    assert parse_reply('{"ends": [], "why": 1}', WriterProposal)[0] == WriterProposal()


# --------------------------------------------------------------- structured-output modes


def _system(body: dict) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "system")


EXAMPLE = {"facts": [{"key": "f1", "category": "history"}], "ends": []}


@pytest.mark.parametrize("mode", ["json_object", "none"])
def test_a_mode_the_server_does_not_enforce_carries_the_schema_and_example(scripted, mode):
    scripted.push_json({"facts": []})
    client = ModelClient(scripted.config(response_format=mode))
    client.complete(
        role="writer",
        messages=MESSAGES,
        schema_name="ledger_delta",
        schema=writer_schema(),
        example=EXAMPLE,
    )
    body = scripted.requests[0]
    system = _system(body)
    assert system.startswith("rubric\n")
    assert '"key":"f1"' in system and '"supersedes"' in system  # example, then the schema
    if mode == "none":
        assert "response_format" not in body
    else:
        assert body["response_format"] == {"type": "json_object"}


def test_json_schema_mode_sends_the_messages_unchanged(scripted):
    scripted.push_json({"facts": []})
    ModelClient(scripted.config()).complete(
        role="writer", messages=MESSAGES, schema_name="d", schema=writer_schema(), example=EXAMPLE
    )
    assert scripted.requests[0]["messages"] == MESSAGES


@pytest.mark.parametrize("status", [400, 422, 500])
def test_a_refused_schema_is_downgraded_once_not_retried_and_carries_the_schema(status):
    with ScriptedServer(reject_schema=True, reject_status=status) as server:
        server.push_json({"facts": []})
        server.push_json({"facts": []})
        waits: list[float] = []
        client = ModelClient(server.config(max_attempts=4), sleep=waits.append)
        first = _call(client)
        again = _call(ModelClient(server.config()))  # a new client, same process and URL
        formats = [r["response_format"]["type"] for r in server.requests]
    assert formats == ["json_schema", "json_object", "json_object"]
    assert waits == []  # no backoff: a refusal is not a transient error
    assert f"HTTP {status}" in first.record.errors[0] and "remembered" in first.record.errors[0]
    assert again.record.response_format == "json_object" and again.record.errors == []
    assert '"supersedes"' in _system(server.requests[1])


def test_a_server_refusing_json_mode_too_gets_plain_text():
    with ScriptedServer(
        reject_schema=True, reject_status=500, reject_formats=("json_schema", "json_object")
    ) as server:
        server.push_json({"facts": []})
        reply = _call(ModelClient(server.config()))
        bodies = list(server.requests)
    assert [(b.get("response_format") or {}).get("type") for b in bodies] == [
        "json_schema",
        "json_object",
        None,
    ]
    assert reply.record.response_format == "none" and reply.record.status == "ok"


def test_a_500_that_is_not_about_the_format_is_still_transient(scripted):
    scripted.push_error(500, message="out of memory")
    scripted.push_json({"facts": []})
    reply = _call(ModelClient(scripted.config()))
    assert reply.record.attempts == 2 and reply.record.response_format == "json_schema"


def test_an_unknown_response_format_is_a_clear_error(settings):
    settings.MODEL_RESPONSE_FORMAT = "json"
    with pytest.raises(ValueError, match="MODEL_RESPONSE_FORMAT must be one of"):
        ModelConfig.from_settings(settings)


# --------------------------------------------------------------- finish_reason, bad bodies


def test_an_answer_cut_at_max_tokens_is_recorded_as_such(scripted):
    scripted.push_content('{"facts": [{"key": "f1", "text": "unterminated', finish_reason="length")
    reply = _call(ModelClient(scripted.config(max_output_tokens=64)))
    assert reply.record.finish_reason == "length" and reply.record.truncated
    assert reply.record.errors == ["cut at max_tokens (64): finish_reason length"]
    assert scripted.requests[0]["max_tokens"] == 64


@pytest.mark.parametrize(
    ("body", "content_type", "cause"),
    [
        (b"<html><body>502 Bad Gateway</body></html>", "text/html", "not a chat completion"),
        (b"", "application/json", "empty body"),
        (
            b'{"id": "x", "object": "chat.completion", "choices": []}',
            "application/json",
            "no choices",
        ),
    ],
)
def test_a_bad_body_is_labelled_with_its_cause(scripted, body, content_type, cause):
    scripted.push_raw(body, content_type=content_type)
    reply = _call(ModelClient(scripted.config()))
    assert reply.text == "" and reply.record.status == "malformed"
    assert cause in reply.record.errors[-1]


# --------------------------------------------------------------- streaming


def test_a_streamed_answer_is_joined_with_its_usage_and_finish_reason(scripted):
    scripted.push_json({"facts": [], "ends": []}, usage=(321, 45))
    reply = _call(ModelClient(scripted.config(stream=True)))
    assert scripted.requests[0]["stream"] is True
    assert parse_reply(reply.text, WriterProposal)[0] == WriterProposal()
    r = reply.record
    assert (r.input_tokens, r.output_tokens, r.finish_reason, r.status) == (321, 45, "stop", "ok")


def test_a_stalled_stream_is_cut_and_not_retried(scripted):
    scripted.push_json({"facts": [], "ends": []}, stall=2.0)
    scripted.push_json({"facts": [], "ends": []})
    with pytest.raises(ModelUnavailable) as caught:
        _call(ModelClient(scripted.config(stream=True, stall_s=0.3, timeout_s=30)))
    assert "stalled" in caught.value.last_error and scripted.request_count == 1


def test_a_stalled_stream_is_cut_while_the_server_still_stalls(scripted):
    """The cut ends the blocked read at once: the call returns while the server is still in
    its 20 s pause (closing the response alone left the read waiting until the server went
    on, or until MODEL_TIMEOUT_SECONDS)."""
    scripted.push_json({"facts": [], "ends": []}, stall=20.0)
    with pytest.raises(ModelUnavailable) as caught:
        _call(ModelClient(scripted.config(stream=True, stall_s=0.3, timeout_s=60)))
    assert scripted.stalling == 1  # the server has not resumed: the client did not wait for it
    assert "MODEL_STALL_SECONDS" in caught.value.last_error
    # a server that answered and then stalled was reached: the message does not say otherwise
    assert str(caught.value).startswith("writer model gave no answer after 1 attempt(s): ")


def test_reading_the_prompt_before_the_first_chunk_is_not_a_stall(scripted):
    """A server sends nothing while it reads the prompt (minutes on a CPU): the wait for the
    first chunk is bounded by the call's timeout, not by the stall limit."""
    scripted.push_json({"facts": [], "ends": []}, delay=1.0)
    reply = _call(ModelClient(scripted.config(stream=True, stall_s=0.3, timeout_s=30)))
    assert parse_reply(reply.text, WriterProposal)[0] == WriterProposal()
    assert (reply.record.status, scripted.request_count) == ("ok", 1)


def test_no_first_chunk_within_the_timeout_is_a_timeout_naming_it(scripted):
    scripted.push_json({"facts": [], "ends": []}, delay=2.0)
    with pytest.raises(ModelUnavailable) as caught:
        _call(ModelClient(scripted.config(stream=True, stall_s=5, timeout_s=0.5)))
    assert "MODEL_TIMEOUT_SECONDS" in caught.value.last_error and scripted.request_count == 1


def test_a_stream_cut_at_max_tokens_says_so(scripted):
    scripted.push_content('{"facts": [', finish_reason="length")
    reply = _call(ModelClient(scripted.config(stream=True)))
    assert reply.record.truncated and reply.text == '{"facts": ['


def test_a_stream_that_is_html_is_labelled(scripted):
    scripted.push_raw(b"<html>oops</html>", content_type="text/html")
    reply = _call(ModelClient(scripted.config(stream=True)))
    assert reply.record.status == "malformed" and reply.text == ""
    assert "not an event stream: the server answered text/html" in reply.record.errors[-1]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"", "empty stream: no chat-completion chunk came"),
        (
            b'data: {"id": "c1", "object": "chat.completion.chunk", "created": 1, '
            b'"model": "m", "choices": []}\n\ndata: [DONE]\n\n',
            "a 200 whose 1 stream event(s) carried no choices",
        ),
    ],
)
def test_an_empty_stream_and_events_without_choices_are_told_apart(scripted, body, said):
    scripted.push_raw(body, content_type="text/event-stream")
    reply = _call(ModelClient(scripted.config(stream=True)))
    assert reply.record.status == "malformed"
    assert said in reply.record.errors[-1]


def test_settings_read_the_local_server_options(settings):
    settings.OPENAI_BASE_URL = "http://127.0.0.1:8080/v1"
    settings.WRITER_MODEL = "qwen"
    settings.VERIFIER_MODEL = ""
    settings.MODEL_RETRY_ON_TIMEOUT = True
    settings.MODEL_STREAM = False
    settings.MODEL_STALL_SECONDS = 12.0
    settings.MODEL_WINDOWS = {"qwen": 32768}
    settings.WRITER_WINDOW_TOKENS = 0
    settings.VERIFIER_WINDOW_TOKENS = 0
    settings.MODEL_RESPONSE_FORMAT = "none"
    config = ModelConfig.from_settings(settings)
    assert (config.retry_on_timeout, config.stream, config.stall_s) == (True, False, 12.0)
    assert config.window_for("writer") == 32768 and config.window_for("verifier") == 32768
    assert config.response_format == "none"
    settings.WRITER_WINDOW_TOKENS = 8000
    assert ModelConfig.from_settings(settings).writer_window == 8000


def test_a_server_without_stream_options_still_streams_the_answer():
    with ScriptedServer(reject_stream_options=True) as server:
        server.push_json({"facts": [], "ends": []})
        reply = _call(ModelClient(server.config(stream=True)))
        sent = list(server.requests)
    assert "stream_options" in sent[0] and "stream_options" not in sent[1]
    assert parse_reply(reply.text, WriterProposal)[0] == WriterProposal()
    assert "no stream_options" in reply.record.errors[0]
