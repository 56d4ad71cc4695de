"""``manage.py mcp_server --key KEY --session S``: the history tools over MCP.

Speaks MCP over stdio (what Claude Code and Codex launch); ``--http`` serves Streamable HTTP
on ``--host``/``--port`` instead. Stdout carries the protocol only: nothing else is printed.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from journal_app.auth import api_key_authenticate
from proxy_app.mcp_server import bearer_guard, build_server


class Command(BaseCommand):
    help = "Serve the agent tools search, read, analyst and ledger over MCP (stdio by default)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--key",
            default=os.environ.get("LEDGERKEEP_KEY", ""),
            help="the tenant's API key (default: $LEDGERKEEP_KEY)",
        )
        parser.add_argument(
            "--session",
            default=os.environ.get("LEDGERKEEP_SESSION", ""),
            help="the session the tools act in: a key, a pattern (px-*) or 'latest' "
            "(default: $LEDGERKEEP_SESSION)",
        )
        parser.add_argument("--lane", default="main")
        parser.add_argument(
            "--branch",
            default="latest",
            help="a branch, or 'latest': the one written to most recently (default)",
        )
        parser.add_argument("--http", action="store_true", help="Streamable HTTP, not stdio")
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8765)

    def handle(self, *args: Any, **options: Any) -> None:
        key = api_key_authenticate(raw=(options["key"] or "").strip())
        if key is None:
            raise CommandError("--key is missing, unknown or revoked")
        if not options["session"]:
            raise CommandError("--session is required (or set LEDGERKEEP_SESSION)")
        server = build_server(
            key=key, session=options["session"], lane=options["lane"], branch=options["branch"]
        )
        if options["http"]:
            import uvicorn

            # every HTTP request must carry this server's key (a bearer), checked each time
            app = bearer_guard(server.streamable_http_app(), key)
            uvicorn.run(app, host=options["host"], port=options["port"], log_level="warning")
        else:
            server.run("stdio")
