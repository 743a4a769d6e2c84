"""Login lockout in one process (docs/protocol.md §6.2, §6.6, accounts/lockout.py, django-axes): after N
failed attempts for one username from one address within the window, further attempts of that pair answer
429 with Retry-After and the page says how long to wait — the right password too — until the window
passes; 30 failures from one address across usernames lock the address; a success clears only that
username's failures from that address; past 30 attempts a minute from one address every login page answers
429. The same on the admin's login; /setup/ form mistakes are not failed logins. On a real server:
tests/e2e/test_throttle.py.
"""

from __future__ import annotations

import ipaddress
import time
import uuid
from typing import Any

import pytest
from django.test import Client

from tests import factories

PASSWORD = "pw-for-tests-123"


@pytest.fixture(autouse=True)
def real_login_limit(settings: Any) -> None:
    # The defaults (the suite runs with higher ones), and a cache of this test's own for the login rate.
    settings.AGENTSITE_RATE_LOGIN = "5/15min"
    settings.AGENTSITE_LOGIN_ADDRESS_FAILURES = 30
    settings.AGENTSITE_RATE_LOGIN_ADDRESS = "30/min"
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": uuid.uuid4().hex}
    }


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


def test_the_lockout_clearing_attack_fails_a_success_as_oneself_does_not_clear_admins_failures(
    client: Client, db: Any
) -> None:
    """Issue 24 item 1: 4 wrong guesses for admin, log in as yourself, repeat — was 40 admin guesses in
    17.7 s, never locked: a success cleared every failure of its address."""
    factories.user("admin", is_staff=True, password="the-admins-secret-42")
    factories.user("mallory")
    attacker = "192.0.2.66"
    for _ in range(4):
        assert log_in(client, "admin", "guess", address=attacker).status_code == 200
    assert log_in(client, "mallory", PASSWORD, address=attacker).status_code == 302
    client.logout()
    assert log_in(client, "admin", "guess", address=attacker).status_code == 200  # the 5th failure

    assert_locked(log_in(client, "admin", "another-guess", address=attacker))
    assert_locked(log_in(client, "admin", "the-admins-secret-42", address=attacker))  # the right one too
    assert log_in(client, "mallory", PASSWORD, address=attacker).status_code == 302  # her own still works


def test_a_success_clears_only_that_usernames_failures(client: Client, alice: Any) -> None:
    from axes.models import AccessAttempt

    factories.user("bob")
    for _ in range(3):
        log_in(client, "bob", "wrong", address="192.0.2.5")
        log_in(client, "alice", "wrong", address="192.0.2.5")
    log_in(client, "alice", "wrong", address="192.0.2.6")

    assert log_in(client, "alice", PASSWORD, address="192.0.2.5").status_code == 302

    left = sorted(AccessAttempt.objects.values_list("username", "ip_address", "failures_since_start"))
    assert left == [("alice", "192.0.2.6", 1), ("bob", "192.0.2.5", 3)]


def test_one_persons_typos_do_not_lock_out_colleagues_behind_the_same_address(
    client: Client, alice: Any
) -> None:
    office = "192.0.2.80"
    for _ in range(5):
        log_in(client, "alice", "wrong", address=office)
    assert_locked(log_in(client, "alice", PASSWORD, address=office))

    bob = factories.user("bob")
    assert log_in(client, bob.username, PASSWORD, address=office).status_code == 302
    client.logout()
    # The lock is of that username from that address: alice from home is not locked either.
    assert log_in(client, "alice", PASSWORD, address="198.51.100.7").status_code == 302


def test_thirty_failures_from_one_address_across_usernames_lock_that_address(
    client: Client, settings: Any, alice: Any
) -> None:
    settings.AGENTSITE_RATE_LOGIN_ADDRESS = "off"  # the per-minute rate is another test's
    for n in range(29):
        assert log_in(client, f"guess{n % 10}", "wrong", address="192.0.2.50").status_code == 200
    assert log_in(client, "alice", PASSWORD, address="192.0.2.50").status_code == 302  # 29: not yet
    client.logout()
    assert log_in(client, "guess29", "wrong", address="192.0.2.50").status_code == 200  # the 30th

    assert_locked(log_in(client, "alice", PASSWORD, address="192.0.2.50"))
    assert_locked(log_in(client, "somebody", "wrong", address="192.0.2.50"))
    assert log_in(client, "alice", PASSWORD, address="192.0.2.51").status_code == 302


def test_login_attempts_past_the_per_address_rate_answer_429_whatever_they_are(
    client: Client, settings: Any, alice: Any
) -> None:
    from audit.models import AuditEntry

    settings.AGENTSITE_RATE_LOGIN_ADDRESS = "3/min"
    for n in range(3):
        assert log_in(client, f"someone{n}", "wrong", address="192.0.2.90").status_code == 200

    response = log_in(client, "alice", PASSWORD, address="192.0.2.90")

    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    page = response.content.decode()
    assert 'id="login-locked"' in page and "Too many login attempts from this address" in page
    assert client.get("/").status_code == 302  # not logged in
    admin = client.post(
        "/admin/login/", {"username": "alice", "password": PASSWORD}, REMOTE_ADDR="192.0.2.90"
    )
    assert admin.status_code == 429
    assert log_in(client, "alice", PASSWORD, address="192.0.2.91").status_code == 302  # another address
    refused = AuditEntry.objects.filter(action="auth.login_failed", details__rate_limited=True)
    assert [(e.details["username"], e.address, e.details["locked_out"]) for e in refused] == [
        ("alice", "192.0.2.90", True)
    ]  # the first refusal of the window is recorded, not every one after it


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


def test_the_lockout_counts_the_client_a_trusted_proxy_names_and_ignores_a_forged_header(
    client: Client, settings: Any, alice: Any
) -> None:
    """Issue 24 item 8: X-Forwarded-For counts only from AGENTSITE_TRUSTED_PROXIES (default: none)."""
    settings.AGENTSITE_TRUSTED_PROXIES = []
    for n in range(5):  # a new forged address every time, from a peer that is no proxy of ours
        client.post(
            "/login/",
            {"username": "alice", "password": "wrong"},
            REMOTE_ADDR="127.0.0.1",
            HTTP_X_FORWARDED_FOR=f"198.51.100.{n}",
        )
    assert_locked(log_in(client, "alice", PASSWORD, address="127.0.0.1"))

    settings.AGENTSITE_TRUSTED_PROXIES = [ipaddress.ip_network("10.0.0.2/32")]
    for _ in range(5):
        client.post(
            "/login/",
            {"username": "alice", "password": "wrong"},
            REMOTE_ADDR="10.0.0.2",
            HTTP_X_FORWARDED_FOR="198.51.100.20",
        )
    locked = client.post(
        "/login/",
        {"username": "alice", "password": PASSWORD},
        REMOTE_ADDR="10.0.0.2",
        HTTP_X_FORWARDED_FOR="198.51.100.20",
    )
    assert_locked(locked)
    other = client.post(  # another client behind the same proxy
        "/login/",
        {"username": "alice", "password": PASSWORD},
        REMOTE_ADDR="10.0.0.2",
        HTTP_X_FORWARDED_FOR="198.51.100.21",
    )
    assert other.status_code == 302


def test_setup_form_mistakes_are_not_failed_logins(client: Client, db: Any) -> None:
    """Issue 29 item 6: passwords that differ on /setup/ counted as failed logins and locked the page."""
    from axes.models import AccessAttempt

    differ = {
        "username": "admin",
        "password": "a-long-Pass-phrase-42",
        "password_again": "a-long-Pass-phrase-43",
    }
    short = {"username": "admin", "password": "short", "password_again": "short"}
    for bad in [differ, short] * 4:
        response = client.post("/setup/", bad)
        assert response.status_code == 200
        assert "setup-locked" not in response.content.decode()
    assert not AccessAttempt.objects.exists()

    good = {**differ, "password_again": differ["password"]}
    assert client.post("/setup/", good).status_code == 302


def test_setup_posts_past_the_per_address_rate_answer_429_with_the_wait(
    client: Client, settings: Any, db: Any
) -> None:
    settings.AGENTSITE_RATE_LOGIN_ADDRESS = "2/min"
    differ = {"username": "admin", "password": "a-long-Pass-phrase-42", "password_again": "nope"}
    assert [client.post("/setup/", differ).status_code for _ in range(2)] == [200, 200]

    response = client.post("/setup/", {**differ, "password_again": differ["password"]})

    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    page = response.content.decode()
    assert 'id="setup-locked"' in page and "Too many login attempts from this address" in page
    assert 'name="password_again"' in page  # the form is still there


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


def test_guessing_the_old_password_on_the_password_page_locks_as_failed_logins_do(
    client: Client, alice: Any
) -> None:
    """A stolen browser session cannot guess the account's password on /account/password/ faster than at
    the login: a wrong old password is a failed login of its user and address (audited)."""
    from audit.models import AuditEntry

    client.force_login(alice)
    new = {"new_password1": "a-new-Pass-phrase-77", "new_password2": "a-new-Pass-phrase-77"}
    address = "192.0.2.9"
    for _ in range(5):
        response = client.post("/account/password/", {"old_password": "guess", **new}, REMOTE_ADDR=address)
        assert response.status_code == 200 and "old_password" in response.context["form"].errors

    response = client.post("/account/password/", {"old_password": PASSWORD, **new}, REMOTE_ADDR=address)

    assert response.status_code == 429 and 1 <= int(response["Retry-After"]) <= 900
    page = response.content.decode()
    assert 'id="password-locked"' in page and "Too many failed attempts" in page
    alice.refresh_from_db()
    assert alice.check_password(PASSWORD)
    assert AuditEntry.objects.filter(action="auth.login_failed").count() == 5
    assert log_in(Client(), "alice", PASSWORD, address=address).status_code == 429  # as after 5 at the login
    other = client.post("/account/password/", {"old_password": PASSWORD, **new}, REMOTE_ADDR="192.0.2.10")
    assert other.status_code == 302  # another address is not locked: the pair is
