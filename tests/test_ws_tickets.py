"""Keys never need to travel in URLs (docs/protocol.md §6.6, accounts/tickets.py):
`POST /api/v1/auth/ws-ticket` gives a ticket that opens one socket with `?ticket=` within 60 seconds, as the
user and credential that asked for it; sockets also take `Authorization: Bearer <key>` on the upgrade
request. `?api_key=` keeps working (tests/chat/test_consumer.py)."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.models import ApiKey
from accounts.services import api_key_revoke
from tests import factories
from tests.support.ws import closed_with, connect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services_rerun]


@pytest.fixture
async def session(alice):  # type: ignore[no-untyped-def]
    return await sync_to_async(factories.session)(alice)


def new_ticket(key: str) -> dict[str, Any]:
    response = Client().post("/api/v1/auth/ws-ticket", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 201, response.content
    return dict(response.json())


async def ticket_of(key: str) -> str:
    return str((await sync_to_async(new_ticket)(key))["ticket"])


def bearer(key: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {key}".encode())]


async def assert_unauthorized(ws: Any, first: dict[str, Any]) -> None:
    assert first["type"] == "error" and first["data"]["code"] == "unauthorized", first
    assert "api_key" in first["data"]["message"]  # the contract's word for `unauthorized` (§3.1)
    assert await closed_with(ws) == 4401


def test_a_ticket_is_one_use_for_60_seconds_and_names_no_key(alice_key: str) -> None:
    before = dt.datetime.now(dt.UTC)
    body = new_ticket(alice_key)
    assert set(body) == {"ticket", "expires_at"}
    assert body["ticket"].startswith("wst_") and alice_key not in body["ticket"]
    expires = dt.datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00"))
    assert before + dt.timedelta(seconds=59) <= expires <= before + dt.timedelta(seconds=61)


def test_a_ticket_needs_credentials_and_is_no_key_for_rest(
    client: Client, alice: Any, alice_key: str
) -> None:
    refused = client.post("/api/v1/auth/ws-ticket")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    assert client.get("/api/v1/auth/ws-ticket", HTTP_AUTHORIZATION=f"Bearer {alice_key}").status_code == 405
    ticket = new_ticket(alice_key)["ticket"]
    assert client.get("/api/v1/chat/sessions", HTTP_AUTHORIZATION=f"Bearer {ticket}").status_code == 401
    client.force_login(alice)  # a browser session may ask too (CSRF applies, as for every unsafe method)
    assert client.post("/api/v1/auth/ws-ticket").status_code == 201


async def test_a_ticket_opens_a_socket_once(session, alice_key):
    ticket = await ticket_of(alice_key)

    ws, first = await connect(session.id, query={"ticket": ticket})
    assert first["type"] == "connected" and first["session_id"] == session.id
    await ws.disconnect()

    again, first = await connect(session.id, query={"ticket": ticket})
    await assert_unauthorized(again, first)
    assert "ticket" in first["data"]["message"]


async def test_one_ticket_redeemed_by_two_sockets_at_once_opens_one(session, alice_key):
    ticket = await ticket_of(alice_key)
    (a, first_a), (b, first_b) = await asyncio.gather(
        connect(session.id, query={"ticket": ticket}), connect(session.id, query={"ticket": ticket})
    )
    assert sorted([first_a["type"], first_b["type"]]) == ["connected", "error"]
    await a.disconnect()
    await b.disconnect()


async def test_an_expired_ticket_is_refused(session, alice_key, settings):
    settings.AGENTSITE_WS_TICKET_SECONDS = 1
    ticket = await ticket_of(alice_key)
    await asyncio.sleep(1.3)
    ws, first = await connect(session.id, query={"ticket": ticket})
    await assert_unauthorized(ws, first)


async def test_a_ticket_of_a_user_deactivated_since_is_refused(session, alice, alice_key):
    ticket = await ticket_of(alice_key)
    await sync_to_async(get_user_model().objects.filter(pk=alice.pk).update)(is_active=False)
    ws, first = await connect(session.id, query={"ticket": ticket})
    await assert_unauthorized(ws, first)


async def test_a_ticket_of_a_key_revoked_since_is_refused(session, alice_key):
    ticket = await ticket_of(alice_key)
    await sync_to_async(api_key_revoke)(key=await sync_to_async(ApiKey.objects.get)())
    ws, first = await connect(session.id, query={"ticket": ticket})
    await assert_unauthorized(ws, first)


async def test_a_socket_opened_with_a_ticket_follows_the_key_that_asked_for_it(session, alice_key):
    ws, first = await connect(session.id, query={"ticket": await ticket_of(alice_key)})
    assert first["type"] == "connected"
    await sync_to_async(api_key_revoke)(key=await sync_to_async(ApiKey.objects.get)())
    frame = await ws.receive_json_from(timeout=2)
    assert frame == {"type": "error", "data": {"code": "unauthorized", "message": "The api_key was revoked."}}
    assert await closed_with(ws) == 4401


async def test_a_made_up_ticket_is_refused_and_counts_as_a_wrong_key(session, alice_key, settings):
    settings.AGENTSITE_RATE_FAILED_KEYS = "2/min"
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "ws-ticket-test"}
    }
    for guess in ("wst_" + "a" * 43, "not-even-a-ticket"):
        ws, first = await connect(session.id, query={"ticket": guess})
        await assert_unauthorized(ws, first)
    ws, first = await connect(session.id, key=alice_key)  # the address sent too many wrong ones
    assert first["data"]["code"] == "rate_limited"
    assert await closed_with(ws) == 4429


async def test_a_ticket_is_bound_to_its_user(session, bob_key):
    ws, first = await connect(session.id, query={"ticket": await ticket_of(bob_key)})
    assert first["data"]["code"] == "not_found"  # alice's session, as for any other credential of bob's


async def test_an_authorization_bearer_header_on_the_upgrade_opens_a_socket(session, alice_key):
    ws, first = await connect(session.id, headers=bearer(alice_key))
    assert first["type"] == "connected"
    await ws.disconnect()


async def test_a_wrong_bearer_header_is_refused_and_never_falls_back_to_a_query_key(session, alice_key):
    ws, first = await connect(session.id, headers=bearer("ask_" + "x" * 40))
    await assert_unauthorized(ws, first)
    ws, first = await connect(session.id, key=alice_key, headers=bearer("ask_" + "x" * 40))
    await assert_unauthorized(ws, first)


async def test_a_socket_opened_with_a_bearer_header_follows_its_key(session, alice_key):
    ws, first = await connect(session.id, headers=bearer(alice_key))
    assert first["type"] == "connected"
    await sync_to_async(api_key_revoke)(key=await sync_to_async(ApiKey.objects.get)())
    frame = await ws.receive_json_from(timeout=2)
    assert frame["data"]["message"] == "The api_key was revoked."
    assert await closed_with(ws) == 4401


async def test_another_authorization_scheme_is_left_to_the_cookie(session, alice):
    """A browser behind a proxy with HTTP Basic sends `Authorization: Basic …` on its upgrade too: the
    portal's socket still authenticates with its cookie."""
    from tests.chat.test_consumer import _session_cookie

    cookie = await _session_cookie(alice)
    headers = [
        (b"cookie", cookie),
        (b"host", b"localhost:8000"),
        (b"origin", b"http://localhost:8000"),
        (b"authorization", b"Basic dXNlcjpwdw=="),
    ]
    ws, first = await connect(session.id, headers=headers)
    assert first["type"] == "connected"
    await ws.disconnect()


async def test_a_socket_whose_origin_differs_in_port_is_refused_at_the_handshake(session, alice):
    """docs/deployment.md: behind nginx `Host $http_host` keeps the port, so a page on another port of the
    same host is another origin (issue 24 item 9)."""
    from channels.testing import WebsocketCommunicator

    from agentsite.asgi import application
    from tests.chat.test_consumer import _session_cookie

    cookie = await _session_cookie(alice)
    for origin, accepted in ((b"http://localhost:8443", False), (b"http://localhost:8000", True)):
        ws = WebsocketCommunicator(
            application,
            f"/api/v1/chat/ws/{session.id}",
            headers=[(b"cookie", cookie), (b"host", b"localhost:8000"), (b"origin", origin)],
        )
        connected, _ = await ws.connect()
        assert connected is accepted, origin
        await ws.disconnect()
