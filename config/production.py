"""Rules a production start must pass (pure, no Django): the secret key, the request limits.

Read by ``config/settings.py`` (the secret key, the URL limit) and ``config/gunicorn.py``
(the request-line limit), so the two processes of one deployment agree.
"""

from __future__ import annotations

#: Django's own definition of a weak secret key (``django.core.checks.security.base``,
#: check ``security.W009``): shorter than this many characters, ...
SECRET_KEY_MIN_LENGTH = 50
#: ... or fewer distinct characters than this, ...
SECRET_KEY_MIN_UNIQUE_CHARACTERS = 5
#: ... or starting with the prefix ``startproject`` writes.
SECRET_KEY_INSECURE_PREFIX = "django-insecure-"

#: Longest path plus query string the API reads, in bytes; ``API_MAX_URL_BYTES`` overrides.
#: A longer URL is answered 414 ``uri_too_long`` in the error shape (``config/api.py``).
MAX_URL_BYTES = 4000
#: The longest request line gunicorn can be told to read (its ``--limit-request-line``
#: takes 0, unlimited, to 8190: gunicorn's settings documentation).
GUNICORN_MAX_REQUEST_LINE = 8190
#: What a request line holds beside the URL: the longest method the API answers
#: (``OPTIONS``), two spaces and ``HTTP/1.1``.
REQUEST_LINE_OVERHEAD = len("OPTIONS") + 2 + len("HTTP/1.1")
#: Seconds the proxy waits on its upstream (``UPSTREAM_TIMEOUT_SECONDS`` overrides); read
#: by the settings and by ``config/gunicorn.py``, whose worker timeout is never shorter.
UPSTREAM_TIMEOUT_SECONDS = 600.0


def secret_key_problem(key: str, *, development_default: str) -> str | None:
    """Why ``key`` may not sign anything in production, or ``None`` when it may.

    Args:
        key: the ``DJANGO_SECRET_KEY`` in force.
        development_default: the public key the embedded default runs with.

    Returns:
        What is wrong, to follow the variable's name ("is not set (or holds the public
        development default)"; "is 1 characters long; ..."; "has 3 distinct characters;
        ..."; Django's insecure prefix), as Django's check W009 defines a weak key, or
        ``None``.
    """
    if key == development_default:
        return "is not set (or holds the public development default)"
    if len(key) < SECRET_KEY_MIN_LENGTH:
        return f"is {len(key)} characters long; at least {SECRET_KEY_MIN_LENGTH} are needed"
    distinct = len(set(key))
    if distinct < SECRET_KEY_MIN_UNIQUE_CHARACTERS:
        return (
            f"has {distinct} distinct characters; at least "
            f"{SECRET_KEY_MIN_UNIQUE_CHARACTERS} are needed"
        )
    if key.startswith(SECRET_KEY_INSECURE_PREFIX):
        return f"starts with {SECRET_KEY_INSECURE_PREFIX!r}, the prefix of a generated test key"
    return None


def request_line_limit(max_url_bytes: int) -> int:
    """Gunicorn's ``limit_request_line`` for an API that reads URLs of ``max_url_bytes``.

    Gunicorn answers a request line over its limit itself, with a plain-text 400, before the
    application sees it. The limit is therefore gunicorn's maximum, 8,190 bytes: every URL up
    to the API's own limit reaches the application, and every URL from there to gunicorn's
    maximum is answered by the API's 414 in the error shape. Past 8,190 bytes gunicorn
    answers (it reads no longer line at all).

    Args:
        max_url_bytes: the API's URL limit in bytes (``API_MAX_URL_BYTES``).

    Returns:
        The request-line limit in bytes.

    Raises:
        ValueError: ``max_url_bytes`` below 1, or too large for a request line gunicorn
            reads (naming ``API_MAX_URL_BYTES`` and the largest value that fits).
    """
    largest = GUNICORN_MAX_REQUEST_LINE - REQUEST_LINE_OVERHEAD
    if not 1 <= max_url_bytes <= largest:
        raise ValueError(
            f"API_MAX_URL_BYTES={max_url_bytes} does not fit gunicorn's request line "
            f"(at most {GUNICORN_MAX_REQUEST_LINE} bytes): use 1 to {largest}"
        )
    return GUNICORN_MAX_REQUEST_LINE
