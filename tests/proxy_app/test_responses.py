"""The Responses API through the proxy (``/proxy/openai/v1/responses``), Codex's request shape,
and the calls passed through (``/models``, ``/embeddings``, Anthropic ``count_tokens``)."""

from __future__ import annotations

import json

import httpx

from journal_app.models import Entry
from tests.proxy_app.conftest import entries

URL = "/proxy/openai/v1/responses"
INSTRUCTIONS = "You are Codex, a coding agent based on GPT-5."
ENCRYPTED = "gAAAAABo-encrypted+/reasoning==" * 3


def _codex_body(input_items: list, **extra) -> dict:
    """What Codex sends (``wire_api = "responses"``): instructions, typed input items,
    tools, ``store: false``, streamed, encrypted reasoning included."""
    return {
        "model": "gpt-5-codex",
        "instructions": INSTRUCTIONS,
        "input": input_items,
        "tools": [
            {
                "type": "function",
                "name": "shell",
                "description": "Runs a shell command",
                "strict": False,
                "parameters": {
                    "type": "object",
                    "properties": {"command": {"type": "array", "items": {"type": "string"}}},
                    "required": ["command"],
                },
            }
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
        "stream": True,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "019a-codex-session",
        **extra,
    }


FIRST = [
    {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "<permissions>workspace-write</permissions>"}],
    },
    {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "List the files."}],
    },
]


def _stream(live_server, key, body, **headers):
    with httpx.stream(
        "POST",
        f"{live_server.url}{URL}",
        json=body,
        headers={"Authorization": f"Bearer {key}", **headers},
        timeout=10,
    ) as response:
        data = response.read()
    return response, data


def test_codex_turns_stream_through_and_are_journaled_once(live_server, key, upstream, settings):
    settings.UPSTREAM_OPENAI_API_KEY = "sk-server"
    upstream.push(calls=[("call_1", "shell", {"command": ["ls"]})], reasoning=ENCRYPTED)
    upstream.push(text="Two files: a.py and b.py.")

    first, data = _stream(live_server, key, _codex_body(FIRST))
    assert first.status_code == 200
    events = [
        json.loads(line[5:]) for line in data.decode().splitlines() if line.startswith("data:")
    ]
    done = events[-1]["response"]
    assert events[-1]["type"] == "response.completed"
    # Codex resends everything, the reasoning item with its encrypted content included
    second_input = [
        *FIRST,
        *done["output"],
        {"type": "function_call_output", "call_id": "call_1", "output": "a.py\nb.py"},
    ]
    second, data = _stream(live_server, key, _codex_body(second_input))

    assert second.status_code == 200 and b"response.completed" in data
    session = first.headers["X-Ledgerkeep-Session"]
    assert second.headers["X-Ledgerkeep-Session"] == session
    rows = entries(session)
    assert [(e.kind, e.role) for e in rows] == [
        ("message", "system"),
        ("message", "developer"),
        ("message", "user"),
        ("reasoning", "assistant"),
        ("tool_call", "assistant"),
        ("tool_result", "tool"),
        ("message", "assistant"),
    ]
    assert rows[3].content["encrypted"] == ENCRYPTED
    assert rows[6].text == "Two files: a.py and b.py."
    assert rows[3].meta_dict.get("response_id") == "resp_1"
    # passed upstream byte for byte: the encrypted reasoning and the call as Codex sent them
    assert upstream.requests[1]["input"][2]["encrypted_content"] == ENCRYPTED
    assert upstream.requests[1]["instructions"] == INSTRUCTIONS
    assert upstream.headers[1]["authorization"] == "Bearer sk-server"


def test_a_previous_response_id_request_is_passed_through_and_journaled_after_it(
    live_server, key, upstream
):
    upstream.push(text="Hello.")
    upstream.push(text="Goodbye.")
    headers = {"X-Ledgerkeep-Key": key}
    first = httpx.post(
        f"{live_server.url}{URL}",
        json={"model": "m", "input": "Say hello.", "instructions": "Be terse."},
        headers=headers,
    )
    assert first.status_code == 200, first.text
    second = httpx.post(
        f"{live_server.url}{URL}",
        json={"model": "m", "input": "Now goodbye.", "previous_response_id": first.json()["id"]},
        headers=headers,
    )

    assert second.status_code == 200, second.text
    assert upstream.requests[1]["input"] == "Now goodbye."  # passed as sent
    assert second.headers["X-Ledgerkeep-Session"] == first.headers["X-Ledgerkeep-Session"]
    rows = entries(first.headers["X-Ledgerkeep-Session"])
    assert [e.text for e in rows] == [
        "Be terse.",
        "Say hello.",
        "Hello.",
        "Now goodbye.",
        "Goodbye.",
    ]


def test_a_full_input_request_over_the_budget_is_compacted_as_chat_is(live_server, key, upstream):
    upstream.push(text="Done.")
    long_items = []
    for n in range(12):
        long_items.append({"role": "user", "content": f"Step {n}: " + "details " * 150})
        long_items.append({"role": "assistant", "content": f"Did step {n}."})
    long_items.append({"role": "user", "content": "Finish."})
    body = {"model": "m", "input": long_items, "store": False, "instructions": "Be careful."}
    answer = httpx.post(
        f"{live_server.url}{URL}",
        json=body,
        headers={"X-Ledgerkeep-Key": key, "X-Ledgerkeep-Working-Budget": "1500"},
        timeout=60,
    )

    assert answer.status_code == 200, answer.text
    assert answer.headers["X-Ledgerkeep-Compacted"] == "true"
    sent = upstream.requests[0]
    # the instructions go as sent, not also as a system item
    assert sent["instructions"] == "Be careful." and sent["store"] is False
    assert not any(item.get("content") == "Be careful." for item in sent["input"])
    assert all(
        item.get("type", "message") in ("message", "function_call", "function_call_output")
        for item in sent["input"]
    )
    assert sent["input"][-1]["content"] == "Finish."
    assert int(answer.headers["X-Ledgerkeep-Tokens-After"]) < int(
        answer.headers["X-Ledgerkeep-Tokens-Before"]
    )


def test_a_bad_responses_body_is_422_naming_the_field(live_server, key, upstream):
    answer = httpx.post(
        f"{live_server.url}{URL}",
        json={"model": "m", "input": []},
        headers={"X-Ledgerkeep-Key": key},
    )
    assert answer.status_code == 422 and answer.json()["field"] == "input"
    assert Entry.objects.count() == 0 and upstream.requests == []


def test_models_embeddings_and_count_tokens_are_passed_through(live_server, key, upstream):
    headers = {"Authorization": f"Bearer {key}"}
    models = httpx.get(f"{live_server.url}/proxy/openai/v1/models", headers=headers)
    embeddings = httpx.post(
        f"{live_server.url}/proxy/openai/v1/embeddings",
        json={"model": "e", "input": "x"},
        headers=headers,
    )
    count = httpx.post(
        f"{live_server.url}/proxy/anthropic/v1/messages/count_tokens",
        json={"model": "m", "messages": [{"role": "user", "content": "Hi"}]},
        headers={"x-api-key": key},
    )
    refused = httpx.get(f"{live_server.url}/proxy/openai/v1/models")

    assert models.status_code == 200 and models.json()["data"][0]["id"] == "scripted"
    assert models.headers["x-request-id"] == "req_models"
    assert embeddings.status_code == 200 and count.json()["input_tokens"] == 42
    assert refused.status_code == 401 and refused.json()["code"] == "unauthenticated"
    assert upstream.paths == [
        ("GET", "/v1/models"),
        ("POST", "/v1/embeddings"),
        ("POST", "/v1/messages/count_tokens"),
    ]
    assert Entry.objects.count() == 0


def test_the_readme_codex_provider_reaches_the_responses_endpoint(
    live_server, key, upstream, settings, monkeypatch
):
    """The README's Codex snippet, read as Codex reads it: ``base_url`` + ``/responses``,
    the ``env_key`` variable's value as ``Authorization: Bearer``, Codex's request shape."""
    import tomllib
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    snippet = readme.split("Codex (`~/.codex/config.toml`) speaks the Responses API")[1]
    config = tomllib.loads(snippet.split("```toml")[1].split("```")[0])
    provider = config["model_providers"][config["model_provider"]]
    assert provider["wire_api"] == "responses"
    monkeypatch.setenv(provider["env_key"], key)
    settings.UPSTREAM_OPENAI_API_KEY = "sk-server"
    upstream.push(text="Ready.")
    base = provider["base_url"].replace("http://127.0.0.1:8000", live_server.url)

    with httpx.stream(
        "POST",
        f"{base}/responses",
        json=_codex_body(FIRST),
        headers={"Authorization": f"Bearer {__import__('os').environ[provider['env_key']]}"},
    ) as response:
        data = response.read()

    assert response.status_code == 200 and b"response.completed" in data
    rows = entries(response.headers["X-Ledgerkeep-Session"])
    assert [e.text for e in rows][-1] == "Ready."
    assert upstream.headers[0]["authorization"] == "Bearer sk-server"


def test_a_compacted_codex_request_keeps_its_tail_items_byte_for_byte(live_server, key, upstream):
    items = list(FIRST)
    for n in range(10):
        items += [
            {
                "type": "reasoning",
                "id": f"rs_{n}",
                "summary": [{"type": "summary_text", "text": f"Thinking about step {n}."}],
                "encrypted_content": f"{ENCRYPTED}{n}",
            },
            {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{n}",
                "name": "shell",
                "arguments": json.dumps({"command": ["cat", f"src/file_{n}.py"]}),
            },
            {
                "type": "function_call_output",
                "call_id": f"call_{n}",
                "output": f"contents of file {n} " + "code line " * 200,
            },
        ]
    items.append(
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go on."}]}
    )
    upstream.push(text="Done.")
    body = _codex_body(items, stream=False)
    answer = httpx.post(
        f"{live_server.url}{URL}",
        json=body,
        headers={"Authorization": f"Bearer {key}", "X-Ledgerkeep-Working-Budget": "3000"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["X-Ledgerkeep-Compacted"] == "true"
    sent = upstream.requests[0]
    assert sent["instructions"] == INSTRUCTIONS
    assert sum(1 for i in sent["input"] if i.get("content") == INSTRUCTIONS) == 0
    # the tail is the client's own items, reasoning and ids included, in order: the last
    # round (reasoning with its encrypted content, the call, its output) and the request
    assert sent["input"][-4:] == items[-4:]
    assert sent["input"][-4]["encrypted_content"] == f"{ENCRYPTED}9"
    assert len(sent["input"]) < len(items)


def test_an_answer_sent_back_as_plain_text_is_the_same_message(live_server, key, upstream):
    upstream.push(text="Hello there.")
    upstream.push(text="Bye.")
    headers = {"X-Ledgerkeep-Key": key, "X-Ledgerkeep-Session": "plain-back"}
    first = httpx.post(
        f"{live_server.url}{URL}",
        json={"model": "m", "input": [{"role": "user", "content": "Say hello."}]},
        headers=headers,
    )
    assert first.status_code == 200, first.text
    # the output item was {"type": "message", "content": [{"type": "output_text", ...,
    # "annotations": []}]}; a runtime sends it back as a plain assistant message
    second = httpx.post(
        f"{live_server.url}{URL}",
        json={
            "model": "m",
            "input": [
                {"role": "user", "content": "Say hello."},
                {"role": "assistant", "content": "Hello there."},
                {"role": "user", "content": "Now bye."},
            ],
        },
        headers=headers,
    )
    assert second.status_code == 200, second.text
    assert "X-Ledgerkeep-Branched-From" not in second.headers
    assert second.headers["X-Ledgerkeep-Branch"] == "main"
    assert [e.text for e in entries("plain-back")] == [
        "Say hello.",
        "Hello there.",
        "Now bye.",
        "Bye.",
    ]
