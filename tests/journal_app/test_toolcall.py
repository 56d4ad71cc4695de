"""Tool-call arguments laid out for reading (journal_app/toolcall.py) and on the timeline."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from journal_app.formats.base import message, tool_call, tool_result
from journal_app.toolcall import FOLD_CHARS, call_parts, is_diff
from tests.factories import MembershipFactory, TenantFactory, UserFactory, journal_build

PATCH = "*** Begin Patch\n*** Update File: a.py\n@@ def f():\n-    return 1\n+    return 2\n*** End Patch"


def test_a_json_string_of_arguments_is_split_and_pretty_printed():
    parts = call_parts(
        {"name": "apply", "arguments": json.dumps({"input": PATCH, "opts": {"dry": True}})}
    )
    assert [(p.label, p.kind) for p in parts] == [("input", "diff"), ("opts", "json")]
    assert ("add", "+    return 2") in parts[0].lines and ("del", "-    return 1") in parts[0].lines
    assert ("hunk", "@@ def f():") in parts[0].lines
    assert parts[1].text == '{\n  "dry": true\n}'


def test_a_shell_command_is_code_and_an_argv_shows_its_script():
    parts = call_parts({"name": "shell", "arguments": {"command": ["bash", "-lc", "ls -la\npwd"]}})
    assert (parts[0].kind, parts[0].text) == ("shell", "ls -la\npwd")
    assert call_parts({"name": "exec", "arguments": "pytest -q"})[0].kind == "shell"


def test_long_values_are_folded_and_short_ones_not():
    long = call_parts({"name": "write", "arguments": {"content": "x" * (FOLD_CHARS + 1)}})
    short = call_parts({"name": "write", "arguments": {"path": "a.py"}})
    assert long[0].folded and not short[0].folded


def test_plain_text_is_not_a_diff():
    assert not is_diff("- a list item\n- another")
    assert is_diff("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b")


@pytest.mark.django_db
def test_the_timeline_renders_the_call_as_a_diff_and_shell(client, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    acme = TenantFactory(slug="acme")
    user = MembershipFactory(tenant=acme, user=UserFactory(username="alice")).user
    items = [
        message("user", "Fix it."),
        tool_call("c1", "apply_patch", {"input": PATCH}),
        tool_result("c1", "ok", exit_code=0),
        tool_call("c2", "shell", {"command": ["bash", "-lc", "pytest -q"]}),
        tool_result("c2", "1 passed", exit_code=0),
    ]
    journal_build(tenant=acme, key="k", items=items)
    client.force_login(user)
    body = client.get(reverse("journal:timeline", args=["acme", "k", "main", "main"])).content
    body = body.decode()
    assert '<span class="diff-add">+    return 2</span>' in body
    assert '<pre class="shell" tabindex="0"><code>$ pytest -q</code></pre>' in body
    assert "\\n" not in body[body.index('class="call-args"') :][:2000]
