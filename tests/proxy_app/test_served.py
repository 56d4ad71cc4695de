"""The proxy as production serves it: async views (ASGI), gunicorn with uvicorn workers,
concurrent calls of one session, upstream headers, keys sent as the provider credential."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from journal_app.models import Entry, Journal
from proxy_app.bodies import json_depth
from tests.proxy_app.conftest import entries
from tests.test_gunicorn import _loaded

ROOT = Path(__file__).resolve().parents[2]
SYSTEM = "You are one of several subagents."
URL = "/proxy/openai/v1/chat/completions"


def _chat(**extra) -> dict:
    return {
        "model": "scripted-model",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Count the files."},
        ],
        **extra,
    }


# ---------------------------------------------------------------- the production config


def test_gunicorn_runs_uvicorn_workers_that_outlive_the_upstream_timeout(monkeypatch):
    cfg = _loaded(monkeypatch)
    assert cfg.worker_class_str == "uvicorn_worker.UvicornWorker"
    assert cfg.timeout == 630  # the default upstream timeout (600 s) and the 30 s margin
    assert cfg.graceful_timeout == 630

    cfg = _loaded(monkeypatch, UPSTREAM_TIMEOUT_SECONDS="900.5", GUNICORN_TIMEOUT="60")
    assert cfg.timeout == 931

    cfg = _loaded(monkeypatch, UPSTREAM_TIMEOUT_SECONDS="10", GUNICORN_TIMEOUT="300")
    assert cfg.timeout == 300  # a longer timeout of the operator's is kept


def test_the_load_script_streams_concurrently_through_gunicorn(tmp_path):
    """``scripts/proxy_load.py``, small: 6 concurrent streams of 2 s through one uvicorn
    worker of the production config; every stream whole, every answer journaled."""
    run = subprocess.run(
        [sys.executable, "scripts/proxy_load.py", "--streams", "6", "--seconds", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)},
    )
    summary = json.loads(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (summary["completed"], summary["journaled"], summary["worker_timeouts"]) == (6, 6, 0)
    assert summary["api_calls"] >= 1 and summary["failures"] == []


# ---------------------------------------------------------------- async views, in process


def test_the_async_views_answer_and_journal_through_the_async_client(db, key, upstream):
    upstream.push(text="Twelve files.")
    upstream.push(text="Twelve files, streamed.")
    client = AsyncClient()
    headers = {"X-Ledgerkeep-Key": key, "X-Ledgerkeep-Session": "s-async"}

    async def calls():
        plain = await client.post(URL, _chat(), content_type="application/json", headers=headers)
        streamed = await client.post(
            URL, _chat(stream=True), content_type="application/json", headers=headers
        )
        assert streamed.status_code == 200, streamed.content
        chunks = b"".join([c async for c in streamed.streaming_content])
        return plain, streamed, chunks

    plain, streamed, chunks = async_to_sync(calls)()

    assert plain.status_code == 200
    assert json.loads(plain.content)["choices"][0]["message"]["content"] == "Twelve files."
    assert plain["X-Ledgerkeep-Answer-Journaled"] == "true"
    assert streamed.status_code == 200
    # the last event, then the comment saying where the answer went (a resample: a branch)
    events, trailer = chunks.rsplit(b"data: [DONE]\n\n", 1)
    assert trailer == (
        b": X-Ledgerkeep-Answer-Journaled: true\n: X-Ledgerkeep-Branch: b2\n"
        b": X-Ledgerkeep-Revision: 3\n: X-Ledgerkeep-Branched-From: main@2\n\n"
    )
    rows = entries("s-async")
    # one history; the second answer differs from the first: a sibling branch
    assert [e.text for e in rows] == [SYSTEM, "Count the files.", "Twelve files."]
    assert [e.text for e in entries("s-async", branch="b2")][-1] == "Twelve files, streamed."


def test_an_upstream_that_cannot_be_reached_is_502_in_the_error_shape(db, key, upstream, settings):
    settings.UPSTREAM_OPENAI_BASE_URL = "http://127.0.0.1:9/v1"  # discard port: refused
    response = async_to_sync(AsyncClient().post)(
        URL, _chat(), content_type="application/json", headers={"X-Ledgerkeep-Key": key}
    )
    assert response.status_code == 502, response.content
    assert json.loads(response.content)["code"] == "upstream_unreachable"
    assert Entry.objects.filter(role="user").count() == 1  # the request is journaled
    assert "the request's messages are journaled" in json.loads(response.content)["message"]


def test_a_passed_through_call_that_cannot_reach_the_upstream_says_nothing_was_journaled(
    db, key, upstream, settings
):
    settings.UPSTREAM_OPENAI_BASE_URL = "http://127.0.0.1:9/v1"  # discard port: refused
    response = async_to_sync(AsyncClient().get)(
        "/proxy/openai/v1/models", headers={"X-Ledgerkeep-Key": key}
    )
    assert response.status_code == 502, response.content
    body = json.loads(response.content)
    assert body["code"] == "upstream_unreachable"
    assert "nothing was journaled" in body["message"] and "messages are" not in body["message"]
    assert Entry.objects.count() == 0


# ---------------------------------------------------------------- parallel calls


def _parallel(live_server, key, bodies, headers):
    def one(body):
        return httpx.post(
            f"{live_server.url}{URL}", json=body, headers={"X-Ledgerkeep-Key": key, **headers}
        )

    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(one, bodies))


def test_six_parallel_calls_of_one_session_are_all_answered_and_journaled(
    live_server, key, upstream
):
    """Fan-out: six subagents share the session header and one history, each adding its
    own task: every call is 200 (never 409), each request with its answer on a branch."""
    for _ in range(6):
        upstream.push(echo=True)
    history = _chat()["messages"] + [{"role": "assistant", "content": "Splitting the work."}]
    tasks = [f"Subtask {n}: count the files in dir{n}." for n in range(6)]
    bodies = [
        {"model": "scripted-model", "messages": [*history, {"role": "user", "content": t}]}
        for t in tasks
    ]

    answers = _parallel(live_server, key, bodies, {"X-Ledgerkeep-Session": "fan-out"})

    assert [a.status_code for a in answers] == [200] * 6, [a.text for a in answers]
    assert {a.headers["X-Ledgerkeep-Answer-Journaled"] for a in answers} == {"true"}
    journals = Journal.objects.filter(session__key="fan-out")
    assert journals.count() == 6  # main and five siblings
    endings = set()
    for journal in journals:
        rows = list(Entry.objects.filter(journal=journal).order_by("seq"))
        assert [e.text for e in rows[:3]] == [SYSTEM, "Count the files.", "Splitting the work."]
        endings.add((rows[3].text, rows[4].text))  # the request, then its own answer
        assert len(rows) == 5
    assert endings == {(t, f"re: {t}") for t in tasks}


def test_best_of_n_parallel_calls_keep_one_history_and_every_answer(live_server, key, upstream):
    for n in range(6):
        upstream.push(text=f"Answer {n}.")
    answers = _parallel(live_server, key, [_chat()] * 6, {"X-Ledgerkeep-Session": "best-of"})

    assert [a.status_code for a in answers] == [200] * 6
    texts = {a.json()["choices"][0]["message"]["content"] for a in answers}
    journaled = Entry.objects.filter(journal__session__key="best-of", role="assistant")
    assert sorted(e.text for e in journaled) == sorted(texts) and len(texts) == 6
    assert Entry.objects.filter(journal__session__key="best-of", role="user").count() == 6
    assert len(entries("best-of")) == 3  # main: the history once and the first answer


# ---------------------------------------------------------------- headers and keys


def test_upstream_response_headers_come_back_without_hop_by_hop(live_server, key, upstream):
    wait = {"retry-after": "7", "x-ratelimit-remaining-requests": "41", "x-request-id": "req_9"}
    upstream.push(text="ok", headers={**wait, "Keep-Alive": "timeout=5"})
    upstream.push(text="ok streamed", headers=wait)
    c = openai.OpenAI(
        base_url=f"{live_server.url}/proxy/openai/v1",
        api_key="sk-x",
        default_headers={"X-Ledgerkeep-Key": key},
        max_retries=0,
    )
    raw = c.chat.completions.with_raw_response.create(**_chat())
    with httpx.stream(
        "POST",
        f"{live_server.url}{URL}",
        json=_chat(stream=True),
        headers={"X-Ledgerkeep-Key": key},
    ) as streamed:
        streamed.read()

    for response in (raw, streamed):
        assert {k: response.headers.get(k) for k in wait} == wait
        assert response.headers.get("keep-alive") is None
    assert raw.headers["X-Ledgerkeep-Session"].startswith("px-")


def test_the_ledgerkeep_key_works_as_the_sdk_api_key(live_server, key, upstream, settings):
    """Tools that take only a base URL and an API key: ``Authorization: Bearer lk_...``
    (OpenAI) or ``x-api-key: lk_...`` (Anthropic) is the tenant key; the server's upstream
    key goes upstream, the tenant key never does."""
    settings.UPSTREAM_OPENAI_API_KEY = "sk-server"
    settings.UPSTREAM_ANTHROPIC_API_KEY = "sk-ant-server"
    upstream.push(text="via bearer")
    upstream.push(text="via x-api-key")
    c = openai.OpenAI(base_url=f"{live_server.url}/proxy/openai/v1", api_key=key, max_retries=0)
    answer = c.chat.completions.create(**_chat())
    anthropic = httpx.post(
        f"{live_server.url}/proxy/anthropic/v1/messages",
        json={"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi."}]},
        headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
    )

    assert answer.choices[0].message.content == "via bearer"
    assert anthropic.status_code == 200, anthropic.text
    assert upstream.headers[0]["authorization"] == "Bearer sk-server"
    assert upstream.headers[1]["x-api-key"] == "sk-ant-server"
    assert all(key not in json.dumps(h) for h in upstream.headers)


def test_a_wrong_bearer_key_is_401_and_refused_keys_are_rate_limited(
    live_server, upstream, tenant, settings
):
    settings.API_AUTH_FAILURE_RATE = "3/m"
    wrong = "lk_00000000_" + "x" * 43
    statuses = [
        httpx.post(
            f"{live_server.url}{URL}", json=_chat(), headers={"Authorization": f"Bearer {wrong}"}
        )
        for _ in range(5)
    ]
    assert [r.status_code for r in statuses[:3]] == [401] * 3
    assert statuses[4].status_code == 429 and statuses[4].json()["code"] == "rate_limited"
    assert int(statuses[4].headers["Retry-After"]) >= 1
    assert upstream.requests == []


def test_a_key_over_the_api_rate_limit_is_429_on_the_proxy_too(
    live_server, key, upstream, settings
):
    settings.API_RATE_LIMIT = "2/m"
    upstream.push(text="one")
    upstream.push(text="two")
    headers = {"X-Ledgerkeep-Key": key}
    codes = [
        httpx.post(f"{live_server.url}{URL}", json=_chat(), headers=headers).status_code
        for _ in range(3)
    ]
    assert codes == [200, 200, 429]
    assert len(upstream.requests) == 2


@pytest.mark.parametrize("section", ["409", "429", "413", "502", "504", "context_failed"])
def test_the_readme_lists_every_proxy_error(section):
    readme = (ROOT / "README.md").read_text()
    errors = readme.split("#### Proxy errors")[1].split("\n#")[0]
    assert section in errors


# ---------------------------------------------------------------- bad bodies


@pytest.mark.parametrize(
    "raw, depth",
    [
        (b'"x"', 0),
        (b"[]", 1),
        (b'{"a": [{"b": "[[[[{{{"}]}', 3),
        (b'["\\"]]]]", [[1]]]', 3),
        (b"[" * 5000 + b"]" * 5000, 5000),
    ],
)
def test_json_depth_counts_structure_not_string_contents(raw, depth):
    assert json_depth(raw) == depth


def _raw_post(live_server, key, raw: bytes, **headers):
    return httpx.post(
        f"{live_server.url}{URL}",
        content=raw,
        headers={"X-Ledgerkeep-Key": key, "Content-Type": "application/json", **headers},
    )


@pytest.mark.parametrize(
    "raw, status, field",
    [
        # nested 100,000 deep: refused before parsing
        (b'{"model": "m", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 422, None),
        (
            b'{"model": "m", "messages": [{"role": "user", "content": "a\\ud800b"}]}',
            422,
            "messages[0].content",
        ),
        (
            b'{"model": "m", "messages": [{"role": "user", "content": "a\\u0000b"}]}',
            422,
            "messages[0].content",
        ),
        (b'{"model": "m\\udfff", "messages": []}', 422, "model"),
        # numbers no provider takes: refused by name, not "not UTF-8 JSON", never a 500
        (b'{"model": "m", "temperature": 1e999999, "messages": []}', 422, None),
        (b'{"model": "m", "temperature": NaN, "messages": []}', 422, None),
        (b'{"model": "m", "max_tokens": ' + b"9" * 5000 + b', "messages": []}', 422, None),
    ],
    ids=["deep", "lone-surrogate", "nul", "surrogate-elsewhere", "inf", "nan", "5000-digits"],
)
def test_bad_bodies_are_refused_in_the_error_shape_and_nothing_is_written(
    live_server, key, upstream, raw, status, field
):
    response = _raw_post(live_server, key, raw)

    assert response.status_code == status, response.text
    assert response.json()["code"] == "invalid_body" and response.json()["field"] == field
    assert Entry.objects.count() == 0 and upstream.requests == []


def test_a_body_over_the_size_limit_is_413_before_it_is_read(live_server, key, upstream, settings):
    settings.API_MAX_BODY_BYTES = 1000
    message = {"role": "user", "content": "x" * 2000}
    response = _raw_post(
        live_server, key, json.dumps({"model": "m", "messages": [message]}).encode()
    )
    assert response.status_code == 413 and response.json()["code"] == "payload_too_large"
    assert Entry.objects.count() == 0 and upstream.requests == []


# ---------------------------------------------------------------- cost per call


def test_journaling_an_answer_does_not_read_the_history_again(db, key, upstream):
    """The answer of a call whose branch still ends at its request is appended directly:
    the same number of queries after a history of 20 messages as after one of 200."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from journal_app.auth import api_key_authenticate
    from proxy_app import services

    tenant = api_key_authenticate(raw=key).tenant
    counts = []
    for n in (20, 200):
        messages = [{"role": "system", "content": SYSTEM}] + [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}
            for i in range(n - 1)
        ]
        body = {"model": "m", "messages": messages}
        _, items = services.request_read("openai", body)
        scope = services.ProxyScope(tenant, f"cost-{n}", "main", None)
        recorded = services.conversation_record(scope=scope, items=items)
        with CaptureQueriesContext(connection) as queries:
            placed = services.answer_record(
                surface="openai",
                body=body,
                items=items,
                recorded=recorded,
                answer={"role": "assistant", "content": "done"},
                usage=None,
                meta={},
            )
        assert (placed.revision, placed.appended) == (n + 1, 1)
        assert entries(f"cost-{n}")[-1].text == "done"
        counts.append(len(queries))
        # no read of the branch's entries from its start (what placing a history does);
        # reads of the new entries (seq > n) are bounded
        whole = [
            q["sql"]
            for q in queries
            if 'ORDER BY "journal_app_entry"."seq"' in q["sql"]
            and '"journal_app_entry"."seq" >' not in q["sql"]
        ]
        assert whole == []
    assert counts[0] == counts[1]
