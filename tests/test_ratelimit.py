"""Rate limits in one process (docs/protocol.md §6.2, security/ratelimit.py): per user, per address
without credentials, wrong API keys per address (REST and sockets), the client address behind trusted
proxies, and what happens when the cache does not answer.

The suite runs with limits far above what it sends (pyproject.toml); these tests set real ones, each
with a cache of its own. The same limits across two server processes: tests/e2e/test_throttle.py.
"""

from __future__ import annotations

import ipaddress
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from agentsite.env import Rate, env_rate, parse_rate
from security.ratelimit import client_address, request_address, scope_address
from tests import factories
from tests.support.ws import closed_with, connect


@pytest.fixture
def own_cache(settings: Any) -> None:
    """A cache of this test's own (the suite's is shared by every test of the process)."""
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": uuid.uuid4().hex}
    }


def bearer(key: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


def assert_rate_limited(response: Any, *, at_most: int) -> int:
    assert response.status_code == 429, response.content
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == "rate_limited", body
    assert "Try again in" in body["error"]["message"]
    retry_after = int(response["Retry-After"])
    assert 1 <= retry_after <= at_most
    return retry_after


# --- rates -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("1200/min", Rate(1200, 60)),
        ("30/m", Rate(30, 60)),
        ("5/15min", Rate(5, 900)),
        ("100/h", Rate(100, 3600)),
        ("10 / 2 seconds", Rate(10, 2)),
        ("1000/day", Rate(1000, 86400)),
        ("off", None),
        ("none", None),
    ],
)
def test_rates_are_written_count_slash_period(text: str, rate: Rate | None) -> None:
    assert parse_rate(text) == rate


@pytest.mark.parametrize("text", ["fast", "10", "10/fortnight", "0/min", "-1/min", "5/0min", "1.5/min"])
def test_a_rate_setting_that_is_not_a_rate_stops_the_server_naming_the_variable(text: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="AGENTSITE_RATE_USER"):
        env_rate("AGENTSITE_RATE_USER", "1200/min", environ={"AGENTSITE_RATE_USER": text})
    assert env_rate("AGENTSITE_RATE_USER", "1200/min", environ={}) == "1200/min"


# --- who is asking ----------------------------------------------------------------------------------


def test_the_client_address_is_the_peer_unless_the_peer_is_a_trusted_proxy(settings: Any) -> None:
    settings.AGENTSITE_TRUSTED_PROXIES = []
    assert client_address("203.0.113.9", "198.51.100.1") == "203.0.113.9"  # nobody is trusted

    settings.AGENTSITE_TRUSTED_PROXIES = [ipaddress.ip_network("10.0.0.0/8")]
    assert client_address("203.0.113.9", "198.51.100.1") == "203.0.113.9"  # not through our proxy
    assert client_address("10.0.0.2", "198.51.100.1") == "198.51.100.1"
    # What the client wrote itself comes first; the last hop that is not ours is the client.
    assert client_address("10.0.0.2", "6.6.6.6, 198.51.100.1, 10.0.0.3") == "198.51.100.1"
    assert client_address("10.0.0.2", None) == "10.0.0.2"
    assert client_address("10.0.0.2", "10.0.0.9") == "10.0.0.2"  # only our proxies: the nearest one
    assert client_address("10.0.0.2", "unknown, 198.51.100.1") == "198.51.100.1"
    assert client_address("10.0.0.2", "198.51.100.1, not-an-address") == "10.0.0.2"  # not our proxies' doing
    assert client_address(None, None) == "unknown"


def test_requests_and_sockets_take_the_client_address_by_one_rule(settings: Any) -> None:
    """Issue 24 item 8: a forged X-Forwarded-For is believed only from AGENTSITE_TRUSTED_PROXIES (default
    none), for a request and a socket alike; several header lines count as one list, as Django joins them."""
    from django.test import RequestFactory

    def both(peer: str, *forwarded: str) -> tuple[str, str]:
        request = RequestFactory().get("/", REMOTE_ADDR=peer)
        if forwarded:
            request.META["HTTP_X_FORWARDED_FOR"] = ",".join(forwarded)
        scope = {"client": (peer, 5555), "headers": [(b"x-forwarded-for", v.encode()) for v in forwarded]}
        return request_address(request), scope_address(scope)

    settings.AGENTSITE_TRUSTED_PROXIES = []
    assert both("127.0.0.1", "198.51.100.1") == ("127.0.0.1", "127.0.0.1")  # loopback is no proxy by default
    settings.AGENTSITE_TRUSTED_PROXIES = [ipaddress.ip_network("127.0.0.1/32")]
    assert both("127.0.0.1", "198.51.100.1") == ("198.51.100.1", "198.51.100.1")
    assert both("203.0.113.5", "198.51.100.1") == ("203.0.113.5", "203.0.113.5")  # forged, not via the proxy
    assert both("127.0.0.1", "198.51.100.1", "198.51.100.2") == ("198.51.100.2", "198.51.100.2")
    # A dual-stack listener sees IPv4 peers as IPv4-mapped IPv6 addresses: still the trusted proxy.
    assert both("::ffff:127.0.0.1", "198.51.100.1") == ("198.51.100.1", "198.51.100.1")


# --- REST ----------------------------------------------------------------------------------------


def test_wrong_bearer_keys_from_one_address_answer_429_past_the_limit_even_for_a_right_key(
    client: Client, settings: Any, own_cache: None, alice_key: str
) -> None:
    settings.AGENTSITE_RATE_FAILED_KEYS = "3/min"
    here = {"REMOTE_ADDR": "198.51.100.7"}

    statuses = [
        client.get("/api/v1/chat/sessions", **here, **bearer(f"ask_wrong{n}")).status_code for n in range(3)
    ]
    assert statuses == [401, 401, 401]
    assert_rate_limited(client.get("/api/v1/chat/sessions", **here, **bearer("ask_wrong")), at_most=60)
    # The address is refused whatever it sends now, the right key too; another address is not.
    assert_rate_limited(client.get("/api/v1/chat/sessions", **here, **bearer(alice_key)), at_most=60)
    elsewhere = client.get("/api/v1/chat/sessions", REMOTE_ADDR="198.51.100.8", **bearer(alice_key))
    assert elsewhere.status_code == 200


def test_a_malformed_authorization_header_counts_as_a_wrong_key(
    client: Client, settings: Any, own_cache: None
) -> None:
    settings.AGENTSITE_RATE_FAILED_KEYS = "2/min"
    for header in ("Basic YWxpY2U6cHc=", "Bearer"):
        assert client.get("/api/v1/chat/sessions", HTTP_AUTHORIZATION=header).status_code == 401
    assert_rate_limited(client.get("/api/v1/chat/sessions", HTTP_AUTHORIZATION="Bearer x"), at_most=60)


def test_requests_of_one_user_past_the_user_rate_answer_429_and_others_go_on(
    client: Client, settings: Any, own_cache: None, alice_key: str, bob_key: str
) -> None:
    settings.AGENTSITE_RATE_USER = "3/min"

    for _ in range(3):
        assert client.get("/api/v1/chat/sessions", **bearer(alice_key)).status_code == 200
    retry_after = assert_rate_limited(client.get("/api/v1/chat/sessions", **bearer(alice_key)), at_most=60)
    assert retry_after > 50  # the window opened with the first request, a moment ago
    assert client.get("/api/v1/agents", **bearer(alice_key)).status_code == 429  # every endpoint
    assert client.get("/api/v1/chat/sessions", **bearer(bob_key)).status_code == 200


def test_a_browser_session_counts_as_its_user(
    client: Client, settings: Any, own_cache: None, alice: Any
) -> None:
    settings.AGENTSITE_RATE_USER = "2/min"
    settings.AGENTSITE_RATE_ANON = "1/min"  # a logged-in browser is not anonymous
    client.force_login(alice)

    assert [client.get("/api/v1/chat/sessions").status_code for _ in range(3)] == [200, 200, 429]


def test_requests_without_credentials_are_counted_per_address_before_they_are_refused(
    client: Client, settings: Any, own_cache: None, db: Any
) -> None:
    settings.AGENTSITE_RATE_ANON = "3/min"
    here = {"REMOTE_ADDR": "198.51.100.20"}

    assert client.get("/api/v1/version", **here).status_code == 200
    assert client.get("/api/v1/chat/sessions", **here).status_code == 401
    assert client.get("/api/v1/nowhere", **here).status_code == 404
    assert_rate_limited(client.get("/api/v1/version", **here), at_most=60)
    assert client.get("/api/v1/version", REMOTE_ADDR="198.51.100.21").status_code == 200
    assert client.get("/healthz", **here).status_code == 200  # not an API request: never limited


def test_no_limit_when_the_rate_is_off(
    client: Client, settings: Any, own_cache: None, alice_key: str
) -> None:
    settings.AGENTSITE_RATE_USER = "off"
    settings.AGENTSITE_RATE_FAILED_KEYS = "off"
    assert {client.get("/api/v1/chat/sessions", **bearer(alice_key)).status_code for _ in range(5)} == {200}
    assert {client.get("/api/v1/chat/sessions", **bearer("ask_wrong")).status_code for _ in range(5)} == {401}


def test_requests_go_on_unlimited_when_the_cache_does_not_answer(
    client: Client, settings: Any, alice_key: str, caplog: Any, monkeypatch: Any
) -> None:
    from security import ratelimit
    from tests.support.server import free_port

    monkeypatch.setattr(ratelimit, "_last_warning", 0.0)
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",  # nothing listens there
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
    }
    settings.AGENTSITE_RATE_USER = "1/min"

    assert [client.get("/api/v1/chat/sessions", **bearer(alice_key)).status_code for _ in range(3)] == [
        200
    ] * 3
    assert client.get("/api/v1/chat/sessions", **bearer("ask_wrong")).status_code == 401
    assert "rate limits are not counted: the cache does not answer" in caplog.text


# --- sockets ---------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_socket_with_a_wrong_key_counts_and_past_the_limit_is_refused_rate_limited(
    settings: Any, own_cache: None, alice: Any, alice_key: str
) -> None:
    settings.AGENTSITE_RATE_FAILED_KEYS = "2/min"
    session = await sync_to_async(factories.session)(alice)

    for _ in range(2):
        ws, first = await connect(session.id, key="ask_wrong")
        assert first["data"]["code"] == "unauthorized"
        assert await closed_with(ws) == 4401
    ws, first = await connect(session.id, key=alice_key)  # the right key too, from that address
    assert first == {"type": "error", "data": {"code": "rate_limited", "message": first["data"]["message"]}}
    assert "Try again in" in first["data"]["message"]
    assert await closed_with(ws) == 4429


@pytest.mark.django_db(transaction=True)
async def test_wrong_keys_over_rest_and_over_sockets_share_one_count(
    settings: Any, own_cache: None, alice: Any
) -> None:
    settings.AGENTSITE_RATE_FAILED_KEYS = "2/min"
    session = await sync_to_async(factories.session)(alice)
    client = Client()
    # WebsocketCommunicator's scope has no client address, Django's test client says 127.0.0.1: use the
    # same for both.
    assert (
        await sync_to_async(client.get)("/api/v1/chat/sessions", REMOTE_ADDR="unknown", **bearer("ask_x"))
    ).status_code == 401
    ws, first = await connect(session.id, key="ask_wrong")
    assert first["data"]["code"] == "unauthorized"
    response = await sync_to_async(client.get)(
        "/api/v1/chat/sessions", REMOTE_ADDR="unknown", **bearer("ask_y")
    )
    assert response.status_code == 429
