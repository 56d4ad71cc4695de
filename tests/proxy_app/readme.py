"""The snippets of README.md's "Use it with your agent", extracted so tests run them as written."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLACEHOLDER = "/path/to/ledgerkeep"


def section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## Use it with your agent")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section(), flags=re.S)


def python_snippet(module: str) -> str:
    """The Python block that imports ``module``."""
    return next(b for b in blocks("python") if f"from {module} import" in b)


def mcp_commands(key: str) -> dict[str, list[str]]:
    """``{"claude": argv, "codex": argv}``: the MCP server commands of the README, with this
    checkout's path and ``key`` in place of the placeholders."""
    line = next(b for b in blocks("sh") if "claude mcp add" in b).strip()
    claude = shlex.split(line)
    claude = claude[claude.index("--") + 1 :]
    config = tomllib.loads(next(b for b in blocks("toml") if "mcp_servers" in b))["mcp_servers"][
        "ledgerkeep"
    ]
    codex = [config["command"], *config["args"]]

    def fill(argv: list[str]) -> list[str]:
        return [a.replace(PLACEHOLDER, str(ROOT)).replace("lk_...", key) for a in argv]

    return {"claude": fill(claude), "codex": fill(codex)}


def mcp_database_urls() -> dict[str, str | None]:
    """``{"claude": url, "codex": url}``: the ``DATABASE_URL`` each README MCP line passes."""
    line = next(b for b in blocks("sh") if "claude mcp add" in b).strip()
    argv = shlex.split(line)
    argv = argv[: argv.index("--")]
    claude = next(
        (v.split("=", 1)[1] for k, v in zip(argv, argv[1:], strict=False) if k == "-e"), None
    )
    config = tomllib.loads(next(b for b in blocks("toml") if "mcp_servers" in b))["mcp_servers"][
        "ledgerkeep"
    ]
    return {"claude": claude, "codex": config.get("env", {}).get("DATABASE_URL")}
