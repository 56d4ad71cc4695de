"""Which tool calls are consequential: they change something outside the conversation. Pure.

docs/design.md 5.5: consequential actions (migrations, deploys, deletes, database writes,
payments and orders, commits and pushes, file writes) and their outcomes are P1 until
superseded; reads and lookups are P3. One table, used by every writer (the mechanical facts
of :func:`ledger_app.mechanical.outcome_fact`, which the offline writer and a model fold's
fallback both use; the fold service stamps the same flag on a model writer's facts).

The table has two columns: patterns over the tool's name (the last ``__`` part of an MCP
name, lower-cased) and patterns over a shell command. ``LEDGER_CONSEQUENTIAL_PATTERNS``
extends it (a JSON object ``{"tools": [regex, ...], "commands": [regex, ...]}``, read at
start-up by :func:`extend`); it never removes a built-in row.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

#: Tool names that change something outside the conversation (regexes, full match).
TOOL_PATTERNS: tuple[str, ...] = (
    # file writes and edits
    r"write|write_file|create_file|edit|edit_file|multiedit|notebookedit|apply_patch",
    r"str_replace_editor|str_replace|insert|create|replace|delete_file|move_file|rename_file",
    # payments, orders, bookings and records (tau-bench's airline and retail tools, CRMs)
    r"(?:book|cancel|update|modify|exchange|return|create|delete|remove|send|transfer|pay|"
    r"refund|charge|purchase|order|place|submit_order|add)_[a-z0-9_]+",
    r"pay|payment|purchase|checkout|refund|transfer|send_email|send_message|post_message",
    # deploys, migrations, version control, infrastructure
    r"deploy|migrate|run_migration|git_commit|git_push|commit|push|merge|publish|release",
)

#: Shell commands that change something outside the conversation (regexes, searched).
COMMAND_PATTERNS: tuple[str, ...] = (
    r"\bmanage\.py\s+(?:migrate|flush|loaddata|createsuperuser)\b",
    # a project's own data command (``manage.py backfill_currency``, ``rake db:seed``)
    r"\b(?:manage\.py|rake|artisan|rails)\s+\S*(?:backfill|seed|import|load|purge|sync|"
    r"delete|update|fix|create|send|charge|refund)\S*",
    r"\b(?:alembic\s+(?:upgrade|downgrade)|rails\s+db:migrate|rake\s+db:|prisma\s+migrate|"
    r"knex\s+migrate|flyway\s+migrate|liquibase\s+update|migrate\s+(?:up|down))\b",
    r"\bgit\s+(?:commit|push|merge|rebase|reset\s+--hard|tag|cherry-pick|revert|rm|mv|"
    r"checkout\s+--|clean\s+-[a-z]*f|stash\s+drop|branch\s+-[dD])\b",
    r"\b(?:kubectl\s+(?:apply|delete|create|patch|rollout|scale|set)|helm\s+(?:install|upgrade|"
    r"uninstall|rollback)|terraform\s+(?:apply|destroy|import)|pulumi\s+up|"
    r"docker\s+(?:push|rm|rmi)|docker\s+compose\s+(?:up|down)|fly\s+deploy|vercel\b.*--prod|"
    r"heroku\s+\S*(?:deploy|release)|serverless\s+deploy|sam\s+deploy|cdk\s+deploy)\b",
    r"\b(?:npm|yarn|pnpm|cargo|twine|poetry|gem)\s+publish\b",
    r"\b(?:deploy|release)(?:\.sh)?\b",
    r"(?:^|[;&|]\s*)(?:sudo\s+)?(?:rm|rmdir|mv|cp|chmod|chown|ln|mkdir|touch|truncate|dd)\s",
    r"\bsed\s+(?:-[a-zA-Z]*i|--in-place)",
    r"\bperl\s+-[a-zA-Z]*i",
    r"(?:^|[^<>&0-9])>{1,2}\s*(?!&|/dev/null)[\w./~-]",
    r"\btee\s+(?:-a\s+)?[\w./~-]",
    r"\bapply_patch\b|\bpatch\s+-p\d",
    r"\b(?:psql|mysql|sqlite3|mongo|mongosh|redis-cli)\b.*\b(?:insert|update|delete|drop|alter|"
    r"truncate|create|grant|revoke|flushall|flushdb|del|set)\b",
    r"\bcurl\b.*(?:-X\s*(?:POST|PUT|PATCH|DELETE)|--request\s+(?:POST|PUT|PATCH|DELETE)|"
    r"\s-d\s|--data)",
    r"\b(?:pip|pip3|uv\s+pip|npm|yarn|pnpm|apt|apt-get|brew|gem|cargo)\s+(?:install|uninstall|"
    r"remove|add|update|upgrade)\b",
    r"\b(?:systemctl|service)\s+\S+\s*(?:start|stop|restart|reload)|\b(?:systemctl)\s+"
    r"(?:start|stop|restart|reload|enable|disable)\b",
    r"\bstripe\s+\S+\s+create\b|\baws\s+\S+\s+(?:put|delete|create|update|rm|cp|mv|sync)",
)

_extra_tools: list[str] = []
_extra_commands: list[str] = []
_compiled: tuple[re.Pattern[str], re.Pattern[str]] | None = None


class PatternsInvalid(ValueError):
    """``LEDGER_CONSEQUENTIAL_PATTERNS`` is not ``{"tools": [...], "commands": [...]}`` of
    valid regexes; the message names the key, the index and the regex error."""


def _compile(patterns: Iterable[str], *, full: bool) -> re.Pattern[str]:
    body = "|".join(f"(?:{p})" for p in patterns)
    return re.compile(rf"^(?:{body})$" if full else body, re.I)


def _table() -> tuple[re.Pattern[str], re.Pattern[str]]:
    global _compiled
    if _compiled is None:
        _compiled = (
            _compile([*TOOL_PATTERNS, *_extra_tools], full=True),
            _compile([*COMMAND_PATTERNS, *_extra_commands], full=False),
        )
    return _compiled


def parse_patterns(value: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """Check an extension of the table and return ``(tool regexes, command regexes)``.

    Raises:
        PatternsInvalid: a key other than ``tools``/``commands``, a value that is not a list
            of strings, or a string that is not a valid regex (named by key and index).
    """
    if not isinstance(value, Mapping):
        raise PatternsInvalid('must be a JSON object {"tools": [...], "commands": [...]}')
    out: dict[str, list[str]] = {"tools": [], "commands": []}
    for key, items in value.items():
        if key not in out:
            raise PatternsInvalid(f"unknown key {key!r} (known: tools, commands)")
        if not isinstance(items, list):
            raise PatternsInvalid(f"{key}: must be a list of regular expressions")
        for i, item in enumerate(items):
            if not isinstance(item, str) or not item:
                raise PatternsInvalid(f"{key}[{i}]: must be a non-empty string")
            try:
                re.compile(item)
            except re.error as exc:
                raise PatternsInvalid(f"{key}[{i}]: {item!r} is not a regex: {exc}") from exc
            out[key].append(item)
    return out["tools"], out["commands"]


def extend(value: Mapping[str, Any]) -> None:
    """Add the rows of ``value`` (see :func:`parse_patterns`) to the table, for this process.

    Called once at start-up with ``settings.LEDGER_CONSEQUENTIAL_PATTERNS``. Raises what
    :func:`parse_patterns` raises (and then changes nothing).
    """
    global _compiled
    tools, commands = parse_patterns(value)
    _extra_tools[:] = tools
    _extra_commands[:] = commands
    _compiled = None


def tool_base(tool_name: str) -> str:
    """``mcp__server__Write`` -> ``write``: the name the table matches."""
    return tool_name.lower().split("__")[-1].strip()


def is_consequential(*, tool_name: str, command: str = "") -> bool:
    """Whether a call changes something outside the conversation (docs/design.md 5.5).

    Args:
        tool_name: the call's tool name as journaled.
        command: the call's shell command (``""`` when it has none). A shell tool is judged
            by its command only: ``bash`` running ``ls`` is a read, running ``rm`` is not.

    Returns:
        ``True`` when the tool name or the command matches a row of the table.
    """
    tools, commands = _table()
    if command:
        return bool(commands.search(command))
    name = tool_base(tool_name)
    if _BOOKKEEPING.match(name):
        return False  # the agent's own plan or todo list changes nothing outside
    return bool(tools.match(name))


#: Tools that keep the agent's own plan or todo list (``update_plan`` would otherwise match
#: ``update_*``): nothing outside the conversation changes
_BOOKKEEPING = re.compile(r"^(?:update_plan|updateplan|todo\w*|\w*_todos?|exitplanmode|think)$")


_TEST_RUN = re.compile(
    r"\b(?:pytest|py\.test|tox|nox|jest|vitest|mocha|rspec|phpunit|ctest|"
    r"go\s+test|cargo\s+(?:test|nextest)|(?:npm|yarn|pnpm|bun)\s+(?:run\s+)?test|"
    r"make\s+(?:test|check)|python3?\s+-m\s+(?:unittest|pytest)|manage\.py\s+test)\b"
)


def is_test_run(command: str) -> bool:
    """Whether a shell command runs a test suite (its failure is P1 until a later run of the
    same command passes, docs/design.md 5.5); the offline writer parses the counts
    (:mod:`ledger_app.offline.testruns`)."""
    return bool(_TEST_RUN.search(command))
