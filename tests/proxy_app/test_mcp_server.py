"""The MCP server, driven by the official ``mcp`` client over stdio.

The server is a separate process (as Claude Code and Codex launch it), so it gets its own
SQLite file prepared with the real commands: migrate, a tenant and key, an import, a fold.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.proxy_app.readme import mcp_commands

ROOT = Path(__file__).resolve().parents[2]


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> tuple[dict[str, str], str, str]:
    """``(env, key of acme, key of globex)`` with session ``demo`` imported and folded."""
    folder = tmp_path_factory.mktemp("mcp")
    env = {k: v for k, v in os.environ.items() if k not in ("TEST_DATABASE_NAME",)}
    env["DATABASE_URL"] = f"sqlite:///{folder / 'db.sqlite3'}"
    env["MEDIA_ROOT"] = str(folder / "media")
    manage(env, "migrate", "-v", "0")
    manage(env, "create_tenant", "acme")
    manage(env, "create_tenant", "globex")
    key = manage(env, "create_api_key", "acme", "--name", "mcp", "--quiet")
    other = manage(env, "create_api_key", "globex", "--name", "mcp", "--quiet")
    manage(
        env,
        "import_journal",
        str(ROOT / "samples" / "demo-session.json"),
        "--tenant",
        "acme",
        "--session",
        "demo",
        "--no-progress",
    )
    manage(env, "compact", "acme/demo")
    return env, key, other


def call(env: dict[str, str], key: str, steps):
    """Start ``manage.py mcp_server`` over stdio and run ``steps(session)``."""

    async def main():
        params = StdioServerParameters(
            command=sys.executable,
            args=["manage.py", "mcp_server", "--key", key, "--session", "demo"],
            env=env,
            cwd=str(ROOT),
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await steps(session)

    return anyio.run(main)


def payload(result) -> dict:
    assert not result.isError, result.content
    return json.loads(result.content[0].text)


def test_it_lists_the_four_tools_and_answers_them(prepared):
    env, key, _ = prepared

    async def steps(s):
        tools = sorted(t.name for t in (await s.list_tools()).tools)
        found = payload(await s.call_tool("search", {"query": "refund", "limit": 2}))
        page2 = payload(
            await s.call_tool("search", {"query": "refund", "cursor": found["next_cursor"]})
        )
        first = found["hits"][0]
        read = payload(await s.call_tool("read", {"entry": first["entry"]}))
        ledger = payload(await s.call_tool("ledger", {}))
        analyst = payload(await s.call_tool("analyst", {"question": "How are refunds rounded?"}))
        missing = await s.call_tool("read", {"seq": 99999})
        tampered = await s.call_tool(
            "search", {"query": "refund", "cursor": "x" + found["next_cursor"]}
        )
        return tools, found, page2, read, ledger, analyst, missing, tampered

    tools, found, page2, read, ledger, analyst, missing, tampered = call(env, key, steps)
    assert tools == ["analyst", "ledger", "read", "search"]
    assert len(found["hits"]) == 2 and found["next_cursor"]
    assert page2["revision"] == found["revision"]
    assert page2["hits"][0]["seq"] > found["hits"][-1]["seq"]
    assert read["verified"] is True
    assert read["entry"] == first_entry(found)
    assert "refund" in read["text"].lower()
    assert ledger["fold"] >= 1 and ledger["facts"]
    support = [s for f in ledger["facts"] for s in f["support"]]
    assert support and all(s["entry"].startswith("sha256:") for s in support)
    assert analyst["outcome"] and "claims" in analyst
    assert missing.isError and missing.content[0].text.split(": ", 1)[1].startswith("not_found:")
    assert tampered.isError and tampered.content[0].text.split(": ", 1)[1].startswith(
        "cursor_refused:"
    )


def first_entry(found: dict) -> str:
    return found["hits"][0]["entry"]


def test_another_tenants_key_finds_no_session(prepared):
    env, _, other = prepared

    async def steps(s):
        return await s.call_tool("search", {"query": "refund"})

    result = call(env, other, steps)
    assert result.isError
    assert result.content[0].text.split(": ", 1)[1].startswith("not_found:")


def test_a_key_revoked_while_the_server_runs_stops_its_tools(prepared):
    """Fresh-eyes finding: the key was checked once at start, so a
    revoked key kept working until the server restarted."""
    env, _, _ = prepared
    key = manage(env, "create_api_key", "acme", "--name", "revoked-later", "--quiet")

    async def steps(s):
        before = await s.call_tool("ledger", {})
        await anyio.to_thread.run_sync(lambda: manage(env, "revoke_api_key", key))
        after = await s.call_tool("ledger", {})
        return before, after

    before, after = call(env, key, steps)
    assert payload(before)["facts"]
    assert after.isError and "unauthenticated" in after.content[0].text


def test_a_wrong_key_does_not_start(prepared):
    env, _, _ = prepared
    done = subprocess.run(
        [sys.executable, "manage.py", "mcp_server", "--key", "lk_nope", "--session", "demo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "--key is missing, unknown or revoked" in done.stderr


@pytest.mark.parametrize("runtime", ["claude", "codex"])
def test_the_readme_configuration_starts_the_server_and_lists_its_tools(prepared, runtime):
    env, key, _ = prepared
    argv = mcp_commands(key)[runtime]
    argv = [a.replace("readme-openai", "demo") for a in argv]

    async def main():
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd="/")
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = sorted(t.name for t in (await session.list_tools()).tools)
                found = payload(await session.call_tool("search", {"query": "refund"}))
                return tools, found

    tools, found = anyio.run(main)
    assert tools == ["analyst", "ledger", "read", "search"]
    assert found["hits"]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_over_http_every_request_needs_the_servers_key(prepared):
    """Fresh-eyes finding: ``--http`` served anyone who reached the port with
    the key it was started with. Now each HTTP request must carry that key as a bearer."""
    import time
    import urllib.error
    import urllib.request

    from mcp.client.streamable_http import streamablehttp_client

    env, key, other = prepared
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "mcp_server",
            "--key",
            key,
            "--session",
            "demo",
            "--http",
            "--port",
            str(port),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while True:  # wait for the port (a deadline, not a timing assertion)
            try:
                urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=2)
            except urllib.error.HTTPError as exc:
                refused = exc
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, server.stderr
                time.sleep(0.3)
        assert refused.code == 401
        assert json.loads(refused.read())["code"] == "unauthenticated"
        with pytest.raises(urllib.error.HTTPError) as wrong:
            urllib.request.urlopen(
                urllib.request.Request(
                    url, method="POST", headers={"Authorization": f"Bearer {other}"}
                ),
                timeout=5,
            )
        assert wrong.value.code == 401  # another tenant's live key is not this server's

        async def main():
            headers = {"Authorization": f"Bearer {key}"}
            async with streamablehttp_client(url, headers=headers) as (read, write, _):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await session.call_tool("ledger", {})

        assert payload(anyio.run(main))["facts"]
    finally:
        server.terminate()
        server.wait(timeout=30)
