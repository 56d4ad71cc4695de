"""The local model server of ``make test-model`` (scripts/local_model_server.py), its HTTP and
OpenAI protocol layer driven by the real ``openai`` client over a scripted backend (the real
backend, llama.cpp in the gpt4all wheel, runs only under ``make test-model``)."""

from __future__ import annotations

import importlib.util
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx
import openai
import pytest

_PATH = Path(__file__).resolve().parent.parent / "scripts" / "local_model_server.py"
_spec = importlib.util.spec_from_file_location("local_model_server", _PATH)
lms = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lms)


class WordBackend:
    """Answers the words of ``reply`` one token each; a prompt token is a whitespace word."""

    def __init__(self, reply: str, ctx: int = 200, delay: float = 0.0) -> None:
        self.reply, self.ctx, self.delay = reply.split(" "), ctx, delay
        self.prompts: list[str] = []
        self.produced = 0

    def run(self, prompt, max_tokens, temperature, on_token, should_stop) -> int:
        read = len(prompt.split())
        if read > self.ctx - max_tokens:
            raise lms.ContextExceeded(self.ctx - max_tokens + 1, self.ctx, max_tokens)
        self.prompts.append(prompt)
        for i, word in enumerate(self.reply[:max_tokens]):
            time.sleep(self.delay)
            on_token(word if i == 0 else " " + word)
            self.produced += 1
            if should_stop():
                break
        return read


@pytest.fixture
def serve():
    servers = []

    def start(backend):
        server = ThreadingHTTPServer(("127.0.0.1", 0), lms.make_handler(backend))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        return url, openai.OpenAI(base_url=url, api_key="local", max_retries=0)

    yield start
    for s in servers:
        s.shutdown()


def test_chatml_puts_each_role_in_the_template_and_opens_the_answer():
    prompt = lms.chatml(
        [
            {"role": "developer", "content": "Be brief."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
            {"role": "assistant", "content": None},
            {"role": "tool", "content": "42"},
        ]
    )
    assert prompt == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nab<|im_end|>\n"
        "<|im_start|>assistant\n<|im_end|>\n<|im_start|>user\n42<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    with pytest.raises(ValueError, match=r"messages\[1\]\.role: 'robot'"):
        lms.chatml([{"role": "user", "content": "x"}, {"role": "robot", "content": "y"}])


def test_an_answer_with_usage_and_its_finish_reason(serve):
    backend = WordBackend("the tests passed")
    _, client = serve(backend)
    answer = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "did they pass"}], max_tokens=10
    )
    assert answer.choices[0].message.content == "the tests passed"
    assert answer.choices[0].finish_reason == "stop"
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (
        len(backend.prompts[0].split()),
        3,
    )
    cut = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "again"}], max_tokens=2
    )
    assert cut.choices[0].message.content == "the tests"
    assert cut.choices[0].finish_reason == "length"


def test_a_streamed_answer_ends_with_its_finish_reason_and_usage(serve):
    _, client = serve(WordBackend("one two three four"))
    chunks = list(
        client.chat.completions.create(
            model="any",
            messages=[{"role": "user", "content": "count"}],
            max_tokens=3,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "one two three"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].usage.completion_tokens == 3


def test_a_schema_is_refused_naming_response_format_and_an_overflow_is_context_length(serve):
    _, client = serve(WordBackend("x", ctx=50))
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="any",
            messages=[{"role": "user", "content": "x"}],
            response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": {}}},
        )
    assert refused.value.body["param"] == "response_format"
    with pytest.raises(openai.BadRequestError) as overflow:
        client.chat.completions.create(
            model="any", messages=[{"role": "user", "content": "word " * 60}], max_tokens=10
        )
    assert overflow.value.code == "context_length_exceeded"
    assert "maximum context length is 50 tokens" in overflow.value.message


def test_bad_requests_answer_in_the_error_shape(serve):
    url, _ = serve(WordBackend("x"))
    not_json = httpx.post(url + "/chat/completions", content=b"{nope")
    assert not_json.status_code == 400 and "not JSON" in not_json.json()["error"]["message"]
    no_messages = httpx.post(url + "/chat/completions", json={"model": "m"})
    assert no_messages.json()["error"]["param"] == "messages"
    too_long = httpx.post(
        url + "/chat/completions",
        json={"messages": [{"role": "user", "content": "x"}], "max_tokens": 10_000},
    )
    assert too_long.json()["error"]["param"] == "max_tokens"
    assert httpx.get(url + "/nowhere").status_code == 404
    assert httpx.get(url + "/models").json()["data"][0]["id"] == lms.MODEL_NAME


def test_a_client_that_hangs_up_frees_the_slot_at_the_next_token(serve):
    backend = WordBackend(" ".join(f"w{i}" for i in range(400)), ctx=1000, delay=0.01)
    url, client = serve(backend)
    with httpx.stream(
        "POST",
        url + "/chat/completions",
        json={"messages": [{"role": "user", "content": "go"}], "max_tokens": 400, "stream": True},
    ) as response:
        next(response.iter_lines())
    backend.delay = 0.0
    answer = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "next"}], max_tokens=2
    )
    assert answer.choices[0].message.content == "w0 w1"
    assert backend.produced < 400 + 2  # the first generation stopped before its 400 tokens
