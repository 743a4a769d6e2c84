"""The queue's REST endpoints (docs/protocol.md §2 "Chat sessions") on the real ASGI app, with the real
runtime.

The views are sync DRF views that reach the live controllers with async_to_sync; driving them with
httpx's ASGI transport in the test's event loop makes them share controllers with the sockets and
with the fake LLM server, which answers the real provider client over HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from agentsite.dev.fake_llm import FakeLLMServer, Reply, ScriptedToolCall
from tests.support.chat_queue import (
    a_use_fake_llm,
    a_user_with_key,
    asgi_client,
    create_session,
    frames_until,
    is_result,
    is_type,
    wait_until,
)
from tests.support.ws import connect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services_rerun]

HOLD = Reply(text="held answer", delay=30)
SLOW = Reply(text="w1 w2 w3 w4 w5 w6 w7 w8", chunk_delay=0.08)


@dataclass
class Rest:
    http: httpx.AsyncClient
    key: str
    session_id: str
    llm: FakeLLMServer

    @property
    def base(self) -> str:
        return f"/chat/sessions/{self.session_id}"

    async def post_message(self, content: str, **extra: Any) -> httpx.Response:
        return await self.http.post(f"{self.base}/messages", json={"content": content, **extra})

    async def snapshot(self) -> dict[str, Any]:
        response = await self.http.get(self.base)
        assert response.status_code == 200, response.text
        return dict(response.json()["snapshot"])

    async def socket(self) -> Any:
        ws, first = await connect(self.session_id, key=self.key)
        assert first["type"] == "connected", first
        return ws


@pytest.fixture
async def rest(fake_llm: FakeLLMServer):  # type: ignore[no-untyped-def]
    _, key = await a_user_with_key("alice")
    await a_use_fake_llm(fake_llm.base_url)
    async with asgi_client(key) as http:
        yield Rest(http=http, key=key, session_id=await create_session(http), llm=fake_llm)


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    return dict(response.json()["error"])


# --- POST messages ------------------------------------------------------------------------------


async def test_post_message_is_202_started_when_idle_and_queued_with_position_while_running(rest):
    rest.llm.script(HOLD)
    first = await rest.post_message("one", message_id="m1")
    assert first.status_code == 202
    assert first.json() == {"message_id": "m1", "status": "started"}
    second = await rest.post_message("two")
    assert second.status_code == 202
    body = second.json()
    assert body["status"] == "queued" and body["position"] == 0
    assert isinstance(body["message_id"], str) and body["message_id"]
    third = await rest.post_message("three", message_id="m3")
    assert third.json() == {"message_id": "m3", "status": "queued", "position": 1}
    snapshot = await rest.snapshot()
    assert snapshot["active_message_id"] == "m1"
    assert [(p["message_id"], p["position"]) for p in snapshot["pending"]] == [
        (body["message_id"], 0),
        ("m3", 1),
    ]


async def test_post_message_with_steer_true_joins_the_running_turn(rest):
    rest.llm.script(SLOW, Reply(text="ok"))
    ws = await rest.socket()
    await rest.post_message("first", message_id="a")
    await frames_until(ws, is_type("delta"))
    response = await rest.post_message("now this", message_id="b", steer=True)
    assert response.status_code == 202
    assert response.json() == {"message_id": "b", "status": "steered"}
    await frames_until(ws, is_result("a", "completed"))
    assert rest.llm.chat_requests[-1]["messages"][-1] == {"role": "user", "content": "now this"}
    await ws.disconnect()


async def test_a_reused_message_id_is_409(rest):
    rest.llm.script(HOLD)
    await rest.post_message("one", message_id="m1")
    assert error_of(await rest.post_message("again", message_id="m1"), 409)["code"] == "duplicate_message_id"


@pytest.mark.parametrize(
    "body, field",
    [
        ({"content": 123}, "content"),
        ({}, "content"),
        ({"content": "hi", "steer": "yes"}, "steer"),
        ({"content": "hi", "message_id": 7}, "message_id"),
        ({"content": "hi", "approval_mode": "sometimes"}, "approval_mode"),
        ({"content": "hi", "config": {"generation": 1}}, "config"),
        # No text holds NUL: no column takes it (on Postgres these were 500s)
        ({"content": "a\x00b"}, "content"),
        ({"content": "hi", "message_id": "m\x00"}, "message_id"),
        ({"content": "hi", "model": "\x00"}, "model"),
        ({"content": "hi", "config": {"generation": {"stop": ["\x00"]}}}, "config"),
        ({"content": "hi", "config": {"generation": {"\x00": 1}}}, "config"),
    ],
)
async def test_post_message_with_wrong_types_is_400_naming_the_field(rest, body, field):
    response = await rest.http.post(f"{rest.base}/messages", json=body)
    error = error_of(response, 400)
    # Paths are dotted, as for cron jobs: a nested problem names its place ("config.generation").
    assert any(name == field or name.startswith(f"{field}.") for name in error.get("fields", {})), error
    assert (await rest.snapshot())["running"] is False


async def test_post_message_content_over_the_limit_is_400_too_long(rest):
    response = await rest.post_message("x" * 100_001)
    assert error_of(response, 400)["code"] == "too_long"


# --- steer, remove --------------------------------------------------------------------------------


async def test_steer_endpoint_hands_a_pending_message_to_the_turn(rest):
    rest.llm.script(SLOW, Reply(text="ok"))
    ws = await rest.socket()
    await rest.post_message("first", message_id="a")
    await rest.post_message("second", message_id="b")
    await frames_until(ws, is_type("delta"))
    response = await rest.http.post(f"{rest.base}/messages/b/steer")
    assert response.status_code == 200, response.text
    assert response.json() == {"message_id": "b", "status": "steered"}
    await frames_until(ws, is_result("a", "completed"))
    assert rest.llm.chat_requests[-1]["messages"][-1] == {"role": "user", "content": "second"}
    await ws.disconnect()


async def test_delete_message_removes_it_and_a_second_delete_is_409_no_longer_pending(rest):
    rest.llm.script(HOLD)
    await rest.post_message("first", message_id="a")
    await rest.post_message("second", message_id="b")
    response = await rest.http.delete(f"{rest.base}/messages/b")
    assert response.status_code == 200, response.text
    assert response.json() == {"message_id": "b", "status": "removed"}
    assert (await rest.snapshot())["pending"] == []
    again = error_of(await rest.http.delete(f"{rest.base}/messages/b"), 409)
    assert again["code"] == "no_longer_pending"


@pytest.mark.parametrize("message_id", ["never-sent", "a"])
async def test_steer_or_delete_of_a_message_that_is_not_pending_is_409(rest, message_id):
    rest.llm.script(HOLD)
    await rest.post_message("running", message_id="a")
    steer = await rest.http.post(f"{rest.base}/messages/{message_id}/steer")
    assert error_of(steer, 409)["code"] == "no_longer_pending"
    delete = await rest.http.delete(f"{rest.base}/messages/{message_id}")
    assert error_of(delete, 409)["code"] == "no_longer_pending"


# --- cancel and "send now" ----------------------------------------------------------------------


async def test_cancel_ends_the_turn_cancelled_and_pauses_until_a_steer_sends_now(rest):
    rest.llm.script(HOLD)
    ws = await rest.socket()
    await rest.post_message("first", message_id="a")
    await rest.post_message("second", message_id="b")
    response = await rest.http.post(f"{rest.base}/cancel")
    assert response.status_code == 200, response.text
    result = (await frames_until(ws, is_result("a")))[-1]
    assert result["data"]["status"] == "cancelled"
    snapshot = await rest.snapshot()
    assert snapshot["paused"] is True and snapshot["running"] is False
    assert [p["message_id"] for p in snapshot["pending"]] == ["b"]
    late = await rest.post_message("third", message_id="c")
    assert late.json() == {"message_id": "c", "status": "queued", "position": 1}

    now = await rest.http.post(f"{rest.base}/messages/b/steer")
    assert now.json() == {"message_id": "b", "status": "started"}
    await frames_until(ws, is_result("c", "completed"))
    assert (await rest.snapshot())["paused"] is False
    await ws.disconnect()


async def test_a_steer_restored_by_cancel_leaves_the_history_and_waits_in_the_queue(rest):
    """Issue 14: a steered message that the model never read went back to the queue, yet GET …/messages
    still listed it, as `pending` (not a status of the history). It is in the snapshot, not the history,
    until its own turn starts."""
    rest.llm.script(HOLD, Reply(text="later"))
    ws = await rest.socket()
    await rest.post_message("first", message_id="a")
    # the turn asks the model: it has its stream, so the steer joins it (before, it would wait `queued`)
    await wait_until(lambda: rest.llm.chat_requests, what="the first turn's model request")
    steered = await rest.post_message("second", message_id="b", steer=True)
    assert steered.json() == {"message_id": "b", "status": "steered"}
    await rest.http.post(f"{rest.base}/cancel")
    await frames_until(ws, lambda event: event.get("status") == "restored")

    history = (await rest.http.get(f"{rest.base}/messages")).json()["results"]
    assert [(m["message_id"], m["status"]) for m in history] == [("a", "cancelled")]
    assert [p["message_id"] for p in (await rest.snapshot())["pending"]] == ["b"]

    await rest.http.post(f"{rest.base}/messages/b/steer")  # send now: its own turn
    await frames_until(ws, is_result("b", "completed"))
    history = (await rest.http.get(f"{rest.base}/messages")).json()["results"]
    assert [(m["message_id"], m["status"]) for m in history if m["role"] == "user"] == [
        ("a", "cancelled"),
        ("b", "completed"),
    ]
    await ws.disconnect()


# --- confirmations ------------------------------------------------------------------------------


async def test_confirmation_reply_then_a_second_reply_is_409_already_resolved(rest):
    rest.llm.script(
        Reply(tool_calls=[ScriptedToolCall(name="write_file", arguments={"path": "n.txt", "content": "hi"})]),
        Reply(text="written"),
    )
    ws = await rest.socket()
    await rest.post_message("write a note", message_id="a")  # approval mode "ask" by default
    request = (await frames_until(ws, is_type("confirmation_request")))[-1]["data"]
    confirmation_id = request["confirmation_id"]
    assert request["tool"] == "write_file"
    assert [c["confirmation_id"] for c in (await rest.snapshot())["confirmations"]] == [confirmation_id]

    bad = await rest.http.post(f"{rest.base}/confirmations/{confirmation_id}", json={"approved": "yes"})
    assert "approved" in error_of(bad, 400).get("fields", {})

    reply = await rest.http.post(f"{rest.base}/confirmations/{confirmation_id}", json={"approved": True})
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"confirmation_id": confirmation_id, "approved": True}
    twice = await rest.http.post(f"{rest.base}/confirmations/{confirmation_id}", json={"approved": False})
    assert error_of(twice, 409)["code"] == "already_resolved"

    frames = await frames_until(ws, is_result("a"))
    resolved = next(f for f in frames if f["type"] == "confirmation_resolved")
    assert resolved["approved"] is True and resolved["by"] == "user"
    tool_result = next(f for f in frames if f["type"] == "tool_result")
    assert tool_result["is_error"] is False
    assert frames[-1]["data"]["status"] == "completed"
    after = await rest.http.post(f"{rest.base}/confirmations/{confirmation_id}", json={"approved": True})
    assert error_of(after, 409)["code"] == "already_resolved"
    await ws.disconnect()


async def test_an_unknown_confirmation_is_404(rest):
    response = await rest.http.post(f"{rest.base}/confirmations/conf_nope", json={"approved": True})
    assert error_of(response, 404)["code"] == "not_found"


# --- closed and foreign sessions ---------------------------------------------------------------


async def test_every_queue_endpoint_of_a_closed_session_is_409(rest):
    rest.llm.script(HOLD)
    await rest.post_message("running", message_id="a")
    await rest.post_message("pending", message_id="b")
    closed = await rest.http.delete(rest.base)
    assert closed.json() == {"session_id": rest.session_id, "status": "closed"}
    calls = [
        rest.http.post(f"{rest.base}/messages", json={"content": "more"}),
        rest.http.post(f"{rest.base}/messages/b/steer"),
        rest.http.delete(f"{rest.base}/messages/b"),
        rest.http.post(f"{rest.base}/cancel"),
        rest.http.post(f"{rest.base}/confirmations/conf_x", json={"approved": True}),
    ]
    for call in calls:
        assert error_of(await call, 409)["code"] == "session_closed"
    history = (await rest.http.get(f"{rest.base}/messages")).json()["results"]
    assert [(m["message_id"], m["status"]) for m in history] == [("a", "cancelled")]


async def test_another_users_session_answers_404_on_every_queue_endpoint(rest):
    _, bob_key = await a_user_with_key("bob")
    async with asgi_client(bob_key) as bob:
        calls = [
            bob.post(f"{rest.base}/messages", json={"content": "hi"}),
            bob.post(f"{rest.base}/messages/x/steer"),
            bob.delete(f"{rest.base}/messages/x"),
            bob.post(f"{rest.base}/cancel"),
            bob.post(f"{rest.base}/confirmations/conf_x", json={"approved": True}),
        ]
        for call in calls:
            assert error_of(await call, 404)["code"] == "not_found"
    snapshot = await rest.snapshot()  # nothing of bob's reached alice's session
    assert snapshot["pending"] == [] and snapshot["running"] is False
