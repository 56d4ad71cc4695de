"""The model client: the real ``openai`` client against the scripted server (DESIGN.md 5.3)."""

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


def test_a_timeout_is_retried(scripted):
    scripted.push_json({"facts": []}, delay=1.5)
    scripted.push_json({"facts": [], "ends": []})
    reply = _call(ModelClient(scripted.config(timeout_s=0.3)))
    assert reply.record.attempts == 2
    assert "APITimeoutError" in reply.record.errors[0]


def test_it_gives_up_after_the_last_attempt(scripted):
    for _ in range(3):
        scripted.push_error(500)
    with pytest.raises(ModelUnavailable) as caught:
        _call(ModelClient(scripted.config(max_attempts=3)))
    assert caught.value.attempts == 3 and scripted.request_count == 3
    assert caught.value.record.status == "unavailable" and len(caught.value.record.errors) == 3
    assert "unreachable after 3 attempt(s)" in str(caught.value)


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


def test_json_mode_can_be_chosen_in_the_settings(scripted):
    scripted.push_json({"facts": []})
    _call(ModelClient(scripted.config(response_format="json_object")))
    assert scripted.requests[0]["response_format"] == {"type": "json_object"}


def test_settings_name_the_endpoint_and_models():
    settings = SimpleNamespace(
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        OPENAI_API_KEY="k",
        WRITER_MODEL="w",
        VERIFIER_MODEL="",
        MODEL_TIMEOUT_SECONDS="7.5",
        MODEL_MAX_ATTEMPTS=2,
    )
    config = ModelConfig.from_settings(settings)
    assert config.configured and config.verifier == "w"
    assert (config.timeout_s, config.max_attempts, config.backoff_max_s) == (7.5, 2, 8.0)


def test_without_a_base_url_no_client_can_be_made():
    config = ModelConfig.from_settings(SimpleNamespace(OPENAI_BASE_URL="", WRITER_MODEL="w"))
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
