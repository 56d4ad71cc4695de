"""Pasted material through the proxy under a small window (docs/design.md 5.2 and 6): a session of
ten 3k-token pasted user messages under an 8,000-token budget keeps answering, each paste
shown as a receipt and recoverable whole through ``read``."""

from __future__ import annotations

import json

import openai

from journal_app.models import Journal
from journal_app.tokens import count_tokens
from recovery_app.services import recovery_read
from tests.proxy_app.conftest import entries
from tests.proxy_app.test_openai_proxy import SYSTEM, client

PASTES = 10


def paste(n: int) -> str:
    """A 3k-token log, different for each ``n``."""
    return "\n".join(
        f"2026-12-06T03:{i % 60:02d}:{n:02d}Z ERROR worker-{n}-{i} sync failed: connection "
        f"reset by peer (request id {n * 7919 + i * 104729}, retry {i % 7})"
        for i in range(80)
    )


def test_ten_pasted_logs_under_8000_tokens_keep_answering_and_each_is_readable(
    live_server, key, upstream, settings
):
    settings.MODEL_WINDOWS = {"paste-model": 8_000}
    logs = [paste(n) for n in range(PASTES)]
    assert all(2_800 <= count_tokens(log) <= 3_400 for log in logs)
    for n in range(PASTES):
        upstream.push(text=f"Read log {n}: the sync worker loses its connection.")
    c = client(live_server, key, **{"X-Ledgerkeep-Session": "pastes"})
    messages: list = [{"role": "system", "content": SYSTEM}]
    for n, log in enumerate(logs):
        messages.append(
            {"role": "user", "content": f"Here is log {n}:\n```\n{log}\n```\nWhat failed?"}
        )
        raw = c.chat.completions.with_raw_response.create(model="paste-model", messages=messages)
        answer = raw.parse().choices[0].message  # a 422 raises here
        assert answer.content == f"Read log {n}: the sync worker loses its connection."
        messages.append({"role": "assistant", "content": answer.content})
        sent = json.dumps(upstream.requests[-1]["messages"])
        assert count_tokens(sent) <= 8_000
    journal = Journal.objects.get(session__key="pastes")
    pasted = [e for e in entries("pastes") if e.role == "user"]
    assert len(pasted) == PASTES
    last = [m["content"] for m in upstream.requests[-1]["messages"] if m["role"] == "user"]
    for n, (e, log) in enumerate(zip(pasted, logs, strict=True)):
        # the words around a paste are verbatim; a paste not carried whole is a receipt
        # naming its sha256 ...
        shown = next(t for t in last if t.startswith(f"Here is log {n}:\n"))
        assert shown.endswith("\nWhat failed?")
        assert log in shown or "sha256:" in shown
        # ... and `read` restores it whole
        read = recovery_read(journal=journal, entry=e.entry_hash)
        assert read.verified and log in (read.text or "")


def test_pasted_logs_are_journaled_verbatim_even_when_the_call_is_refused(
    live_server, key, upstream, settings
):
    """What holds today, before receipts: nothing of a paste is lost, whatever the call's fate."""
    settings.MODEL_WINDOWS = {"paste-model": 8_000}
    for n in range(PASTES):
        upstream.push(text=f"answer {n}")
    c = client(live_server, key, **{"X-Ledgerkeep-Session": "kept"})
    messages: list = [{"role": "system", "content": SYSTEM}]
    logs = [paste(n) for n in range(4)]
    for n, log in enumerate(logs):
        messages.append({"role": "user", "content": f"log {n}:\n{log}"})
        try:
            answer = c.chat.completions.create(model="paste-model", messages=messages)
        except openai.UnprocessableEntityError as exc:
            assert exc.response.json()["code"] == "context_failed"
            messages.append({"role": "assistant", "content": "(refused)"})
            continue
        messages.append({"role": "assistant", "content": answer.choices[0].message.content})
    journal = Journal.objects.get(session__key="kept")
    users = [e for e in entries("kept") if e.role == "user"]
    assert [e.text for e in users] == [f"log {n}:\n{log}" for n, log in enumerate(logs)]
    for e, log in zip(users, logs, strict=True):
        assert log in (recovery_read(journal=journal, entry=e.entry_hash).text or "")
