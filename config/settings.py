"""Django settings, all from environment variables (docs/design.md section 2).

With nothing set this is the embedded default: SQLite in the project folder, Celery tasks
eager in-process, filesystem artifact storage, the offline writer. ``DATABASE_URL`` switches
to PostgreSQL; ``CELERY_BROKER_URL`` to a real broker (Redis or RabbitMQ).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF

from config.env import (
    SettingError,
    env_bool,
    env_choice,
    env_count,
    env_float,
    env_int,
    env_json,
    env_list,
    env_object,
    env_rate,
    env_seconds,
    env_str,
    env_url,
)
from config.logging import configure_structlog, logging_config
from config.production import MAX_URL_BYTES, request_line_limit, secret_key_problem
from config.production import UPSTREAM_TIMEOUT_SECONDS as UPSTREAM_TIMEOUT_DEFAULT
from journal_app.pricing import PriceTableError, parse_price_table
from ledger_app.consequence import PatternsInvalid, parse_patterns

# BASE_DIR holds templates/, static/ and samples/: the checkout, or the copy an installed
# wheel carries in config/site/ (setup.py). DATA_DIR holds what the embedded default writes
# (the SQLite file, var/): the checkout, or for an installed package the working directory.
_SITE = Path(__file__).resolve().parent / "site"
INSTALLED_PACKAGE = _SITE.is_dir()
BASE_DIR = _SITE if INSTALLED_PACKAGE else Path(__file__).resolve().parent.parent
DATA_DIR = Path(env_str("LEDGERKEEP_DATA_DIR", str(Path.cwd() if INSTALLED_PACKAGE else BASE_DIR)))

DEBUG = env_bool("DJANGO_DEBUG", True)
#: Public, so only for DEBUG: it signs sessions, CSRF tokens and the recovery cursors.
DEVELOPMENT_SECRET_KEY = "embedded-default-not-secret-change-me-" + "x" * 20
SECRET_KEY = env_str("DJANGO_SECRET_KEY", DEVELOPMENT_SECRET_KEY)
if not DEBUG:
    # a weak key signs sessions, CSRF tokens and recovery cursors anyone can forge: refuse to
    # start rather than warn (Django's check W009 only warns)
    _weak = secret_key_problem(SECRET_KEY, development_default=DEVELOPMENT_SECRET_KEY)
    if _weak is not None:
        raise SettingError(
            f"DJANGO_SECRET_KEY {_weak} while DJANGO_DEBUG is off: set DJANGO_SECRET_KEY to a "
            "long random secret (50 characters or more), e.g. the output of "
            "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`"
        )
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "ninja",
    "template_partials",
    "journal_app",
    "ledger_app",
    "recovery_app",
    "audit_app",
    "proxy_app",
    "axes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "audit_app.origin.OriginMiddleware",  # which surface asked: audit events name it
    "config.busy.DatabaseBusyMiddleware",  # SQLite busy past its timeout: 503, not a 500
    "axes.middleware.AxesMiddleware",  # last: it answers a locked-out login (README)
]

# Content-Security-Policy (django-csp; README "Security headers"): every script and style is
# a static file of this site, so nothing inline runs or applies. htmx's own indicator <style>
# is switched off in templates/base.html (its rule is in static/css/app.css); the favicon is
# a data: URL.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "audit_app.selectors.audit_nav",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{DATA_DIR / 'ledgerkeep.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0),
        # a kept connection is pinged before a request reuses it: a connection the server
        # dropped in between is replaced instead of failing the request
        conn_health_checks=True,
    )
}
if env_str("TEST_DATABASE_NAME"):
    # lets several test runs share one PostgreSQL server without colliding
    DATABASES["default"]["TEST"] = {"NAME": env_str("TEST_DATABASE_NAME")}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # The embedded default under concurrency (README, "Configuration"): WAL lets page views
    # read while an import writes; a writer waits up to SQLITE_BUSY_TIMEOUT_SECONDS for the
    # lock; write transactions take it when they begin, never halfway through.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": env_int("SQLITE_BUSY_TIMEOUT_SECONDS", 30),
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL;",
        }
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(DATA_DIR / "var" / "staticfiles")))
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(DATA_DIR / "var" / "media")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# Login throttling (django-axes; README "Security headers"): a user name that fails
# LOGIN_FAILURE_LIMIT times from one address is locked out there for LOGIN_LOCKOUT_MINUTES
# (429); a successful login resets the count.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "journal:session_list"
LOGOUT_REDIRECT_URL = "login"

# Celery: eager in-process unless a broker is configured (the embedded default).
#: ``memory://localhost/``: kombu warns "No hostname was supplied" on every run for ``memory://``
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "memory://localhost/")
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", "")
CELERY_TASK_ALWAYS_EAGER = env_bool(
    "CELERY_TASK_ALWAYS_EAGER", CELERY_BROKER_URL.startswith("memory://")
)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# Redis (and SQS) redeliver a message its worker took and never acknowledged (a worker
# killed mid-fold) after this many seconds; Redis's own default is an hour. A fold still
# running past it is delivered again and the second run folds nothing (the range is
# unique), so it is kept short. README "Configuration".
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT_SECONDS", 300)
}
# No task runs longer than this (killed by the worker); a run still "running" after it (plus
# a minute) is marked lost. Workers also mark the runs of dead workers lost when they start,
# and beat does every few minutes (ledger_app.tasks.mark_lost_task_runs).
CELERY_TASK_TIME_LIMIT = env_int("TASK_TIME_LIMIT_SECONDS", 6 * 3600)
TASK_RUN_LOST_AFTER_SECONDS = CELERY_TASK_TIME_LIMIT + 60
CELERY_BEAT_SCHEDULE = {
    "mark-lost-task-runs": {
        "task": "ledger_app.tasks.mark_lost_task_runs",
        "schedule": float(env_int("TASK_RUN_LOST_SWEEP_SECONDS", 300)),
    }
}

# Journal (docs/design.md section 4).
JOURNAL_CHUNK_BYTES = env_int("JOURNAL_CHUNK_BYTES", 4096)
#: a stored ledger check older than this is run again on the next page view (seconds;
#: ledger_app.services.full_check.ledger_warnings): in-place database edits show by then
LEDGER_CHECK_MAX_AGE_SECONDS = env_int("LEDGER_CHECK_MAX_AGE_SECONDS", 3600)
ARTIFACT_THRESHOLD_TOKENS = env_int("ARTIFACT_THRESHOLD_TOKENS", 2000)
#: attached material in a pinned message (a pasted log, file or fenced code block) over this
#: many tokens is shown in a context as a receipt that `read` restores (docs/design.md 5.2)
PIN_ATTACHMENT_TOKENS = env_int("PIN_ATTACHMENT_TOKENS", 1000)
TOKEN_ENCODING = env_str("TOKEN_ENCODING", "o200k_base")

# Ledger budgets (docs/design.md section 5.4).
LEDGER_WINDOW_TOKENS = env_int("LEDGER_WINDOW_TOKENS", 270_000)
LEDGER_CONSOLIDATE_AT_TOKENS = env_int("LEDGER_CONSOLIDATE_AT_TOKENS", 67_500)
LEDGER_CHECKPOINT_TARGET_TOKENS = env_int("LEDGER_CHECKPOINT_TARGET_TOKENS", 20_000)
# Full ledger state is stored only at checkpoints: every this many folds at most,
# or when the deltas since the last checkpoint pass this ratio of its size.
LEDGER_CHECKPOINT_EVERY_FOLDS = env_int("LEDGER_CHECKPOINT_EVERY_FOLDS", 1000)
LEDGER_CHECKPOINT_DELTA_RATIO = env_float("LEDGER_CHECKPOINT_DELTA_RATIO", 2.0)
LEDGER_FOLD_THRESHOLD_TOKENS = env_int("LEDGER_FOLD_THRESHOLD_TOKENS", 32_000)
# Rows added to the table of consequential actions (docs/design.md 5.5: P1 until superseded):
# {"tools": [regex, ...], "commands": [regex, ...]} (ledger_app/consequence.py)
LEDGER_CONSEQUENTIAL_PATTERNS = env_object("LEDGER_CONSEQUENTIAL_PATTERNS")
try:
    parse_patterns(LEDGER_CONSEQUENTIAL_PATTERNS)
except PatternsInvalid as exc:
    raise SettingError(f"LEDGER_CONSEQUENTIAL_PATTERNS: {exc}") from None

# Recovery budget and tools (docs/design.md section 7).
RECOVERY_MAX_ROUNDS = env_int("RECOVERY_MAX_ROUNDS", 3)
RECOVERY_MAX_SEARCHES = env_int("RECOVERY_MAX_SEARCHES", 4)
RECOVERY_MAX_READS = env_int("RECOVERY_MAX_READS", 8)
RECOVERY_MAX_SOURCES = env_int("RECOVERY_MAX_SOURCES", 4)
RECOVERY_MAX_TOKENS = env_int("RECOVERY_MAX_TOKENS", 8000)
RECOVERY_MAX_SECONDS = env_seconds("RECOVERY_MAX_SECONDS", 30.0)
RECOVERY_LEADS_PER_QUERY = env_int("RECOVERY_LEADS_PER_QUERY", 3)
RECOVERY_PAGE_SIZE = env_int("RECOVERY_PAGE_SIZE", 10)
RECOVERY_CURSOR_TTL_SECONDS = env_int("RECOVERY_CURSOR_TTL_SECONDS", 900)
RECOVERY_ANALYST_MODEL = env_str("RECOVERY_ANALYST_MODEL", "")

# Models (docs/design.md section 5.3): the offline writer when no base URL is set.
OPENAI_BASE_URL = env_url("OPENAI_BASE_URL", "")
OPENAI_API_KEY = env_str("OPENAI_API_KEY", "")
WRITER_MODEL = env_str("WRITER_MODEL", "")
VERIFIER_MODEL = env_str("VERIFIER_MODEL", "")
MODEL_TIMEOUT_SECONDS = env_seconds("MODEL_TIMEOUT_SECONDS", 60.0)
MODEL_MAX_ATTEMPTS = env_count("MODEL_MAX_ATTEMPTS", 4)
MODEL_BACKOFF_SECONDS = env_float("MODEL_BACKOFF_SECONDS", 0.5)
MODEL_BACKOFF_MAX_SECONDS = env_float("MODEL_BACKOFF_MAX_SECONDS", 8.0)
# the client's modes (ledger_app.model_client.formats.FORMATS, not imported here: it loads the
# openai client at every start; tests/test_model_settings.py keeps the two equal)
MODEL_RESPONSE_FORMATS = ("json_schema", "json_object", "none")
MODEL_RESPONSE_FORMAT = env_choice("MODEL_RESPONSE_FORMAT", "json_schema", MODEL_RESPONSE_FORMATS)
MODEL_MAX_OUTPUT_TOKENS = env_count("MODEL_MAX_OUTPUT_TOKENS", 4096)
# Local servers (README "Use a local model"): no retry of a timed-out request unless asked;
# streamed answers, cut after MODEL_STALL_SECONDS without a chunk once the first came (the
# wait for the first is bounded by MODEL_TIMEOUT_SECONDS); the writer's and the
# verifier's windows (tokens; 0: their entry in MODEL_WINDOWS, else unbounded).
MODEL_RETRY_ON_TIMEOUT = env_bool("MODEL_RETRY_ON_TIMEOUT", False)
MODEL_STREAM = env_bool("MODEL_STREAM", True)
MODEL_STALL_SECONDS = env_seconds("MODEL_STALL_SECONDS", 60.0)
WRITER_WINDOW_TOKENS = env_count("WRITER_WINDOW_TOKENS", 0, minimum=0)
VERIFIER_WINDOW_TOKENS = env_count("VERIFIER_WINDOW_TOKENS", 0, minimum=0)

# The compacting proxy (proxy_app): where requests are forwarded, and the context
# window per model (a JSON map ``{"model": tokens}``; unknown models get the default).
UPSTREAM_OPENAI_BASE_URL = env_str("UPSTREAM_OPENAI_BASE_URL", "https://api.openai.com/v1")
UPSTREAM_OPENAI_API_KEY = env_str("UPSTREAM_OPENAI_API_KEY", "")
UPSTREAM_ANTHROPIC_BASE_URL = env_str("UPSTREAM_ANTHROPIC_BASE_URL", "https://api.anthropic.com")
UPSTREAM_ANTHROPIC_API_KEY = env_str("UPSTREAM_ANTHROPIC_API_KEY", "")
UPSTREAM_TIMEOUT_SECONDS = env_float("UPSTREAM_TIMEOUT_SECONDS", UPSTREAM_TIMEOUT_DEFAULT)
MODEL_WINDOWS = env_json("MODEL_WINDOWS", {})
# deepest nesting of arrays and objects a proxied body may have (checked before parsing)
PROXY_MAX_JSON_DEPTH = env_int("PROXY_MAX_JSON_DEPTH", 100)
# seconds a proxied call may spend folding the history it needs folded; past them it is
# answered 503 ``fold_pending`` with Retry-After while the fold goes on in the background
PROXY_FOLD_SECONDS = env_float("PROXY_FOLD_SECONDS", 20.0)
MODEL_WINDOW_DEFAULT = env_int("MODEL_WINDOW_DEFAULT", 270_000)
# Optional price table for computed costs (journal_app/pricing.py): {"model": [input, output]}
# or [input, output, cached input], USD per 1M tokens; a bad entry stops the start, named.
try:
    LEDGER_MODEL_PRICES = parse_price_table(env_object("LEDGER_MODEL_PRICES"))
except PriceTableError as _exc:
    raise SettingError(f"LEDGER_MODEL_PRICES: {_exc}") from None

# REST API: URLs (path and query) over this many bytes are 414 in the error shape;
# gunicorn (config/gunicorn.py) reads request lines long enough for every one.
API_MAX_URL_BYTES = env_int("API_MAX_URL_BYTES", MAX_URL_BYTES)
try:
    request_line_limit(API_MAX_URL_BYTES)
except ValueError as _exc:
    raise SettingError(str(_exc)) from None
# Bodies over this many bytes are refused with HTTP 413 before they are read.
API_MAX_BODY_BYTES = env_int("API_MAX_BODY_BYTES", 16 * 1024 * 1024)
# Django refuses bodies over this before the API sees them; keep it at the API's limit.
DATA_UPLOAD_MAX_MEMORY_SIZE = API_MAX_BODY_BYTES
# Requests per API key (django-ratelimit, config/api.py): "N/s", "N/m", "N/h", "N/d" or
# "N/<k><unit>" (e.g. "500/5m"); "off" for no limit. Over it: 429 with Retry-After.
API_RATE_LIMIT = env_rate("API_RATE_LIMIT", "6000/m")
#: refused API keys per client address (key guessing), then 429 (journal_app.auth)
API_AUTH_FAILURE_RATE = env_rate("API_AUTH_FAILURE_RATE", "30/m")

# The cache holds the rate-limit counters: in-process by default (one count per process),
# Redis when CACHE_URL is set (one count for every web process; docker-compose sets it).
CACHE_URL = env_str("CACHE_URL", "")
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
        if CACHE_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "ledgerkeep"}
    )
}
RATELIMIT_USE_CACHE = "default"

# Structured logs: JSON lines in production, key=value lines locally (config/logging.py).
LOG_FORMAT = env_str("LOG_FORMAT", "console" if DEBUG else "json")
LOGGING = logging_config(fmt=LOG_FORMAT, level=env_str("LOG_LEVEL", "WARNING"))
configure_structlog()
# With JSON logs the worker logs through the same handlers instead of Celery's own format.
CELERY_WORKER_HIJACK_ROOT_LOGGER = LOG_FORMAT != "json"

# Production (DEBUG off): HTTPS only (redirect, secure cookies, HSTS; `check --deploy` is
# clean) unless DJANGO_HTTPS=false, which serves plain HTTP (docker-compose's default on
# http://localhost). Behind a TLS-terminating proxy set
# DJANGO_SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO; /healthz stays reachable over plain
# HTTP for health checks.
HTTPS = env_bool("DJANGO_HTTPS", not DEBUG)
if not DEBUG:
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", HTTPS)
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 31_536_000 if HTTPS else 0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
    SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", HTTPS)
    SESSION_COOKIE_SECURE = HTTPS
    CSRF_COOKIE_SECURE = HTTPS
    if env_str("DJANGO_SECURE_PROXY_SSL_HEADER"):
        SECURE_PROXY_SSL_HEADER = (env_str("DJANGO_SECURE_PROXY_SSL_HEADER"), "https")
