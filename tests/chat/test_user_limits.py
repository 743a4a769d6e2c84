"""Per-user limits on the socket and the queue (docs/protocol.md §6.6), over the real ASGI application.

What was found (issue 24, findings 4 and 5): one key opened 20,000 sockets and the server ran out of open
files; 1,000 `message` frames of 99 KB were queued in 4.4 s and the database grew 13 → 112 MB. Now a user
holds at most AGENTSITE_USER_MAX_SOCKETS sockets (the next: `too_many_sockets`, close 4429), counted frames
pass at AGENTSITE_WS_RATE (past it: `rate_limited` with `retry_after`, nothing done, the socket stays
open), and at most AGENTSITE_SESSION_MAX_PENDING / AGENTSITE_USER_MAX_PENDING messages wait (past either:
`queue_full`, REST 429, nothing stored). Every refusal is in the audit trail, once per window.
SSE streams and two processes: tests/e2e/test_user_limits.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from agentsite.dev.fake_llm import FakeLLMServer, Reply
from audit.actions import LIMIT_HIT
from audit.limits import limit_hits
from audit.models import AuditEntry
from chat.models import Message
from tests import factories
from tests.support.chat_queue import a_use_fake_llm, a_user_with_key, frames_until, is_status
from tests.support.ws import TIMEOUT, closed_with, connect, rest, send

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services_rerun]

HOLD = Reply(text="held answer", delay=30)  # keeps the first turn running: later messages wait


@pytest.fixture(autouse=True)
def fresh_limit_windows() -> None:
    limit_hits.clear()


def limit_entries(user: Any, limit: str) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action=LIMIT_HIT, user_id=user.pk, details__limit=limit))


def stored_user_messages(session_id: str) -> list[str]:
    return list(
        Message.objects.filter(session_id=session_id, role=Message.Role.USER)
        .order_by("id")
        .values_list("message_id", flat=True)
    )


def message(message_id: str, content: str = "x") -> dict[str, Any]:
    return {"type": "message", "message_id": message_id, "content": content}


# --- sockets ------------------------------------------------------------------------------------------


@override_settings(AGENTSITE_USER_MAX_SOCKETS=50)
async def test_a_users_51st_socket_is_refused_with_4429_and_one_more_opens_once_one_closed() -> None:
    alice, alice_key = await a_user_with_key("alice")
    _, bob_key = await a_user_with_key("bob")
    sessions = [(await sync_to_async(factories.session)(alice)).id for _ in range(5)]
    for _ in range(3):  # a socket refused before it is counted, or given back at once: holds no slot
        ws, first = await connect("no-such-session", key=alice_key)
        assert first["data"]["code"] == "not_found"
        assert await closed_with(ws) == 4404
    sockets = []
    for n in range(50):  # spread over her sessions: the limit is per user, not per session
        ws, first = await connect(sessions[n % 5], key=alice_key)
        assert first["type"] == "connected", (n, first)
        sockets.append(ws)

    for _ in range(2):
        ws, first = await connect(sessions[0], key=alice_key)
        assert first["type"] == "error" and first["data"]["code"] == "too_many_sockets", first
        assert "AGENTSITE_USER_MAX_SOCKETS" in first["data"]["message"] and "50" in first["data"]["message"]
        assert await closed_with(ws) == 4429

    bobs_session = (await sync_to_async(factories.session)(await sync_to_async(_user)("bob"))).id
    ws, first = await connect(bobs_session, key=bob_key)
    assert first["type"] == "connected", "another user's sockets are not hers"
    await ws.disconnect()

    await sockets.pop().disconnect()
    # The place goes back to Redis in a task of its own (chat/live/cluster/slots.py), so on a busy
    # machine the next socket may come a moment before it: it opens within a second or two.
    for _ in range(20):
        ws, first = await connect(sessions[0], key=alice_key)
        if first["type"] == "connected":
            break
        assert first["data"]["code"] == "too_many_sockets", first
        assert await closed_with(ws) == 4429
        await asyncio.sleep(0.1)
    assert first["type"] == "connected", first
    sockets.append(ws)
    await send(ws, {"type": "ping"})
    assert (await ws.receive_json_from())["type"] == "pong"

    entries = await sync_to_async(limit_entries)(alice, "too_many_sockets")
    assert len(entries) == 1, "two refusals in a minute: one entry"
    assert entries[0].details["max"] == 50 and entries[0].details["setting"] == "AGENTSITE_USER_MAX_SOCKETS"
    for ws in sockets:
        await ws.disconnect()


def _user(username: str) -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username=username)


# --- frames -------------------------------------------------------------------------------------------


@pytest.fixture
async def held_chat(fake_llm: FakeLLMServer) -> tuple[Any, str, str]:
    user, key = await a_user_with_key("alice")
    await a_use_fake_llm(fake_llm.base_url)
    fake_llm.default = HOLD  # every turn
    session = await sync_to_async(factories.session)(user)
    return user, key, session.id


@override_settings(AGENTSITE_WS_RATE="120/min", AGENTSITE_WS_BURST=30)
async def test_a_frame_flood_is_refused_past_the_burst_and_the_socket_stays_open(held_chat) -> None:
    user, key, session_id = held_chat
    ws, _ = await connect(session_id, key=key)
    flood = [f"m{n:02}" for n in range(60)]
    for message_id in flood:
        await send(ws, message(message_id, "x" * 1000))
        await send(ws, {"type": "ping"})  # free: never refused, never counted
    frames = []
    while len([f for f in frames if f["type"] == "pong"]) < len(flood):
        frames.append(await ws.receive_json_from(timeout=TIMEOUT))
    refused = [f["data"] for f in frames if f["type"] == "error"]
    accepted = [f["message_id"] for f in frames if f["type"] == "message_status"]
    # 30 at once, then 2 a second: the flood takes well under a second, so at most one more passes.
    assert 30 <= len(accepted) <= 31, accepted
    assert accepted == flood[: len(accepted)]
    assert len(refused) == len(flood) - len(accepted)
    for error in refused:
        assert error["code"] == "rate_limited" and error["retry_after"] >= 1, error
        assert "AGENTSITE_WS_RATE" in error["message"]
    assert [error["message_id"] for error in refused] == flood[len(accepted) :]
    # Nothing of a refused frame was stored, and the socket goes on.
    assert await sync_to_async(stored_user_messages)(session_id) == accepted
    await send(ws, {"type": "ping"})
    assert (await ws.receive_json_from())["type"] == "pong"
    for kind in ({"type": "cancel"}, {"type": "remove", "message_id": "m01"}):  # every counted kind
        await send(ws, kind)
        answer = await ws.receive_json_from()
        assert answer["type"] == "error" and answer["data"]["code"] == "rate_limited", answer
    entries = await sync_to_async(limit_entries)(user, "rate_limited")
    assert len(entries) == 1 and entries[0].details["frame"] == "message", "one entry for the whole flood"
    await ws.disconnect()


@override_settings(AGENTSITE_WS_RATE="30/min", AGENTSITE_WS_BURST=2)
async def test_frames_pass_again_once_the_rate_allows(held_chat) -> None:
    _, key, session_id = held_chat
    ws, _ = await connect(session_id, key=key)
    for message_id in ("a", "b", "c"):
        await send(ws, message(message_id))
    frames = await frames_until(ws, lambda f: f["type"] == "error")
    assert [f["message_id"] for f in frames if f["type"] == "message_status"] == ["a", "b"]
    error = frames[-1]["data"]
    assert error["message_id"] == "c" and 1 <= error["retry_after"] <= 2, error  # one token per 2 s
    await asyncio.sleep(error["retry_after"])
    await send(ws, message("c"))
    await frames_until(ws, is_status("c", "queued"))
    await ws.disconnect()


# --- queues -------------------------------------------------------------------------------------------


@override_settings(AGENTSITE_SESSION_MAX_PENDING=3, AGENTSITE_USER_MAX_PENDING=100)
async def test_a_sessions_queue_takes_at_most_its_cap_over_the_socket_and_rest(held_chat) -> None:
    user, key, session_id = held_chat
    ws, _ = await connect(session_id, key=key)
    await send(ws, message("run"))
    await frames_until(ws, is_status("run", "started"))  # running: not pending, not counted
    for message_id in ("p1", "p2", "p3"):
        await send(ws, message(message_id))
    await frames_until(ws, is_status("p3", "queued"))
    await send(ws, message("p4", "y" * 90_000))
    error = (await frames_until(ws, lambda f: f["type"] == "error"))[-1]["data"]
    assert error["code"] == "queue_full" and error["message_id"] == "p4", error
    assert "AGENTSITE_SESSION_MAX_PENDING" in error["message"]
    response = await rest(
        "POST", f"/api/v1/chat/sessions/{session_id}/messages", key=key, json_body={"content": "z"}
    )
    assert response.status_code == 429, response.text
    assert response.json()["error"]["code"] == "queue_full"
    assert await sync_to_async(stored_user_messages)(session_id) == ["run", "p1", "p2", "p3"]

    await send(ws, {"type": "remove", "message_id": "p1"})  # room again
    await frames_until(ws, is_status("p1", "removed"))
    await send(ws, message("p4"))
    await frames_until(ws, is_status("p4", "queued"))
    entries = await sync_to_async(limit_entries)(user, "queue_full")
    assert len(entries) == 1 and entries[0].details["setting"] == "AGENTSITE_SESSION_MAX_PENDING"
    await ws.disconnect()


@override_settings(AGENTSITE_SESSION_MAX_PENDING=10, AGENTSITE_USER_MAX_PENDING=3)
async def test_a_users_queues_together_take_at_most_the_user_cap(held_chat) -> None:
    user, key, first = held_chat
    second = (await sync_to_async(factories.session)(user)).id
    one, _ = await connect(first, key=key)
    two, _ = await connect(second, key=key)
    await send(one, message("a-run"))
    await frames_until(one, is_status("a-run", "started"))
    await send(two, message("b-run"))
    await frames_until(two, is_status("b-run", "started"))
    await send(one, message("a1"))
    await send(one, message("a2"))
    await frames_until(one, is_status("a2", "queued"))
    response = await rest(
        "POST",
        f"/api/v1/chat/sessions/{second}/messages",
        key=key,
        json_body={"content": "b1", "message_id": "b1"},
    )
    assert response.status_code == 202, response.text
    await send(two, message("b2"))
    error = (await frames_until(two, lambda f: f["type"] == "error"))[-1]["data"]
    assert error["code"] == "queue_full" and "AGENTSITE_USER_MAX_PENDING" in error["message"], error
    response = await rest(
        "POST", f"/api/v1/chat/sessions/{first}/messages", key=key, json_body={"content": "a3"}
    )
    assert response.status_code == 429 and response.json()["error"]["code"] == "queue_full"
    assert await sync_to_async(stored_user_messages)(first) == ["a-run", "a1", "a2"]
    assert await sync_to_async(stored_user_messages)(second) == ["b-run", "b1"]

    # Another user's queues are theirs.
    bob, bob_key = await a_user_with_key("bob")
    bobs = (await sync_to_async(factories.session)(bob)).id
    for content in ("first", "second"):
        response = await rest(
            "POST", f"/api/v1/chat/sessions/{bobs}/messages", key=bob_key, json_body={"content": content}
        )
        assert response.status_code == 202, response.text
    for ws in (one, two):
        await ws.disconnect()
