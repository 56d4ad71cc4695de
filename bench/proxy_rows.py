"""Proxy cost per call: CPU seconds the proxy spends on one call that adds one message to a
history of 230 / 1,000 / 5,000 messages (``--small``: 230 and 1,000), the fitted exponent
over the lengths (goal <= 0.2: flat in history length), and the same calls through
LiteLLM's proxy in front of the same scripted upstream (goal: within 3x of it).

Each call goes through the async view in process (Django's ``AsyncClient``, the body
encoded before the clock starts) to a scripted upstream on 127.0.0.1 running in a process
of its own (its work is not the proxy's: LiteLLM's figure does not count it either),
uncompacted (a working budget above the history) and with automatic
folds off, so the figure is the proxy's own work: key check, placement of the resent
history (README "How the proxy places a history": the prefix index), journaling of the new
message and of the answer. The first call of each length journals the whole history and is
not measured; the figure is the median of the calls after it.

The baseline is LiteLLM's proxy (``litellm --config``, one worker, no database, the
scripted upstream as an ``openai/`` model), when a ``litellm`` executable is found
(``BENCH_LITELLM``, else ``PATH``): it is not a project dependency (README "Benchmarks").
Its CPU per call is the CPU time its process tree spent (``/proc``) during the same calls.
Without it the ratio rows say "not measured".
"""

from __future__ import annotations

import cProfile
import json
import math
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

#: calls per history length; the first journals the history and is not measured
CALLS = 6

WORDS = "the build failed in auth because the token check runs before the cache is warm".split()


def _history(n: int) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": "You are a careful coding agent."}]
    for i in range(n - 1):
        role = "user" if i % 2 == 0 else "assistant"
        text = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(40))
        messages.append({"role": role, "content": f"{i}: {text}"})
    return messages


def _next_turn(messages: list[Any], answer: dict[str, Any], call: int) -> list[Any]:
    """The history the client sends next: the answer's text, then one new user message."""
    text = answer["choices"][0]["message"]["content"]
    return [
        *messages,
        {"role": "assistant", "content": text},
        {"role": "user", "content": f"next step {call}"},
    ]


def _fit(lengths: list[int], seconds: list[float]) -> float:
    xs = [math.log(n) for n in lengths]
    ys = [math.log(max(s, 1e-9)) for s in seconds]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


def _tree_cpu(root: int) -> float:
    """CPU seconds (user + system) of process ``root`` and its descendants, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    tree, grew = {root}, True
    while grew:
        more = {p for p, parent in parents.items() if parent in tree} - tree
        grew = bool(more)
        tree |= more
    return sum(times.get(p, 0.0) for p in tree)


#: the code the upstream's own process runs: a scripted upstream with answers for every call
_UPSTREAM = """
import sys
from tests.proxy_app.upstream import ScriptedUpstream
up = ScriptedUpstream()
for n in range(int(sys.argv[1])):
    up.push(text=f"answer {n}")
print(up.port, flush=True)
sys.stdin.read()
up.stop()
"""


class _UpstreamProcess:
    """A scripted upstream (:class:`tests.proxy_app.upstream.ScriptedUpstream`) in a child
    process, scripted with ``answers`` plain answers: its CPU is not counted as the proxy's.
    ``push`` does nothing (the answers are scripted up front)."""

    def __init__(self, answers: int = 2000) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _UPSTREAM, str(answers)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=Path(__file__).resolve().parent.parent,
            text=True,
        )
        assert self._proc.stdout is not None
        self.port = int(self._proc.stdout.readline())

    @property
    def openai_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, **_: Any) -> None:
        pass

    def __enter__(self) -> _UpstreamProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            self._proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._proc.kill()


#: LiteLLM calls per history length, timed as one batch (a 10 ms tick over 30 calls: 0.3 ms)
LITELLM_CALLS = 30


def _litellm_cpu(lengths: list[int], up: Any) -> tuple[dict[int, float], str]:
    """LiteLLM's proxy CPU per call for the same histories: ``({length: seconds}, note)``;
    ``({}, why)`` when it is not installed or does not start."""
    exe = os.environ.get("BENCH_LITELLM") or shutil.which("litellm")
    if not exe:
        return {}, "not measured: no litellm executable (BENCH_LITELLM or PATH)"
    work = Path(tempfile.mkdtemp(prefix="bench-litellm-"))
    (work / "config.yaml").write_text(
        "model_list:\n  - model_name: bench\n    litellm_params:\n"
        f"      model: openai/bench\n      api_base: {up.openai_base}\n"
        "      api_key: sk-bench\nlitellm_settings:\n  telemetry: false\n"
    )
    master = "sk-bench-" + os.urandom(16).hex()
    port = 40000 + os.getpid() % 20000
    env = {
        **os.environ,
        "LITELLM_MASTER_KEY": master,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_LOG": "ERROR",
    }
    env.pop("DATABASE_URL", None)
    cmd = [exe, "--config", str(work / "config.yaml"), "--port", str(port), "--num_workers", "1"]
    log = (work / "litellm.log").open("wb")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    figures: dict[int, float] = {}
    try:
        with httpx.Client(timeout=120) as client:
            deadline = time.monotonic() + 180
            while True:
                try:
                    if client.get(f"{base}/health/liveliness").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    return {}, f"not measured: litellm did not start (log in {work})"
                time.sleep(1)
            for n in lengths:
                messages = _history(n)
                # /proc counts CPU in 10 ms ticks and one LiteLLM call takes 20-60 ms: the
                # batch's total over LITELLM_CALLS calls (after one warm-up call), divided
                before = 0.0
                for call in range(LITELLM_CALLS + 1):
                    if call == 1:
                        before = _tree_cpu(proc.pid)
                    up.push(text=f"answer {call}")
                    response = client.post(
                        f"{base}/v1/chat/completions",
                        json={"model": "bench", "messages": messages},
                        headers={"Authorization": f"Bearer {master}"},
                    )
                    response.raise_for_status()
                    messages = _next_turn(messages, response.json(), call)
                figures[n] = (_tree_cpu(proc.pid) - before) / LITELLM_CALLS
                print(f"litellm: {n:>5} messages: {figures[n]:.3f} CPU s per call")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    return figures, f"LiteLLM's proxy ({exe}), one worker, same scripted upstream"


def _cache_share(client: Any, key: str, up: Any, turns: int) -> dict[str, Any]:
    """An Anthropic agent loop over its working budget through the proxy (folds on, at
    the default threshold): the shared block prefix of each compacted request with the
    previous one, as a share of the previous one's tokens, for consecutive compacted calls
    with no fold landing between them; and the markers each compacted request carried."""
    from asgiref.sync import async_to_sync

    from journal_app.tokens import count_tokens
    from proxy_app.caching import shared_prefix

    mark = {"type": "ephemeral"}
    headers = {
        "X-Ledgerkeep-Key": key,
        "X-Ledgerkeep-Session": "bench-cache",
        "X-Ledgerkeep-Working-Budget": "20000",
    }
    system = [{"type": "text", "text": "You are a careful coding agent.", "cache_control": mark}]
    messages: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "Audit it."}]}]
    seen = len(up.requests)
    calls: list[tuple[bool, str]] = []
    for n in range(turns):
        up.push(calls=[(f"toolu_{n}", "cat", {"path": f"src/{n}.py"})])
        response = async_to_sync(client.post)(
            "/proxy/anthropic/v1/messages",
            {"model": "bench", "max_tokens": 512, "system": system, "messages": messages},
            content_type="application/json",
            headers=headers,
            secure=True,
        )
        assert response.status_code == 200, response.content[:300]
        calls.append(
            (response["X-Ledgerkeep-Compacted"] == "true", response.get("X-Ledgerkeep-Fold", ""))
        )
        for m in messages:  # the client keeps one marker on its newest block
            for b in m["content"]:
                b.pop("cache_control", None)
        messages.append({"role": "assistant", "content": response.json()["content"]})
        text = " ".join(WORDS[(n + k) % len(WORDS)] for k in range(400))
        result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": text}
        messages.append({"role": "user", "content": [{**result, "cache_control": mark}]})
    sent = up.requests[seen:]

    def count(role: str, block: Any) -> int:
        return count_tokens(json.dumps(block), "o200k_base")

    shares = [
        shared_prefix(sent[i - 1], sent[i], count)
        for i in range(1, len(sent))
        if calls[i][0] and calls[i - 1][0] and calls[i][1] == calls[i - 1][1]
    ]
    ratios = [s / t for s, t in shares if t]
    marks = [
        sum(
            1
            for part in [
                *(r.get("system") or []),
                *(b for m in r["messages"] for b in m["content"]),
            ]
            if isinstance(part, dict) and "cache_control" in part
        )
        for r, (compacted, _) in zip(sent, calls, strict=True)
        if compacted
    ]
    return {
        "compacted_calls": sum(1 for c, _ in calls if c),
        "pairs_between_folds": len(ratios),
        "mean_share": statistics.fmean(ratios) if ratios else None,
        "pairs_at_least_90": sum(1 for r in ratios if r >= 0.9),
        "markers_min": min(marks) if marks else None,
        "markers_max": max(marks) if marks else None,
    }


def run(small: bool = False, profile: bool = False) -> dict[str, Any]:
    from asgiref.sync import async_to_sync
    from django.test import AsyncClient, override_settings

    from journal_app.auth import api_key_create
    from journal_app.services import tenant_ensure
    from proxy_app.reading import read_counts
    from tests.proxy_app.upstream import ScriptedUpstream

    lengths = [230, 1000] if small else [230, 1000, 5000]
    # one profile per length, timed in CPU seconds (a wall-clock profile counts the waits
    # of the thread handing the view's sync part over as work)
    profilers = {n: cProfile.Profile(time.process_time) for n in lengths} if profile else {}
    key = api_key_create(tenant=tenant_ensure(slug="bench-proxy"), name="bench")[1]
    client = AsyncClient()
    figures: dict[int, float] = {}
    work: dict[int, dict[str, float]] = {}
    with _UpstreamProcess() as up:
        with override_settings(
            UPSTREAM_OPENAI_BASE_URL=up.openai_base,
            UPSTREAM_OPENAI_API_KEY="",
            LEDGER_FOLD_THRESHOLD_TOKENS=10**12,
            API_RATE_LIMIT="",
        ):
            for n in lengths:
                headers = {
                    "X-Ledgerkeep-Key": key,
                    "X-Ledgerkeep-Session": f"bench-proxy-{n}",
                    "X-Ledgerkeep-Working-Budget": str(10**7),
                }
                messages = _history(n)
                samples = []
                before = read_counts()
                for call in range(CALLS):  # the first call journals the history: not measured
                    if call == 1:
                        before = read_counts()
                    data = json.dumps({"model": "bench", "messages": messages}).encode()
                    profiler = profilers.get(n) if call else None
                    if profiler is not None:
                        profiler.enable()
                    started = time.process_time()
                    response = async_to_sync(client.post)(
                        "/proxy/openai/v1/chat/completions",
                        data,
                        content_type="application/json",
                        headers=headers,
                        secure=True,
                    )
                    spent = time.process_time() - started
                    if profiler is not None:
                        profiler.disable()
                    assert response.status_code == 200, (
                        response.status_code,
                        dict(response.headers),
                        response.content[:300],
                    )
                    if call:
                        samples.append(spent)
                    messages = _next_turn(messages, response.json(), call)
                after = read_counts()
                figures[n] = statistics.median(samples)
                work[n] = {
                    "read_whole": after.whole - before.whole,
                    "messages_read_per_call": (after.messages_read - before.messages_read)
                    / (CALLS - 1),
                    "messages_digested_per_call": (
                        after.messages_digested - before.messages_digested
                    )
                    / (CALLS - 1),
                }
                print(f"proxy: {n:>5} messages: {figures[n]:.3f} CPU s per call; work {work[n]}")
    for n, profiler in profilers.items():
        print(f"proxy: profile of {CALLS - 1} calls adding one message to {n} messages")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(45)
    with ScriptedUpstream() as up:
        with override_settings(
            UPSTREAM_ANTHROPIC_BASE_URL=up.anthropic_base,
            UPSTREAM_ANTHROPIC_API_KEY="",
            API_RATE_LIMIT="",
        ):
            caching = _cache_share(client, key, up, 64 if small else 96)
    print(f"proxy: prompt cache: {caching}")
    exponent = _fit(lengths, [figures[n] for n in lengths])
    with _UpstreamProcess() as up:
        baseline, note = _litellm_cpu(lengths, up)
    summary = []
    for n in lengths:
        ratio = figures[n] / baseline[n] if baseline.get(n) else None
        summary.append(
            {
                "metric": f"proxy CPU per call, {n} messages",
                "value": round(figures[n], 4),
                "unit": "s",
                "baseline": round(baseline[n], 4) if n in baseline else None,
                "ratio": round(ratio, 2) if ratio is not None else None,
                "target": "<= 3x LiteLLM" if n >= 1000 else None,
                "met": (ratio <= 3) if ratio is not None and n >= 1000 else None,
                "what": f"one call adding a message to {n}; baseline: {note}",
            }
        )
    summary.append(
        {
            "metric": f"proxy CPU exponent over {lengths[0]}-{lengths[-1]} messages",
            "value": round(exponent, 3),
            "unit": "",
            "baseline": None,
            "ratio": None,
            "target": "<= 0.2",
            "met": exponent <= 0.2,
            "what": "least-squares slope of log(CPU s per call) over log(messages) of the "
            "rows above | flat is 0",
        }
    )
    share = caching["mean_share"]
    summary.append(
        {
            "metric": "compacted calls: shared prefix with the previous call, between folds",
            "value": round(share, 3) if share is not None else None,
            "unit": "share",
            "baseline": None,
            "ratio": None,
            "target": ">= 0.9",
            "met": share >= 0.9 if share is not None else None,
            "what": f"mean over {caching['pairs_between_folds']} consecutive compacted "
            f"Anthropic calls with no fold between them ({caching['pairs_at_least_90']} at "
            f">= 90%); {caching['markers_min']}-{caching['markers_max']} cache markers each",
        }
    )
    return {
        "prompt_cache": caching,
        "per_call_cpu_seconds": figures,
        "per_call_work": work,
        "litellm_cpu_seconds": baseline,
        "baseline": note,
        "exponent": exponent,
        "summary": summary,
    }
