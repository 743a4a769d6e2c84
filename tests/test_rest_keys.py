"""API keys (docs/protocol.md §1): the keys REST API, `manage.py create_api_key`, and how requests
authenticate."""

from __future__ import annotations

import datetime as dt
import io
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client, override_settings
from django.utils import timezone

from accounts.models import ApiKey
from accounts.services import LAST_USED_RESOLUTION, api_key_create, api_key_revoke
from agentsite.isotime import iso
from chat.models import Session
from tests import factories

KEYS = "/api/v1/auth/keys"
SESSIONS = "/api/v1/chat/sessions"
KEY_FORMAT = re.compile(r"ask_[A-Za-z0-9_-]{40}")


def assert_error(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    """The response has `status` and the contract's error shape; returns the `error` object."""
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) <= {"code", "message", "fields"}, error
    assert isinstance(error["code"], str) and re.fullmatch(r"[a-z_]+", error["code"]), error
    assert isinstance(error["message"], str) and error["message"].strip(), error
    if code is not None:
        assert error["code"] == code, error
    return error


def bearer(value: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": value}


@pytest.fixture
def browser(alice: Any) -> factories.JsonClient:
    """alice logged in (a browser session): keys are created this way, never with a key."""
    client = Client()
    client.force_login(alice)
    return factories.JsonClient(client, None)


# --- the keys API ---------------------------------------------------------------------------------


def test_create_key_returns_secret_once_with_prefix(browser: Any) -> None:
    response = browser.post(KEYS, {"name": "laptop"})

    assert response.status_code == 201, response.content
    body = response.json()
    assert {"id", "name", "key", "prefix", "created_at"} <= set(body)
    assert body["name"] == "laptop"
    assert KEY_FORMAT.fullmatch(body["key"]), body["key"]
    assert body["key"].startswith(body["prefix"]) and body["prefix"].startswith("ask_")
    assert len(body["prefix"]) < len(body["key"])
    assert isinstance(body["id"], str)
    # Only a hash is stored.
    stored = ApiKey.objects.get(pk=body["id"])
    assert body["key"] not in {stored.key_hash, stored.prefix, stored.name}


def test_created_key_works_and_list_never_shows_a_secret(api: Any, browser: Any, alice_key: str) -> None:
    created = browser.post(KEYS, {"name": "ci"}).json()

    listed = api(created["key"]).get(KEYS)

    assert listed.status_code == 200
    body = listed.json()
    assert set(body) == {"results", "next"}
    assert {item["name"] for item in body["results"]} == {"test", "ci"}
    assert created["key"] not in listed.content.decode()
    assert alice_key not in listed.content.decode()
    assert all("key" not in item for item in body["results"])
    item = next(item for item in body["results"] if item["id"] == created["id"])
    assert item["prefix"] == created["prefix"]


def test_create_key_without_name_is_allowed(browser: Any) -> None:
    response = browser.post(KEYS, {})
    assert response.status_code == 201, response.content
    assert response.json()["name"] == ""
    assert response.json()["expires_at"] is None and response.json()["expired"] is False


def test_create_key_with_wrong_name_type_is_refused(browser: Any) -> None:
    error = assert_error(browser.post(KEYS, {"name": 12}), 400, "invalid")
    assert "name" in error["fields"]


def test_a_request_authenticated_by_a_key_cannot_create_keys(api: Any, alice_key: str) -> None:
    error = assert_error(api(alice_key).post(KEYS, {"name": "minted"}), 403, "key_cannot_create_keys")

    assert "portal" in error["message"] and "create_api_key" in error["message"]
    assert list(ApiKey.objects.values_list("name", flat=True)) == ["test"]


@override_settings(AGENTSITE_AUTH="open")
def test_a_key_cannot_create_keys_in_open_mode_either(api: Any, alice_key: str) -> None:
    assert_error(api(alice_key).post(KEYS, {"name": "minted"}), 403, "key_cannot_create_keys")


def test_a_key_expires_at_its_time(api: Any, browser: Any) -> None:
    soon = timezone.now() + dt.timedelta(hours=1)
    created = browser.post(KEYS, {"name": "short", "expires_at": iso(soon)})
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["expires_at"] == iso(soon) and body["expired"] is False
    assert api(body["key"]).get(SESSIONS).status_code == 200

    ApiKey.objects.filter(pk=body["id"]).update(expires_at=timezone.now() - dt.timedelta(seconds=1))

    error = assert_error(api(body["key"]).get(SESSIONS), 401, "unauthorized")
    assert "expired" in error["message"]
    listed = {item["id"]: item for item in browser.get(KEYS).json()["results"]}
    assert listed[body["id"]]["expired"] is True  # listed (it was not revoked), marked expired


@pytest.mark.parametrize(
    ("value", "problem"),
    [("2001-01-01T00:00:00Z", "future"), ("tomorrow", "format"), (1893456000, "string"), (True, "string")],
)
def test_expires_at_must_be_a_time_in_the_future(browser: Any, value: Any, problem: str) -> None:
    error = assert_error(browser.post(KEYS, {"name": "x", "expires_at": value}), 400, "invalid")

    assert "expires_at" in error["fields"]
    assert ApiKey.objects.count() == 0


def test_expires_at_may_be_null_or_given_with_an_offset(browser: Any) -> None:
    assert browser.post(KEYS, {"expires_at": None}).json()["expires_at"] is None
    created = browser.post(KEYS, {"expires_at": "2999-01-01T02:00:00+02:00"})
    assert created.status_code == 201, created.content
    assert created.json()["expires_at"] == "2999-01-01T00:00:00Z"


def test_last_used_at_is_written_at_most_once_a_minute(
    api: Any, alice_key: str, django_assert_num_queries: Any
) -> None:
    key = ApiKey.objects.get()
    assert key.last_used_at is None
    api(alice_key).get(KEYS)
    first = ApiKey.objects.get().last_used_at
    assert first is not None and timezone.now() - first < dt.timedelta(seconds=5)

    with django_assert_num_queries(3):  # the key, its user (two prepared statements), the list: no write
        api(alice_key).get(KEYS)
    assert ApiKey.objects.get().last_used_at == first

    ApiKey.objects.update(last_used_at=first - LAST_USED_RESOLUTION - dt.timedelta(seconds=1))
    api(alice_key).get(KEYS)
    assert ApiKey.objects.get().last_used_at > first  # stale: written again
    assert api(alice_key).get(KEYS).json()["results"][0]["last_used_at"] == iso(
        ApiKey.objects.get().last_used_at
    )


def test_a_name_longer_than_the_limit_as_sent_is_refused(browser: Any) -> None:
    """The limit holds for the text as sent: DRF counted it after trimming ("\r" + 100 characters passed)."""
    error = assert_error(browser.post(KEYS, {"name": "\r" + "x" * 100}), 400, "invalid")
    assert "name" in error["fields"]
    assert browser.post(KEYS, {"name": "  padded  "}).json()["name"] == "padded"


def test_list_shows_only_own_keys(api: Any, alice_key: str, bob_key: str, bob: Any) -> None:
    api_key_create(user=bob, name="bob-second")

    names = [item["name"] for item in api(alice_key).get(KEYS).json()["results"]]

    assert names == ["test"]


def test_delete_revokes_at_once(api: Any, browser: Any, alice: Any, alice_key: str) -> None:
    other = browser.post(KEYS, {"name": "doomed"}).json()
    assert api(other["key"]).get(SESSIONS).status_code == 200

    response = api(alice_key).delete(f"{KEYS}/{other['id']}")

    assert response.status_code == 200, response.content
    assert response.json()["id"] == other["id"]
    assert_error(api(other["key"]).get(SESSIONS), 401, "unauthorized")
    assert other["id"] not in [item["id"] for item in api(alice_key).get(KEYS).json()["results"]]


def test_user_cannot_delete_another_users_key(api: Any, alice_key: str, bob_key: str) -> None:
    alice_key_id = api(alice_key).get(KEYS).json()["results"][0]["id"]

    assert_error(api(bob_key).delete(f"{KEYS}/{alice_key_id}"), 404, "not_found")

    assert api(alice_key).get(SESSIONS).status_code == 200


# "²" is a digit to str.isdigit but not to int(), and 2**64 fits no integer column: both answered 500.
@pytest.mark.parametrize("key_id", ["999999", "not-a-number", "²", str(2**64), "-1"])
def test_delete_unknown_key_is_not_found(api: Any, alice_key: str, key_id: str) -> None:
    assert_error(api(alice_key).delete(f"{KEYS}/{key_id}"), 404, "not_found")


def test_a_key_may_revoke_itself(api: Any, alice_key: str) -> None:
    own = api(alice_key).get(KEYS).json()["results"][0]["id"]

    assert api(alice_key).delete(f"{KEYS}/{own}").status_code == 200

    assert_error(api(alice_key).get(KEYS), 401, "unauthorized")


def test_keys_api_requires_authentication(api: Any, db: Any) -> None:
    assert_error(api(None).get(KEYS), 401, "unauthorized")
    assert_error(api(None).post(KEYS, {"name": "x"}), 401, "unauthorized")


# --- the command ----------------------------------------------------------------------------------


def run_create_api_key(*args: str) -> str:
    out = io.StringIO()
    call_command("create_api_key", *args, stdout=out)
    return out.getvalue()


def test_command_prints_one_line_with_a_working_key(api: Any, alice: Any) -> None:
    output = run_create_api_key("--user", "alice", "--name", "script")

    lines = output.splitlines()
    assert len(lines) == 1
    key = lines[0]
    assert KEY_FORMAT.fullmatch(key), output
    assert api(key).get(SESSIONS).status_code == 200
    assert [item["name"] for item in api(key).get(KEYS).json()["results"]] == ["script"]


def test_command_creates_staff_user_on_request(api: Any, db: Any) -> None:
    key = run_create_api_key("--user", "ops", "--create-user", "--staff").strip()

    user = get_user_model().objects.get(username="ops")
    assert user.is_staff
    response = api(key).post("/api/v1/agents", {"name": "from-ops"})
    assert response.status_code == 201, response.content


def test_command_created_user_is_not_staff_by_default(db: Any) -> None:
    run_create_api_key("--user", "dora", "--create-user")

    assert get_user_model().objects.get(username="dora").is_staff is False


def test_command_refuses_unknown_user_without_create_user(db: Any) -> None:
    with pytest.raises(CommandError, match=r"ghost.*--create-user"):
        run_create_api_key("--user", "ghost")

    assert not get_user_model().objects.filter(username="ghost").exists()
    assert ApiKey.objects.count() == 0


# --- bearer authentication ------------------------------------------------------------------------


def test_missing_credentials_get_401_with_a_helpful_message(client: Client, db: Any) -> None:
    error = assert_error(client.get(SESSIONS), 401, "unauthorized")
    assert "Bearer" in error["message"]


def test_wrong_key_gets_401(client: Client, alice_key: str) -> None:
    wrong = "ask_" + "x" * 40
    assert_error(client.get(SESSIONS, **bearer(f"Bearer {wrong}")), 401, "unauthorized")


def test_revoked_key_gets_401(client: Client, alice: Any) -> None:
    key, secret = api_key_create(user=alice, name="old")
    api_key_revoke(key=key)

    assert_error(client.get(SESSIONS, **bearer(f"Bearer {secret}")), 401, "unauthorized")


def test_key_of_inactive_user_gets_401(client: Client, alice: Any, alice_key: str) -> None:
    alice.is_active = False
    alice.save()

    assert_error(client.get(SESSIONS, **bearer(f"Bearer {alice_key}")), 401, "unauthorized")


@pytest.mark.parametrize(
    "header", ["Bearer", "Bearer   ", "Basic YWxpY2U6cHc=", "Token {key}", "{key}", "Bearer {key} extra"]
)
def test_malformed_authorization_header_gets_401(client: Client, alice_key: str, header: str) -> None:
    assert_error(client.get(SESSIONS, **bearer(header.format(key=alice_key))), 401, "unauthorized")


def test_bearer_scheme_is_case_insensitive(client: Client, alice_key: str) -> None:
    assert client.get(SESSIONS, **bearer(f"bearer {alice_key}")).status_code == 200


@override_settings(AGENTSITE_AUTH="open")
def test_open_mode_rejects_a_wrong_key(client: Client, db: Any) -> None:
    assert_error(client.get(SESSIONS, **bearer("Bearer ask_" + "y" * 40)), 401, "unauthorized")
    assert_error(client.get(SESSIONS, **bearer("Basic Zm9vOmJhcg==")), 401, "unauthorized")


@override_settings(AGENTSITE_AUTH="open")
def test_open_mode_without_key_acts_as_local_user(api: Any, db: Any) -> None:
    response = api(None).post(SESSIONS, {"session_id": "open-mode"})

    assert response.status_code == 200, response.content
    assert Session.objects.get(id="open-mode").user.username == "local"
    assert [s["session_id"] for s in api(None).get(SESSIONS).json()["results"]] == ["open-mode"]


@override_settings(AGENTSITE_AUTH="open")
def test_open_mode_with_a_valid_key_acts_as_the_key_owner(api: Any, alice_key: str) -> None:
    api(alice_key).post(SESSIONS, {"session_id": "alices"})

    assert Session.objects.get(id="alices").user.username == "alice"


def test_required_mode_does_not_create_local_user(client: Client, db: Any) -> None:
    client.get(SESSIONS)
    assert not get_user_model().objects.filter(username="local").exists()


# --- session (browser) authentication -------------------------------------------------------------


def test_session_login_authenticates_rest(client: Client, alice: Any) -> None:
    client.force_login(alice)

    response = client.get(KEYS)

    assert response.status_code == 200, response.content


def test_session_auth_enforces_csrf_on_unsafe_methods(alice: Any) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)

    assert browser.get(KEYS).status_code == 200  # safe methods need no token
    error = assert_error(browser.post(KEYS, {"name": "x"}, content_type="application/json"), 403, "forbidden")
    assert "CSRF" in error["message"]
    assert ApiKey.objects.filter(user=alice).count() == 0


def test_session_auth_with_csrf_token_may_write(alice: Any) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    token = "a" * 32
    browser.cookies["csrftoken"] = token

    response = browser.post(KEYS, {"name": "x"}, content_type="application/json", HTTP_X_CSRFTOKEN=token)

    assert response.status_code == 201, response.content


def test_bearer_requests_need_no_csrf_token(alice_key: str) -> None:
    browser = Client(enforce_csrf_checks=True)
    response = browser.post(
        SESSIONS, {"title": "x"}, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {alice_key}"
    )
    assert response.status_code == 200, response.content
