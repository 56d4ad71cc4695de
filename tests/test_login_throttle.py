"""Login throttling (django-axes; README "Security headers"): a user name that fails
``LOGIN_FAILURE_LIMIT`` times from one address is refused there (429), even with the right
password, for ``LOGIN_LOCKOUT_MINUTES``; another user name, or the same from another address,
still logs in; a successful login resets the count."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"
LOGIN = "/accounts/login/"


def attempt(username: str, password: str, address: str = "10.0.0.1") -> int:
    response = Client(REMOTE_ADDR=address).post(LOGIN, {"username": username, "password": password})
    return response.status_code


@pytest.fixture
def users():
    for name in ("ada", "bob"):
        user = UserFactory(username=name)
        user.set_password(PASSWORD)
        user.save()


def test_the_defaults():
    assert settings.AXES_FAILURE_LIMIT == 5
    assert settings.AXES_COOLOFF_TIME.total_seconds() == 15 * 60


def test_a_name_that_fails_the_limit_is_locked_out_from_that_address(users):
    limit = settings.AXES_FAILURE_LIMIT
    assert attempt("ada", PASSWORD) == 302  # logs in
    for _ in range(limit - 1):
        assert attempt("ada", "wrong") == 200  # the form again, with its error
    assert attempt("ada", "wrong") == 429  # the limit-th failure locks
    assert attempt("ada", PASSWORD) == 429  # the right password does not help now
    assert attempt("bob", PASSWORD) == 302  # another name from the same address
    assert attempt("ada", PASSWORD, address="10.0.0.2") == 302  # the name elsewhere


def test_a_success_resets_the_count(users):
    limit = settings.AXES_FAILURE_LIMIT
    for _ in range(limit - 1):
        assert attempt("ada", "wrong") == 200
    assert attempt("ada", PASSWORD) == 302
    for _ in range(limit - 1):
        assert attempt("ada", "wrong") == 200
    assert attempt("ada", PASSWORD) == 302
