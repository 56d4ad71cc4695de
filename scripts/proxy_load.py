"""A bounded loopback load test of the proxy in its production configuration.

Starts a scripted upstream (``tests/proxy_app/upstream.py``) on 127.0.0.1, then gunicorn as
production runs it (``gunicorn -c python:config.gunicorn config.asgi:application``, uvicorn
workers), and sends ``--streams`` concurrent streamed Chat Completions calls whose answers
take ``--seconds`` each (one word per second or faster), one session per call. Meanwhile it
asks the REST API (``GET /api/v1/sessions``) once a second. It then checks that every stream
ended with ``[DONE]`` and every answer is journaled, and prints a JSON summary::

    python scripts/proxy_load.py --streams 50 --seconds 150            # README "Run in production"
    python scripts/proxy_load.py --streams 6 --seconds 2 --database-url postgres://...

Without ``--database-url`` it uses a fresh SQLite file in a temporary folder; either is
migrated first. Exit status
0 when every stream completed and was journaled and the API answered throughout, else 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _stream(client: Any, base: str, key: str, n: int) -> dict[str, Any]:
    """One streamed call; what came back."""
    body = {
        "model": "scripted",
        "stream": True,
        "messages": [
            {"role": "system", "content": "You are a load test."},
            {"role": "user", "content": f"Load test call {n}: answer slowly."},
        ],
    }
    headers = {"X-Ledgerkeep-Key": key, "X-Ledgerkeep-Session": f"load-{n}"}
    started = time.monotonic()
    data = b""
    status = 0
    try:
        async with client.stream(
            "POST", f"{base}/proxy/openai/v1/chat/completions", json=body, headers=headers
        ) as response:
            status = response.status_code
            async for chunk in response.aiter_bytes():
                data += chunk
    except Exception as exc:  # a cut stream is a result, not a crash of the test
        return {"n": n, "status": status, "done": False, "error": repr(exc)}
    return {
        "n": n,
        "status": status,
        "done": b"data: [DONE]" in data,
        "seconds": round(time.monotonic() - started, 1),
    }


async def _api_poll(client: Any, base: str, key: str, stop: asyncio.Event) -> list[float]:
    """Latencies (seconds) of ``GET /api/v1/sessions`` once a second until ``stop``; a failed
    call counts as infinity."""
    latencies: list[float] = []
    while not stop.is_set():
        started = time.monotonic()
        try:
            r = await client.get(
                f"{base}/api/v1/sessions", headers={"Authorization": f"Bearer {key}"}
            )
            latencies.append(time.monotonic() - started if r.status_code == 200 else float("inf"))
        except Exception:
            latencies.append(float("inf"))
        try:
            await asyncio.wait_for(stop.wait(), timeout=1.0)
        except TimeoutError:
            pass
    return latencies


async def _drive(base: str, key: str, streams: int, seconds: float) -> dict[str, Any]:
    import httpx

    timeout = httpx.Timeout(seconds * 3 + 60, connect=30)
    limits = httpx.Limits(max_connections=None)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:
        stop = asyncio.Event()
        poll = asyncio.create_task(_api_poll(client, base, key, stop))
        results = await asyncio.gather(*(_stream(client, base, key, n) for n in range(streams)))
        stop.set()
        latencies = await poll
    return {"results": results, "api_latencies": latencies}


def run(*, streams: int, seconds: float, workers: int, database_url: str | None) -> dict[str, Any]:
    """Run the load test; the summary (see the module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        database_url = database_url or f"sqlite:///{Path(tmp) / 'load.sqlite3'}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "API_"))}
        env.update(
            DJANGO_SETTINGS_MODULE="config.settings",
            DJANGO_DEBUG="true",
            DATABASE_URL=database_url,
            CELERY_TASK_ALWAYS_EAGER="true",
            API_RATE_LIMIT="off",
            MEDIA_ROOT=str(Path(tmp) / "media"),
            LEDGER_FOLD_THRESHOLD_TOKENS=str(10**9),
        )
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True
        )
        os.environ.update(env)
        import django

        django.setup()
        from journal_app.auth import api_key_create
        from journal_app.models import Entry
        from journal_app.services import tenant_ensure
        from tests.proxy_app.upstream import ScriptedUpstream

        tenant = tenant_ensure(slug=f"load-{os.getpid()}")
        key = api_key_create(tenant=tenant, name="load")[1]
        words = max(2, int(seconds))
        with ScriptedUpstream() as upstream:
            for n in range(streams):
                upstream.push(
                    text=" ".join(f"w{n}.{k}" for k in range(words)),
                    chunk_delay=seconds / (words + 2),
                )
            port = _free_port()
            env["UPSTREAM_OPENAI_BASE_URL"] = upstream.openai_base
            log_path = Path(tmp) / "gunicorn.log"
            command = [
                sys.executable, "-m", "gunicorn", "-c", "python:config.gunicorn",
                "config.asgi:application", "--bind", f"127.0.0.1:{port}",
                "--workers", str(workers),
            ]  # fmt: skip
            with log_path.open("wb") as log:
                server = subprocess.Popen(
                    command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
                )
            base = f"http://127.0.0.1:{port}"
            try:
                _wait_healthy(base, server, log_path)
                started = time.monotonic()
                outcome = asyncio.run(_drive(base, key, streams, seconds))
                wall = time.monotonic() - started
            finally:
                server.terminate()
                server.wait(timeout=60)
            gunicorn_log = log_path.read_text(errors="replace")
        journaled = Entry.objects.filter(
            journal__session__tenant=tenant, role="assistant", kind="message"
        ).count()
        results = outcome["results"]
        latencies = outcome["api_latencies"]
        completed = sum(1 for r in results if r["status"] == 200 and r["done"])
        summary = {
            "streams": streams,
            "seconds": seconds,
            "workers": workers,
            "database": database_url.split(":", 1)[0],
            "completed": completed,
            "journaled": journaled,
            "wall_seconds": round(wall, 1),
            "api_calls": len(latencies),
            "api_max_seconds": round(max(latencies), 3) if latencies else None,
            "worker_timeouts": gunicorn_log.count("WORKER TIMEOUT"),
            "failures": [r for r in results if not (r["status"] == 200 and r["done"])],
        }
        summary["ok"] = (
            completed == streams
            and journaled == streams
            and summary["worker_timeouts"] == 0
            and bool(latencies)
            and all(x != float("inf") for x in latencies)
        )
        if not summary["ok"]:
            summary["log_tail"] = gunicorn_log[-3000:]
            Path(tempfile.gettempdir(), "proxy_load.log").write_text(gunicorn_log)
        return summary


def _wait_healthy(base: str, server: subprocess.Popen, log_path: Path) -> None:
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError("gunicorn exited:\n" + log_path.read_text(errors="replace"))
        try:
            if httpx.get(f"{base}/healthz", timeout=5).status_code in (200, 503):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError("gunicorn did not answer /healthz:\n" + log_path.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=50, help="concurrent streamed calls")
    parser.add_argument("--seconds", type=float, default=150, help="seconds each answer takes")
    parser.add_argument("--workers", type=int, default=1, help="gunicorn workers")
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    args = parser.parse_args(argv)
    summary = run(
        streams=args.streams,
        seconds=args.seconds,
        workers=args.workers,
        database_url=args.database_url,
    )
    print(json.dumps(summary, indent=2))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
