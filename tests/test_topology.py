"""The production topology, natively (docs/design.md section 2): gunicorn and a Celery
worker against PostgreSQL and Redis, driven over HTTP end to end.

``docker-compose.yml`` describes db, redis, web and worker; Docker cannot run on the CI
machines, so this test brings the same processes up itself: ``gunicorn config.asgi`` on
127.0.0.1 and a free port, and a real ``celery worker`` on Redis database 12
(``CELERY_TOPOLOGY_BROKER_URL`` to change it), both on the test run's own PostgreSQL
database, both with production settings (``DJANGO_DEBUG=false``, JSON logs). Then, over
HTTP only: ``/healthz``; a key from ``manage.py create_api_key``; a real corpus transcript
uploaded; a fold queued and its task polled until it completes; the ledger read; one
support hash followed to its raw entry, whose hashes are recomputed on read. Both processes
are stopped whatever happens, and their logs printed.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from django.db import connection
from kombu import Connection

ROOT = Path(__file__).resolve().parent.parent
TRANSCRIPT = ROOT / "tests/fixtures/corpus/openai-chat-tool-calls/taubench-gpt4o-airline-task3.json"
BROKER = os.environ.get("CELERY_TOPOLOGY_BROKER_URL", "redis://127.0.0.1:6379/12")
QUEUE = "celery"  # the default queue: what the web process sends to
START_TIMEOUT = 60.0
TASK_TIMEOUT = 120.0

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _database_url() -> str:
    db = connection.settings_dict
    auth = quote(db["USER"] or "")
    if db["PASSWORD"]:
        auth += ":" + quote(db["PASSWORD"])
    host = db["HOST"] or "127.0.0.1"
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgres://{auth + '@' if auth else ''}{host}{port}/{quote(db['NAME'])}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _purge_queue() -> None:
    with Connection(BROKER, connect_timeout=5) as conn:
        channel = conn.default_channel
        channel.client.delete(QUEUE)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=20)


def _wait(what: str, deadline: float, probe, processes: list[subprocess.Popen]):
    last = None
    while time.monotonic() < deadline:
        for p in processes:
            assert p.poll() is None, f"{p.args[2]} exited early while waiting for {what}"
        try:
            last = probe()
            if last is not None:
                return last
        except httpx.TransportError as exc:
            last = exc
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}; last answer: {last!r}")


@pytest.fixture
def topology(tmp_path) -> Iterator[dict]:
    if connection.vendor != "postgresql":
        pytest.skip(
            "gunicorn and the worker must share the test database, which only PostgreSQL allows "
            f"(this run uses {connection.vendor}); set DATABASE_URL=postgres://..."
        )
    try:
        _purge_queue()
    except Exception as exc:  # Redis down: say so instead of failing obscurely
        pytest.skip(f"no Redis broker at {BROKER}: {type(exc).__name__}: {exc}")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CELERY_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=_database_url(),
        CELERY_BROKER_URL=BROKER,
        CELERY_TASK_ALWAYS_EAGER="false",
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="127.0.0.1",
        DJANGO_SECURE_SSL_REDIRECT="false",  # no TLS proxy in front of this test
        MEDIA_ROOT=str(tmp_path / "media"),
        LEDGER_FOLD_THRESHOLD_TOKENS=str(10**9),  # the fold comes from the API call only
        LOG_LEVEL="INFO",
    )
    commands = {
        "web": [
            sys.executable, "-m", "gunicorn", "-c", "python:config.gunicorn",
            "config.asgi:application",
            "--bind", f"127.0.0.1:{port}", "--workers", "2", "--timeout", "60",
            "--access-logfile", "-",
        ],
        "worker": [
            sys.executable, "-m", "celery", "-A", "config", "worker",
            "--pool", "solo", "--concurrency", "1", "-Q", QUEUE,
            "-n", f"topology-{secrets.token_hex(4)}@%h",
            "--without-heartbeat", "--without-gossip", "--without-mingle", "--loglevel", "INFO",
        ],
    }  # fmt: skip
    logs = {name: tmp_path / f"{name}.log" for name in commands}
    processes: dict[str, subprocess.Popen] = {}
    try:
        for name, command in commands.items():
            with logs[name].open("wb") as log:
                processes[name] = subprocess.Popen(
                    command,
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        yield {
            "url": f"http://127.0.0.1:{port}",
            "env": env,
            "processes": list(processes.values()),
        }
    finally:
        for process in processes.values():
            _stop(process)
        try:
            _purge_queue()
        finally:
            for name, path in logs.items():
                print(f"--- {name}: {' '.join(commands[name])} ---")
                print(path.read_text(errors="replace")[-20_000:])


def test_a_transcript_goes_from_http_upload_to_a_cited_ledger(topology):
    url, processes = topology["url"], topology["processes"]
    with httpx.Client(base_url=url, timeout=30) as http:
        health = _wait(
            "/healthz",
            time.monotonic() + START_TIMEOUT,
            lambda: (r := http.get("/healthz")).status_code == 200 and r.json() or None,
            processes,
        )
        assert health["database"] == {"ok": True, "vendor": "postgresql"}
        assert health["broker"] == {"ok": True, "transport": "redis", "eager": False}

        made = subprocess.run(
            [sys.executable, "manage.py", "create_api_key", "topology", "--name", "e2e", "--quiet"],
            cwd=ROOT,
            env=topology["env"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        key = made.stdout.strip().splitlines()[-1]
        http.headers["Authorization"] = f"Bearer {key}"
        scope = "/api/v1/sessions/tau/main/main"

        with TRANSCRIPT.open("rb") as fh:
            imported = http.post(scope + "/import", files={"file": (TRANSCRIPT.name, fh)})
        assert imported.status_code == 200, imported.text
        assert imported.json()["appended"] == 63

        queued = http.post(scope + "/folds", json={})
        assert queued.status_code == 202, queued.text
        task_id = queued.json()["task_id"]

        def finished():
            task = http.get(f"/api/v1/tasks/{task_id}").json()
            return task if task["status"] in ("succeeded", "failed") else None

        task = _wait("the fold task", time.monotonic() + TASK_TIMEOUT, finished, processes)
        assert task["status"] == "succeeded", task["error"]
        result = task["result"]
        assert (result["fold"], result["created"], result["folds"]) == (1, True, [1])
        assert "1 fold(s) by writer offline" in result["reason"]

        ledger = http.get(scope + "/ledger").json()
        assert ledger["fold"] == 1 and ledger["total"] > 0
        pin = next(f for f in ledger["facts"] if f["pin"])
        support = pin["support"][0]
        assert support["resolved"] is True

        entry = http.get(support["url"]).json()
        assert entry["entry_hash"] == support["entry"]
        assert entry["seq"] == support["seq"]
        assert entry["text"] == pin["text"]
        assert entry["verification"] == {"ok": True, "problems": []}
        assert http.get(scope + "/verify").json()["ok"] is True


# -- docker-compose.yml: the same topology, described for Docker or Podman -----

COMPOSE = ROOT / "docker-compose.yml"


def _compose() -> dict:
    import yaml

    return yaml.safe_load(COMPOSE.read_text())


def test_the_compose_file_describes_the_topology_with_health_checks_and_volumes():
    spec = _compose()
    services = spec["services"]

    assert set(services) >= {"db", "redis", "migrate", "web", "worker", "beat"}
    for name in ("db", "redis", "web", "worker"):
        assert services[name]["healthcheck"]["test"], name
    assert services["migrate"]["command"] == ["ledgerkeep", "migrate", "--noinput"]
    for name in ("web", "worker", "beat"):
        needs = services[name]["depends_on"]
        assert needs["migrate"] == {"condition": "service_completed_successfully"}, name
        assert needs["db"] == needs["redis"] == {"condition": "service_healthy"}, name
    assert set(spec["volumes"]) == {"pgdata", "media"}
    assert "pgdata:/var/lib/postgresql/data" in services["db"]["volumes"]
    assert "media:/data/media" in services["web"]["volumes"]
    assert "8000:8000" in services["web"]["ports"]


def test_the_compose_stack_serves_plain_http_unless_asked_for_tls():
    env = _compose()["services"]["web"]["environment"]

    assert env["DJANGO_DEBUG"] == "false"
    assert env["DJANGO_HTTPS"] == "${DJANGO_HTTPS:-false}"
    assert env["DJANGO_SECRET_KEY"].startswith("${DJANGO_SECRET_KEY:?")  # no default key
    assert env["CACHE_URL"].startswith("redis://")


def test_the_docker_build_context_leaves_out_the_venv_and_local_state():
    ignored = (ROOT / ".dockerignore").read_text().split()

    for name in (".venv", ".git", "var", "*.sqlite3", "tests"):
        assert name in ignored


def _engine() -> list[str] | None:
    import shutil

    for tool in ("docker", "podman"):
        if shutil.which(tool):
            probe = subprocess.run([tool, "info"], capture_output=True, timeout=30)
            if probe.returncode == 0:
                return [tool]
    return None


def test_the_compose_stack_builds_and_answers_on_plain_http(tmp_path):
    engine = _engine()
    if engine is None:
        pytest.skip(
            "no Docker or Podman engine answers on this machine (`docker info` / `podman info` "
            "fail): the compose stack is checked natively by the tests above"
        )
    project = f"ledgerkeep-{secrets.token_hex(4)}"
    port = _free_port()
    override = tmp_path / "ports.yml"
    override.write_text(f'services:\n  web:\n    ports: !override\n      - "{port}:8000"\n')
    env = {**os.environ, "DJANGO_SECRET_KEY": secrets.token_urlsafe(50)}
    compose = [*engine, "compose", "-p", project, "-f", str(COMPOSE), "-f", str(override)]
    try:
        subprocess.run([*compose, "up", "-d", "--build", "--wait"], cwd=ROOT, env=env,
                       check=True, timeout=1200)  # fmt: skip
        health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=30, follow_redirects=False)
        assert health.status_code == 200, health.text
        login = httpx.get(f"http://127.0.0.1:{port}/accounts/login/", follow_redirects=False)
        assert login.status_code == 200  # no redirect to https
    finally:
        subprocess.run([*compose, "down", "-v"], cwd=ROOT, env=env, timeout=300)


def test_every_way_of_starting_the_web_process_reads_the_gunicorn_config():
    """The request limits (config/gunicorn.py) hold in compose, the image and the README."""
    web = _compose()["services"]["web"]["command"]
    assert web[:3] == ["gunicorn", "-c", "python:config.gunicorn"]
    assert '"-c", "python:config.gunicorn"' in (ROOT / "Dockerfile").read_text()
    production = (ROOT / "README.md").read_text().split("## Run in production")[1]
    assert "gunicorn -c python:config.gunicorn config.asgi:application" in production


@pytest.mark.django_db
def test_the_web_healthcheck_answers_when_allowed_hosts_is_set(live_server, settings):
    """Fresh-eyes finding: with ``DJANGO_ALLOWED_HOSTS=ledger.example.com`` (as the README
    tells a TLS deployment to set) the healthcheck's request to 127.0.0.1 got a 400, so the
    web service would be unhealthy. The healthcheck, run as compose runs it, against a live
    server that allows only that host."""
    settings.ALLOWED_HOSTS = ["ledger.example.com"]
    test = _compose()["services"]["web"]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"]
    code = test[3].replace("http://127.0.0.1:8000", live_server.url)
    env = {**os.environ, "DJANGO_ALLOWED_HOSTS": "ledger.example.com,.example.org"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    env["DJANGO_ALLOWED_HOSTS"] = "other.example.com"  # a host the server refuses: unhealthy
    refused = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert refused.returncode != 0 and "400" in refused.stderr
