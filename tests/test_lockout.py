"""Login lockout in one process (docs/protocol.md §6.2, agentsite/lockout.py, django-axes): after N failed
attempts for one username or from one address within the window, further attempts answer 429 with
Retry-After and the page says how long to wait — the right password too — until the window passes; a
success resets the count. The same on /setup/ and the admin's login. On a real server:
tests/e2e/test_throttle.py.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import Client

from tests import factories

PASSWORD = "pw-for-tests-123"


@pytest.fixture(autouse=True)
def real_login_limit(settings: Any) -> None:
    settings.AGENTSITE_RATE_LOGIN = "5/15min"  # the default (the suite runs with a higher one)


def log_in(client: Client, username: str, password: str, address: str = "192.0.2.1") -> Any:
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


def assert_locked(response: Any, *, at_most: int = 900) -> int:
    assert response.status_code == 429
    retry_after = int(response["Retry-After"])
    assert 1 <= retry_after <= at_most
    page = response.content.decode()
    assert 'id="login-locked"' in page and "Too many failed attempts" in page
    return retry_after


def test_five_wrong_passwords_then_even_the_right_one_is_refused_with_the_wait(
    client: Client, alice: Any
) -> None:
    for _ in range(5):
        response = log_in(client, "alice", "wrong")
        assert response.status_code == 200
        assert "didn't match" in response.content.decode()

    response = log_in(client, "alice", PASSWORD)

    retry_after = assert_locked(response)
    assert retry_after > 890  # the window opened with the last failure, a moment ago
    assert "Wait 15 minutes before you try again" in response.content.decode()
    assert 'value="alice"' in response.content.decode()  # the username stays in the form
    assert client.get("/").status_code == 302  # not logged in


def test_a_locked_username_is_refused_from_any_address(client: Client, alice: Any) -> None:
    for n in range(5):
        log_in(client, "alice", "wrong", address=f"192.0.2.{10 + n}")

    assert_locked(log_in(client, "alice", PASSWORD, address="192.0.2.99"))
    bob = factories.user("bob")
    assert log_in(client, bob.username, PASSWORD, address="192.0.2.99").status_code == 302


def test_a_locked_address_is_refused_for_any_username(client: Client, alice: Any) -> None:
    for n in range(5):
        log_in(client, f"guess{n}", "wrong", address="192.0.2.50")

    assert_locked(log_in(client, "alice", PASSWORD, address="192.0.2.50"))
    assert log_in(client, "alice", PASSWORD, address="192.0.2.51").status_code == 302


def test_a_success_resets_the_count(client: Client, alice: Any) -> None:
    for _ in range(4):
        log_in(client, "alice", "wrong")
    assert log_in(client, "alice", PASSWORD).status_code == 302
    client.logout()

    assert [log_in(client, "alice", "wrong").status_code for _ in range(4)] == [200] * 4
    assert log_in(client, "alice", PASSWORD).status_code == 302


def test_the_lock_ends_when_the_window_passes_and_attempts_meanwhile_do_not_extend_it(
    client: Client, settings: Any, alice: Any
) -> None:
    settings.AGENTSITE_RATE_LOGIN = "2/2s"
    log_in(client, "alice", "wrong")
    log_in(client, "alice", "wrong")
    assert_locked(log_in(client, "alice", PASSWORD), at_most=2)
    time.sleep(1.2)
    assert_locked(log_in(client, "alice", "wrong"), at_most=1)  # not counted: the window stays
    time.sleep(1.0)

    assert log_in(client, "alice", PASSWORD).status_code == 302


def test_the_admin_login_is_locked_too(client: Client, db: Any) -> None:
    factories.user("charlie", is_staff=True)
    for _ in range(5):
        client.post("/admin/login/", {"username": "charlie", "password": "wrong"}, REMOTE_ADDR="192.0.2.60")

    response = client.post(
        "/admin/login/", {"username": "charlie", "password": PASSWORD}, REMOTE_ADDR="192.0.2.60"
    )
    assert_locked(response)


def test_setup_refuses_after_five_failed_submissions_and_says_how_long_to_wait(
    client: Client, db: Any
) -> None:
    bad = {"username": "admin", "password": "short", "password_again": "short"}
    for _ in range(5):
        assert client.post("/setup/", bad).status_code == 200

    good = {
        "username": "admin",
        "password": "a-long-Pass-phrase-42",
        "password_again": "a-long-Pass-phrase-42",
    }
    response = client.post("/setup/", good)

    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 900
    assert 'id="setup-locked"' in response.content.decode()
    assert "Wait 15 minutes" in response.content.decode()
    # The username is locked from every address; another one from another address may set up.
    assert client.post("/setup/", good, REMOTE_ADDR="192.0.2.70").status_code == 429
    owner = {**good, "username": "owner"}
    assert client.post("/setup/", owner, REMOTE_ADDR="192.0.2.70").status_code == 302


def test_no_lockout_when_the_login_rate_is_off(client: Client, settings: Any, alice: Any) -> None:
    settings.AGENTSITE_RATE_LOGIN = "off"
    settings.AXES_ENABLED = False  # what settings.py derives from "off" at start-up
    assert [log_in(client, "alice", "wrong").status_code for _ in range(7)] == [200] * 7
    assert log_in(client, "alice", PASSWORD).status_code == 302


@pytest.mark.services_rerun
def test_a_login_without_an_ip_address_is_counted_without_one(client: Client, alice: Any) -> None:
    """A request with no IP address (an in-process login, a server on a unix socket) is counted by username;
    axes' address column, an `inet` on Postgres, gets no address instead of a word."""
    from axes.models import AccessAttempt
    from django.contrib.auth import authenticate
    from django.http import HttpRequest

    request = HttpRequest()
    request.method = "POST"
    assert authenticate(request, username="alice", password="wrong") is None
    assert AccessAttempt.objects.get(username="alice").ip_address is None
    client.force_login(alice)  # a success resets the count, also without an address
    assert not AccessAttempt.objects.filter(username="alice").exists()
