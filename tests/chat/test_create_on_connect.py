"""Opening a chat in one round trip (docs/protocol.md §3.1 extension, issue 18): a socket with `?create=1`
creates its session as `POST /chat/sessions` would — same fields, checks and errors — or joins the user's
own open session with that id; whatever it refuses, it refuses with an error frame and a close code, and
creates nothing."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from agents.models import Agent
from chat.models import Session
from tests import factories
from tests.support.ws import closed_with, connect, receive_until, send

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services_rerun]


async def sessions_of(user: Any) -> list[Session]:
    return await sync_to_async(list)(Session.objects.filter(user=user).order_by("created_at"))


async def test_a_new_id_is_created_for_the_user_and_chats_at_once(alice: Any, alice_key: str) -> None:
    ws, first = await connect("fresh-chat", key=alice_key, query={"create": "1"})
    assert first["type"] == "connected" and first["session_id"] == "fresh-chat" and first["last_seq"] == 0
    (made,) = await sessions_of(alice)
    assert (made.id, made.agent_name, made.title, made.is_open) == ("fresh-chat", "default", "", True)
    await send(ws, {"type": "message", "content": "hello", "message_id": "m1"})
    result, _ = await receive_until(ws, "result")
    assert result["data"]["status"] == "completed"
    await ws.disconnect()


async def test_the_posts_fields_come_from_the_query(alice: Any, alice_key: str) -> None:
    await sync_to_async(Agent.objects.create)(name="helper")
    query = {"create": "true", "agent_name": "helper", "title": "Ünïcode title"}
    ws, first = await connect("with-fields", key=alice_key, query=query)
    assert first["type"] == "connected"
    (made,) = await sessions_of(alice)
    assert (made.agent_name, made.title) == ("helper", "Ünïcode title")
    await ws.disconnect()


async def test_the_users_own_open_session_is_joined_as_it_is(alice: Any, alice_key: str) -> None:
    await sync_to_async(factories.session)(alice, session_id="mine", title="Kept")
    ws, first = await connect("mine", key=alice_key, query={"create": "1", "title": "Other"})
    assert first["type"] == "connected"
    (kept,) = await sessions_of(alice)
    assert kept.title == "Kept"
    await ws.disconnect()
    again, first = await connect("mine", key=alice_key, query={"create": "1"})  # a reconnect, same URL
    assert first["type"] == "connected"
    await again.disconnect()


async def test_an_id_another_user_holds_is_refused_as_post_refuses_it(
    alice: Any, bob: Any, alice_key: str
) -> None:
    await sync_to_async(factories.session)(bob, session_id="bobs", title="Bob's")
    ws, first = await connect("bobs", key=alice_key, query={"create": "1"})
    assert first["type"] == "error" and first["data"]["code"] == "session_exists"
    assert "already in use" in first["data"]["message"]
    assert await closed_with(ws) == 4409
    assert await sessions_of(alice) == []
    assert (await sync_to_async(Session.objects.get)(id="bobs")).title == "Bob's"


async def test_a_closed_session_of_the_user_stays_closed(alice: Any, alice_key: str) -> None:
    await sync_to_async(factories.session)(alice, session_id="done")
    await sync_to_async(Session.objects.filter(id="done").update)(status=Session.Status.CLOSED)
    ws, first = await connect("done", key=alice_key, query={"create": "1"})
    assert first["data"]["code"] == "closed" and "is closed" in first["data"]["message"]
    assert await closed_with(ws) == 4410


@pytest.mark.parametrize(
    ("session_id", "query", "code", "close", "words"),
    [
        ("no-agent", {"agent_name": "nope"}, "not_found", 4404, "Agent nope not found"),
        ("bad id!", {}, "invalid", 4400, "session_id"),
        ("long-title", {"title": "x" * 201}, "invalid", 4400, "title"),
        ("bad-flag", {"create": "maybe"}, "invalid", 4400, "create: Must be true or false."),
    ],
)
async def test_what_post_refuses_is_refused_and_nothing_is_made(
    alice: Any, alice_key: str, session_id: str, query: dict[str, str], code: str, close: int, words: str
) -> None:
    ws, first = await connect(session_id, key=alice_key, query={"create": "1", **query})
    assert first["type"] == "error" and first["data"]["code"] == code
    assert words in first["data"]["message"]
    assert await closed_with(ws) == close
    assert await sessions_of(alice) == []


async def test_the_open_chat_limit_holds(alice: Any, alice_key: str) -> None:
    await sync_to_async(factories.session)(alice, session_id="first")
    with override_settings(AGENTSITE_USER_MAX_SESSIONS=1):
        ws, first = await connect("second", key=alice_key, query={"create": "1"})
    assert first["data"]["code"] == "limit_reached"
    assert "AGENTSITE_USER_MAX_SESSIONS" in first["data"]["message"]
    assert await closed_with(ws) == 4400
    assert [s.id for s in await sessions_of(alice)] == ["first"]


async def test_without_credentials_nothing_is_created(alice: Any) -> None:
    ws, first = await connect("anon", query={"create": "1"})
    assert first["data"]["code"] == "unauthorized"
    assert await closed_with(ws) == 4401
    assert not await sync_to_async(Session.objects.filter(id="anon").exists)()


async def test_without_create_a_missing_id_is_still_not_found(alice: Any, alice_key: str) -> None:
    ws, first = await connect("missing", key=alice_key, query={"create": "0"})
    assert first["data"]["code"] == "not_found"
    assert await closed_with(ws) == 4404
    assert await sessions_of(alice) == []
