"""Property-based run of the whole API against its own OpenAPI schema.

Schemathesis generates requests for every operation from ``/api/v1/openapi.json`` and sends
them through the WSGI application in-process (same test database). Every response must be
declared by the schema (status code, content type, body shape) and none may be a 5xx.

Two runs per operation, bounded in examples (``max_examples`` per operation and mode, no
shrinking, no deadline, derandomized). Driven through ``APIOperation.as_strategy`` rather
than schemathesis' pytest plugin, which does not run under pytest 9.2 (it reads
``Node._nodeid``, removed there).

* ``test_random_requests``: generated values everywhere, valid and invalid
  (mostly 4xx: unknown scopes, bad patterns, wrong types);
* ``test_requests_on_real_objects``: the same operations with their path parameters pointed
  at objects that exist (a folded journal with an artifact, a retirement, a task), so the
  200 bodies are checked against the schema too, with a reviewer key.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from config.api import api as ninja_api
from config.wsgi import application
from journal_app.formats.base import tool_call, tool_result
from journal_app.models import Artifact, Entry
from ledger_app.models import Fold
from ledger_app.runs import task_run_enqueue
from ledger_app.tasks import fold_journal
from tests.api.conftest import pending_retirement
from tests.factories import fold_build, journal_build

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
#: The bound: examples per operation and mode; no shrinking, no deadline, a fixed seed.
BOUNDED = settings(
    max_examples=10,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
    derandomize=True,
    database=None,
)
SCHEMA_URL = "/api/v1/openapi.json"
#: (method, path) of every operation, read at collection time (no database needed).
OPERATIONS = [
    (method.upper(), path)
    for path, ops in ninja_api.get_openapi_schema()["paths"].items()
    for method in ops
]


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    """The WSGI app runs in-process, inside the test's transaction: stop Django from closing
    the connection at the end of each request, as ``django.test.Client`` does."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def _operation(method: str, path: str):
    return schemathesis.openapi.from_wsgi(SCHEMA_URL, application)[path][method]


def _run(operation, mode: GenerationMode, key: str, path_parameters=None) -> None:
    strategy = operation.as_strategy(generation_mode=mode, path_parameters=path_parameters)

    @BOUNDED
    @given(case=strategy)
    def check(case) -> None:
        case.call_and_validate(headers={"Authorization": f"Bearer {key}"}, checks=CHECKS)

    check()


@pytest.fixture
def real_objects(tenant, settings, django_capture_on_commit_callbacks):
    """Objects the path parameters can point at: a folded journal with an artifact, a
    pending retirement, a finished task."""
    settings.ARTIFACT_THRESHOLD_TOKENS = 20
    settings.LEDGER_FOLD_THRESHOLD_TOKENS = 10**9
    journal = journal_build(
        tenant=tenant,
        key="s1",
        items=[
            tool_call("c1", "exec", {"command": "cat big.log"}),
            tool_result("c1", "\n".join(f"ERROR line {i} of the log" for i in range(80))),
        ],
    )
    fold_build(journal)
    _, retirement, _ = pending_retirement(tenant, key="perm")
    with django_capture_on_commit_callbacks(execute=True):
        run = task_run_enqueue(task=fold_journal, journal=journal, journal_id=journal.pk)
    return {
        "session": "s1",
        "lane": "main",
        "branch": "main",
        "seq": 1,
        "entry_hash": "sha256:" + Entry.objects.filter(journal=journal).first().entry_hash,
        "content_hash": Artifact.objects.get().content_hash,
        "fact_id": next(iter(Fold.objects.get(journal=journal).state_dict["facts"])),
        "number": 1,
        "retirement_id": retirement.pk,
        "task_id": run.task_id,
    }


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_random_requests(method, path, mode, api):
    _run(_operation(method, path), mode, api.key)


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_requests_on_real_objects(method, path, reviewer_api, real_objects):
    operation = _operation(method, path)
    names = {p.name for p in operation.path_parameters}
    fixed = {name: value for name, value in real_objects.items() if name in names}
    _run(operation, GenerationMode.POSITIVE, reviewer_api.key, fixed)


#: Rules relating two fields, which JSON Schema cannot state (it has no keyword comparing
#: one property with another): ``POST /validate``'s ``output_reserve`` must be below its
#: ``hard_limit`` (ledger_app.api_context).
RELATIONS = ("leaves no room in the hard limit",)


def schema_allows_it(ctx, response, case) -> None:
    """A request generated from the schema (positive mode) is not refused as invalid (422
    ``validation_error``): the server enforces no rule the schema does not state.
    Domain refusals (``invalid_query`` for a query with no searchable term, ...) are rules
    on meaning the schema cannot state and stay allowed."""
    if response.status_code != 422 or response.json().get("code") != "validation_error":
        return
    if any(rule in response.json()["message"] for rule in RELATIONS):
        return
    raise AssertionError(
        f"{case.operation.label}: the schema allows path={case.path_parameters} "
        f"query={case.query} body={case.body!r} but the server refused it: "
        f"{response.json()['message']}"
    )


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_what_the_schema_allows_is_not_refused(method, path, reviewer_api, real_objects):
    operation = _operation(method, path)
    names = {p.name for p in operation.path_parameters}
    fixed = {name: value for name, value in real_objects.items() if name in names}
    strategy = operation.as_strategy(generation_mode=GenerationMode.POSITIVE, path_parameters=fixed)

    @BOUNDED
    @given(case=strategy)
    def check(case) -> None:
        case.call_and_validate(
            headers={"Authorization": f"Bearer {reviewer_api.key}"},
            checks=[not_a_server_error, schema_allows_it],
        )

    check()
