"""No model reached by reflection outside migrations.

A model reached through ``Model._meta.get_field(...).related_model``, ``apps.get_model(...)``
or ``getattr(field, "related_model")`` is an import the import-linter cannot see: a module of
a lower app can then filter on the columns of a higher app's table with the layer contracts
green (docs/architecture.md, "Layers"). Migrations need ``apps.get_model`` (historical
models) and are left out.

``ALLOWED`` is empty: no file of the apps may hold a site (a file listed there with a count
would be an exception, and a file with fewer sites than listed fails, so it only shrinks).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = ["config", "journal_app", "audit_app", "ledger_app", "recovery_app", "proxy_app"]
REFLECTION = {"related_model", "get_model", "remote_field"}
#: the project's own apps: a module of one reached by ``importlib.import_module("<app>...")``
OWN_APPS = tuple(APPS)

#: file (relative to the repository root) -> number of reflection sites it may still hold
ALLOWED: dict[str, int] = {}


def reflection_sites(tree: ast.AST) -> list[int]:
    """Line numbers of ``x.related_model``, ``x.get_model(...)`` and
    ``getattr(x, "related_model")`` (or ``"get_model"``) in ``tree``."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in REFLECTION:
            lines.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "hasattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in REFLECTION
        ):
            lines.append(node.lineno)
        elif (  # importlib.import_module("ledger_app.models") or import_module(f"...")
            isinstance(node, ast.Call)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (
                    isinstance(node.func, ast.Name)
                    and node.func.id in {"import_module", "__import__"}
                )
            )
            and node.args
            and _names_an_app(node.args[0])
        ):
            lines.append(node.lineno)
    return sorted(lines)


def _names_an_app(arg: ast.expr) -> bool:
    """Whether a module name given to ``import_module`` starts with one of the apps (or is
    not a constant at all, which the linter cannot check either)."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value.split(".")[0] in OWN_APPS
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value).split(".")[0] in OWN_APPS
    return not isinstance(arg, ast.Constant | ast.JoinedStr)


def _sites() -> dict[str, list[int]]:
    found = {}
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            lines = reflection_sites(ast.parse(path.read_text(encoding="utf-8")))
            if lines:
                found[path.relative_to(ROOT).as_posix()] = lines
    return found


def test_no_new_model_is_reached_by_reflection_and_the_allowed_list_only_shrinks():
    found = _sites()
    grown = {
        f"{name}: lines {lines} (allowed {ALLOWED.get(name, 0)})"
        for name, lines in found.items()
        if len(lines) > ALLOWED.get(name, 0)
    }
    assert not grown, (
        "a model is reached by reflection (related_model / apps.get_model) outside migrations; "
        f"import it from its own app's module instead: {sorted(grown)}"
    )
    shrunk = {
        f"{name}: {len(found.get(name, []))} sites, {allowed} allowed"
        for name, allowed in ALLOWED.items()
        if len(found.get(name, [])) < allowed
    }
    assert not shrunk, f"fewer reflection sites than ALLOWED lists: lower the list {sorted(shrunk)}"


def test_the_scan_finds_each_form_of_reflection():
    source = (
        "Fold = Journal._meta.get_field('folds').related_model\n"
        "Receipt = apps.get_model('recovery_app', 'Receipt')\n"
        "fk = [f for f in fields if getattr(f, 'related_model', None) is Fold]\n"
        "model = Journal  # related_model in a comment is not a site\n"
        "Fold = Journal._meta.get_field('folds').remote_field.model\n"
        "models = importlib.import_module('ledger_app.models')\n"
        "plugins = importlib.import_module(f'detect_secrets.plugins.{name}')\n"
        "other = import_module(name)\n"
    )
    assert reflection_sites(ast.parse(source)) == [1, 2, 3, 5, 6, 8]
