"""The chat WebSocket on the real ASGI application (docs/protocol.md §3.1–3.3): auth, validation, a first
turn."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import override_settings

from accounts.models import ApiKey
from accounts.services import api_key_revoke
from chat.live import live_sessions, reset_live_sessions
from tests import factories
from tests.support.ws import closed_with, connect, receive_until, rest, send

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services_rerun]


@pytest.fixture
async def session(alice):  # type: ignore[no-untyped-def]
    return await sync_to_async(factories.session)(alice)


# --- connection and session validation ------------------------------------------------


async def test_connected_event_carries_session_snapshot_and_last_seq(session, alice_key):
    ws, first = await connect(session.id, key=alice_key)
    assert first["type"] == "connected"
    assert first["session_id"] == session.id
    assert first["snapshot"] == {
        "running": False,
        "paused": False,
        "active_message_id": None,
        "pending": [],
        "confirmations": [],
    }
    assert isinstance(first["last_seq"], int)
    await ws.disconnect()


async def test_unknown_session_is_not_found_and_closed_4404(alice_key, db):
    ws, first = await connect("nonexistent-session", key=alice_key)
    assert first["type"] == "error"
    assert first["data"]["code"] == "not_found"
    assert "not found" in first["data"]["message"].lower()
    assert await closed_with(ws) == 4404


async def test_session_id_that_cannot_exist_is_not_found(alice_key, db):
    ws, first = await connect("bad%20id%20with%20spaces", key=alice_key)
    assert first["data"]["code"] == "not_found"
    assert await closed_with(ws) == 4404


async def test_another_users_session_answers_like_a_missing_one(session, bob_key):
    ws, first = await connect(session.id, key=bob_key)
    assert first["data"] == {"code": "not_found", "message": f"Session {session.id} not found"}
    assert await closed_with(ws) == 4404


async def test_closed_session_is_refused_with_4410(session, alice_key, api):
    response = await rest("DELETE", f"/api/v1/chat/sessions/{session.id}", key=alice_key)
    assert response.status_code == 200
    ws, first = await connect(session.id, key=alice_key)
    assert first["data"]["code"] == "closed"
    assert "closed" in first["data"]["message"].lower()
    assert await closed_with(ws) == 4410


# --- authentication ---------------------------------------------------------------------


async def test_missing_api_key_is_unauthorized(session):
    ws, first = await connect(session.id)
    assert first["type"] == "error"
    assert first["data"]["code"] == "unauthorized"
    assert "api_key" in first["data"]["message"].lower()
    assert await closed_with(ws) == 4401


async def test_wrong_api_key_is_unauthorized(session):
    ws, first = await connect(session.id, key="ask_" + "x" * 40)
    assert first["data"]["code"] == "unauthorized"
    assert "api_key" in first["data"]["message"].lower()
    assert await closed_with(ws) == 4401


async def test_revoked_api_key_is_unauthorized(session, alice_key):
    await sync_to_async(ApiKey.objects.update)(revoked_at="2026-01-01T00:00:00Z")
    ws, first = await connect(session.id, key=alice_key)
    assert first["data"]["code"] == "unauthorized"
    assert await closed_with(ws) == 4401


async def test_a_key_revoked_while_connected_closes_the_socket_with_no_frame_sent(session, alice_key):
    ws, first = await connect(session.id, key=alice_key)
    assert first["type"] == "connected"
    key = await sync_to_async(ApiKey.objects.get)()
    await sync_to_async(api_key_revoke)(key=key)  # as DELETE /auth/keys/{id} and the admin do
    frame = await ws.receive_json_from(timeout=2)
    assert frame == {"type": "error", "data": {"code": "unauthorized", "message": "The api_key was revoked."}}
    assert await closed_with(ws) == 4401


async def test_what_was_published_before_the_account_ended_still_reaches_the_socket_first(session, alice_key):
    """Frames already queued for the socket when its credential ends are sent, then the error and 4401."""
    ws, first = await connect(session.id, key=alice_key)
    assert first["type"] == "connected"
    live = live_sessions()
    (consumer,) = list(live.accounts._credentials)
    audience = live.registry.controllers[session.id]._audience  # what a turn's events go through
    published = {"type": "delta", "content": "already on its way", "message_id": "m0"}
    audience.emit(published)
    consumer.account_ended("The api_key was revoked.")  # in the same tick: both wait in its queue
    frame = await ws.receive_json_from(timeout=2)
    assert frame["type"] == "delta" and frame["seq"] == published["seq"]
    frame = await ws.receive_json_from(timeout=2)
    assert frame == {"type": "error", "data": {"code": "unauthorized", "message": "The api_key was revoked."}}
    assert await closed_with(ws) == 4401


async def test_a_key_revoked_behind_the_servers_back_closes_the_socket_within_2_s(session, alice_key):
    ws, first = await connect(session.id, key=alice_key)
    assert first["type"] == "connected"
    await sync_to_async(ApiKey.objects.update)(revoked_at="2026-01-01T00:00:00Z")  # no signal: the sweep
    frame = await ws.receive_json_from(timeout=2.5)
    assert frame["data"]["code"] == "unauthorized"
    assert await closed_with(ws) == 4401


async def test_frames_after_the_account_ended_are_ignored(session, alice, alice_key):
    ws, _ = await connect(session.id, key=alice_key)
    alice.is_active = False
    await sync_to_async(alice.save)()
    frame = await ws.receive_json_from(timeout=2)
    assert frame["data"]["code"] == "unauthorized" and "deactivated" in frame["data"]["message"]
    await send(ws, {"type": "message", "content": "too late", "message_id": "late"})
    assert await closed_with(ws) == 4401
    await send(ws, {"type": "ping"})
    assert await ws.receive_nothing(timeout=0.3)
    assert not await sync_to_async(session.messages.filter(message_id="late").exists)()


@override_settings(AGENTSITE_AUTH="open")
async def test_open_mode_admits_anonymous_sockets_as_local_but_still_rejects_a_wrong_key(db):
    from accounts.services import local_user

    local = await sync_to_async(local_user)()
    session = await sync_to_async(factories.session)(local)
    ws, first = await connect(session.id)
    assert first["type"] == "connected"
    await ws.disconnect()
    ws, first = await connect(session.id, key="ask_wrong")
    assert first["data"]["code"] == "unauthorized"
    assert await closed_with(ws) == 4401


async def _session_cookie(user) -> bytes:  # type: ignore[no-untyped-def]
    from django.test import Client

    client = Client()
    await sync_to_async(client.force_login)(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def test_cookie_auth_from_an_allowed_origin_is_accepted(session, alice):
    cookie = await _session_cookie(alice)
    ws, first = await connect(
        session.id,
        headers=[(b"cookie", cookie), (b"host", b"localhost:8000"), (b"origin", b"http://localhost:8000")],
    )
    assert first["type"] == "connected"
    await ws.disconnect()


async def test_cookie_auth_without_origin_is_not_accepted(session, alice):
    cookie = await _session_cookie(alice)
    ws, first = await connect(session.id, headers=[(b"cookie", cookie)])
    assert first["data"]["code"] == "unauthorized"


async def test_a_socket_from_a_foreign_origin_is_refused_at_the_handshake(session, alice):
    from channels.testing import WebsocketCommunicator

    from agentsite.asgi import application

    cookie = await _session_cookie(alice)
    ws = WebsocketCommunicator(
        application,
        f"/api/v1/chat/ws/{session.id}",
        headers=[(b"cookie", cookie), (b"origin", b"https://evil.example")],
    )
    connected, _ = await ws.connect()
    assert not connected


# --- frames ---------------------------------------------------------------------------------


async def test_ping_returns_pong(session, alice_key):
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "ping"})
    assert await ws.receive_json_from() == {"type": "pong"}
    await ws.disconnect()


async def test_cancel_while_idle_answers_result_cancelled_and_the_socket_stays_open(session, alice_key):
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "cancel"})
    result = await ws.receive_json_from()
    assert result["type"] == "result"
    assert result["data"]["status"] == "cancelled"
    assert isinstance(result["seq"], int)
    await send(ws, {"type": "ping"})
    assert (await ws.receive_json_from())["type"] == "pong"
    await ws.disconnect()


async def test_message_streams_deltas_then_final_answer_then_result(session, alice_key):
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "message", "content": "hello", "message_id": "m-1"})
    started, _ = await receive_until(ws, "message_status", status="started")
    assert started["message_id"] == "m-1"
    final, before = await receive_until(ws, "final_answer")
    deltas = [frame for frame in before if frame["type"] == "delta"]
    assert len(deltas) > 3, "the demo model streams its reply in several deltas"
    assert all(frame["message_id"] == "m-1" for frame in deltas)
    assert final["is_final"] is True
    assert "".join(frame["content"] for frame in deltas) == final["content"]
    assert "demo model" in final["content"] and "hello" in final["content"]
    result, _ = await receive_until(ws, "result")
    assert result["message_id"] == "m-1"
    assert result["data"]["status"] == "completed"
    seqs = [frame["seq"] for frame in [started, *before, final, result]]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    await ws.disconnect()


async def test_the_turn_is_stored_as_messages(session, alice_key, api):
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "message", "content": "remember me", "message_id": "m-1"})
    await receive_until(ws, "result")
    await ws.disconnect()
    response = await sync_to_async(api(alice_key).get)(f"/api/v1/chat/sessions/{session.id}/messages")
    rows = response.json()["results"]
    assert [(row["role"], row["status"]) for row in rows] == [
        ("user", "completed"),
        ("assistant", "completed"),
    ]
    assert rows[0]["content"] == "remember me" and rows[0]["message_id"] == "m-1"
    assert "demo model" in rows[1]["content"]


async def test_text_that_is_not_json_is_ignored(session, alice_key):
    ws, _ = await connect(session.id, key=alice_key)
    await ws.send_to(text_data="not valid json {{{")
    await send(ws, {"type": "ping"})
    assert (await ws.receive_json_from())["type"] == "pong"
    await ws.disconnect()


async def test_unknown_frame_types_are_ignored(session, alice_key):
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "unknown_type", "data": "whatever"})
    await send(ws, ["a", "list"])  # type: ignore[arg-type]
    await send(ws, {"type": "ping"})
    assert (await ws.receive_json_from())["type"] == "pong"
    await ws.disconnect()


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "message", "content": 123},
        {"type": "message"},
        {"type": "message", "content": "hi", "steer": "yes"},
        {"type": "message", "content": "hi", "message_id": ""},
        {"type": "message", "content": "hi", "approval_mode": "sudo"},
        {"type": "steer"},
        {"type": "remove", "message_id": 7},
        {"type": "confirmation_reply", "confirmation_id": "c", "approved": "true"},
    ],
)
async def test_malformed_known_frames_get_invalid_frame_and_the_socket_stays_open(session, alice_key, frame):
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, frame)
    error = await ws.receive_json_from()
    assert error["type"] == "error"
    assert error["data"]["code"] == "invalid_frame"
    assert error["data"]["message"]
    await send(ws, {"type": "ping"})
    assert (await ws.receive_json_from())["type"] == "pong"
    await ws.disconnect()


async def test_content_over_the_limit_is_too_long(session, alice_key):
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "message", "content": "x" * 100_001})
    error = await ws.receive_json_from()
    assert error["data"]["code"] == "too_long"
    await ws.disconnect()


@override_settings(AGENTSITE_WS_MAX_FRAME_BYTES=2048)
async def test_oversized_frame_closes_the_socket_with_1009(session, alice_key):
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "message", "content": "x" * 4096})
    assert await closed_with(ws) == 1009


async def test_steer_of_an_unknown_message_is_no_longer_pending(session, alice_key):
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "steer", "message_id": "nope"})
    error = await ws.receive_json_from()
    assert error["data"]["code"] == "no_longer_pending"
    assert error["data"]["message_id"] == "nope"
    await ws.disconnect()


async def test_a_reused_message_id_is_refused(session, alice_key):
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "message", "content": "one", "message_id": "same"})
    await receive_until(ws, "result")
    await send(ws, {"type": "message", "content": "two", "message_id": "same"})
    error, _ = await receive_until(ws, "error")
    assert error["data"]["code"] == "duplicate_message_id"
    await ws.disconnect()


# --- isolation, registry, replay ------------------------------------------------------------


async def test_sessions_are_isolated(alice, alice_key):
    one = await sync_to_async(factories.session)(alice)
    two = await sync_to_async(factories.session)(alice)
    ws1, first1 = await connect(one.id, key=alice_key)
    ws2, first2 = await connect(two.id, key=alice_key)
    assert (first1["session_id"], first2["session_id"]) == (one.id, two.id)
    await send(ws1, {"type": "message", "content": "only for one"})
    await receive_until(ws1, "result")
    await send(ws2, {"type": "ping"})
    assert (await ws2.receive_json_from())["type"] == "pong"
    assert await ws2.receive_nothing(timeout=0.2)
    await ws1.disconnect()
    await ws2.disconnect()


async def test_open_connections_are_tracked_and_forgotten_on_disconnect(session, alice_key):
    live = live_sessions()
    assert live.sockets.count(session.id) == 0
    ws, _ = await connect(session.id, key=alice_key)
    assert live.sockets.count(session.id) == 1
    ws2, _ = await connect(session.id, key=alice_key)
    assert live.sockets.count(session.id) == 2
    await ws.disconnect()
    await ws2.disconnect()
    assert live.sockets.count(session.id) == 0


async def test_deleting_a_session_closes_its_sockets(session, alice_key, api):
    ws, _ = await connect(session.id, key=alice_key)
    response = await rest("DELETE", f"/api/v1/chat/sessions/{session.id}", key=alice_key)
    assert response.json() == {"session_id": session.id, "status": "closed"}
    frame, _ = await receive_until(ws, "error")
    assert frame["data"]["code"] == "closed"
    assert await closed_with(ws) == 4410


async def test_every_socket_of_a_session_sees_every_event_in_seq_order(session, alice_key):
    ws1, _ = await connect(session.id, key=alice_key)
    ws2, _ = await connect(session.id, key=alice_key)
    await send(ws1, {"type": "message", "content": "fan out"})
    _, seen1 = await receive_until(ws1, "result")
    _, seen2 = await receive_until(ws2, "result")
    assert [f["seq"] for f in seen1] == [f["seq"] for f in seen2]
    await ws1.disconnect()
    await ws2.disconnect()


async def test_reconnecting_with_since_replays_what_was_missed(session, alice_key):
    ws, first = await connect(session.id, key=alice_key)
    start = first["last_seq"]
    await send(ws, {"type": "message", "content": "replay me"})
    result, before = await receive_until(ws, "result")
    await ws.disconnect()
    missed_from = before[2]["seq"]
    ws, first = await connect(session.id, key=alice_key, since=missed_from)
    assert first["type"] == "connected" and first["last_seq"] == result["seq"]
    replayed = [await ws.receive_json_from() for _ in range(result["seq"] - missed_from)]
    assert [f["seq"] for f in replayed] == list(range(missed_from + 1, result["seq"] + 1))
    assert replayed[-1] == result
    assert await ws.receive_nothing(timeout=0.1)
    await ws.disconnect()
    assert start < missed_from


async def test_since_older_than_what_this_process_retains_gets_resync_or_the_shared_replay(
    session, alice_key
):
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "cancel"})
    earlier, _ = await receive_until(ws, "result")
    await ws.disconnect()
    # A restart: this process keeps nothing of the session's past events.
    await reset_live_sessions()
    ws, first = await connect(session.id, key=alice_key)
    await send(ws, {"type": "cancel"})
    cancelled, _ = await receive_until(ws, "result")
    await ws.disconnect()
    ws, first = await connect(session.id, key=alice_key, since=0)
    after = await ws.receive_json_from()
    if settings.REDIS_URL:
        # Several processes share a replay store (Redis): what was published is still there, from before
        # the restart too (the seqs jump over the dead process's block: not a loss).
        assert [after, await ws.receive_json_from()] == [earlier, cancelled]
        assert cancelled["seq"] > earlier["seq"] + 1
    else:
        assert after["type"] == "resync"
        assert after["last_seq"] == first["last_seq"]
        assert after["snapshot"]["running"] is False
    await ws.disconnect()


async def test_an_idle_session_is_dropped_from_memory_and_comes_back_with_its_last_run(session, alice_key):
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "message", "content": "before the nap", "message_id": "n1"})
    result, before = await receive_until(ws, "result")
    await ws.disconnect()
    live = live_sessions()
    assert await live.evict_idle(idle_for=0) == 1
    assert live.registry.peek(session.id) is None
    ws, first = await connect(session.id, key=alice_key, since=before[0]["seq"] - 1)
    assert first["snapshot"]["running"] is False
    replay = [await ws.receive_json_from() for _ in range(len(before) + 1)]
    assert replay == [*before, result], "the last run's events are still there for ?since="
    await send(ws, {"type": "message", "content": "after the nap", "message_id": "n2"})
    again, _ = await receive_until(ws, "result")
    assert again["seq"] > result["seq"]
    await ws.disconnect()


async def test_only_the_most_recently_used_idle_sessions_keep_their_last_run(alice, alice_key, monkeypatch):
    from chat.live import registry as registry_module

    monkeypatch.setattr(registry_module.LiveRegistry.cap_dormant_logs, "__defaults__", (2,))
    sessions = [await sync_to_async(factories.session)(alice) for _ in range(3)]
    for n, chat_session in enumerate(sessions):
        ws, _ = await connect(chat_session.id, key=alice_key)
        await send(ws, {"type": "message", "content": f"hello {n}"})
        await receive_until(ws, "result")
        await ws.disconnect()
    live = live_sessions()
    assert await live.evict_idle(idle_for=0) == 3
    if settings.REDIS_URL:  # with several processes an idle session's events live in the replay store only
        assert not set(live.registry.logs) & {s.id for s in sessions}
        return
    assert set(live.registry.logs) == {sessions[1].id, sessions[2].id}, "the least recently used one went"
    ws, first = await connect(sessions[0].id, key=alice_key, since=1)
    assert (await ws.receive_json_from())["type"] == "resync"
    await send(ws, {"type": "message", "content": "still works"})
    result, _ = await receive_until(ws, "result")
    assert result["data"]["status"] == "completed" and result["seq"] > first["last_seq"]
    await ws.disconnect()


async def test_a_session_with_a_socket_or_a_queue_is_never_evicted(session, alice_key):
    ws, _ = await connect(session.id, key=alice_key)
    assert await live_sessions().evict_idle(idle_for=0) == 0
    await ws.disconnect()


async def test_beyond_the_live_cap_idle_sessions_with_one_run_are_dropped_and_still_replay(
    alice, alice_key, monkeypatch
):
    """Issue 18: an integration that opens a chat per request leaves thousands of idle sessions; beyond
    LIVE_KEPT the idle ones whose events are only their last run are dropped at once (their last run stays
    for ?since=, as for any idle session)."""
    from chat.live import sessions as sessions_module

    monkeypatch.setattr(sessions_module, "LIVE_KEPT", 2)
    sessions = [await sync_to_async(factories.session)(alice) for _ in range(4)]
    results = []
    for n, chat_session in enumerate(sessions):
        ws, _ = await connect(chat_session.id, key=alice_key)
        await send(ws, {"type": "message", "content": f"hello {n}"})
        results.append((await receive_until(ws, "result"))[0])
        await ws.disconnect()
    live = live_sessions()
    for _ in range(50):
        if len(live.registry.controllers) <= 2:
            break
        await asyncio.sleep(0.02)
    assert len(live.registry.controllers) <= 2
    assert sessions[-1].id in live.registry.controllers, "the most recently used stay"
    if settings.REDIS_URL:  # with several processes an idle session's events live in the replay store
        return
    assert sessions[0].id not in live.registry.controllers and sessions[0].id in live.registry.logs
    ws, first = await connect(sessions[0].id, key=alice_key, since=1)
    assert first["last_seq"] == results[0]["seq"]
    replayed = await ws.receive_json_from()
    assert replayed["type"] != "resync" and replayed["seq"] == 2, "its last run is still there"
    await ws.disconnect()
