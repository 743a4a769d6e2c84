"""The per-session queue over the real ASGI app's WebSocket (docs/protocol.md §3.2-3.4), with the real
runtime.

Turns run through `DjangoRuntime` against a fake OpenAI-compatible server over HTTP, so what the model
saw is asserted on the requests it received. A turn is held running with a scripted `delay` (before
the answer) or `chunk_delay` (between streamed words); nothing here waits longer than a condition needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from agentsite.dev.fake_llm import FakeLLMServer, Reply
from chat.live import live_sessions
from tests import factories
from tests.support.chat_queue import (
    a_use_fake_llm,
    a_user_with_key,
    frames_until,
    is_result,
    is_status,
    is_type,
    user_texts,
    wait_until,
)
from tests.support.ws import connect, send

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services_rerun]

HOLD = Reply(text="held answer", delay=30)  # keeps a turn running until the test cancels or ends
SLOW = Reply(text="w1 w2 w3 w4 w5 w6 w7 w8", chunk_delay=0.08)  # streams for ~0.6 s


@dataclass
class Chat:
    session_id: str
    key: str
    user: Any
    llm: FakeLLMServer

    async def socket(self, since: int | None = None) -> tuple[Any, dict[str, Any]]:
        ws, first = await connect(self.session_id, key=self.key, since=since)
        assert first["type"] == "connected", first
        return ws, first


@pytest.fixture
async def chat(fake_llm: FakeLLMServer) -> Chat:
    user, key = await a_user_with_key("alice")
    await a_use_fake_llm(fake_llm.base_url)
    session = await sync_to_async(factories.session)(user)
    return Chat(session_id=session.id, key=key, user=user, llm=fake_llm)


def message(message_id: str, content: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "message_id": message_id,
        "content": content or f"text of {message_id}",
        **extra,
    }


def statuses(frames: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """The queue story of a frame list: (message_id, status[, position]) and ("result", id, status)."""
    story: list[tuple[str, ...]] = []
    for frame in frames:
        if frame["type"] == "message_status":
            entry = (frame["message_id"], frame["status"])
            story.append((*entry, str(frame["position"])) if "position" in frame else entry)
        elif frame["type"] == "result":
            story.append(("result", frame.get("message_id") or "", frame["data"]["status"]))
    return story


# --- submit, FIFO ---------------------------------------------------------------------------


async def test_message_while_idle_starts_and_while_running_is_queued_with_its_position(chat):
    chat.llm.script(HOLD)
    ws, _ = await chat.socket()
    await send(ws, message("a"))
    started = (await frames_until(ws, is_status("a", "started")))[-1]
    assert "position" not in started
    await send(ws, message("b"))
    await send(ws, message("c"))
    frames = await frames_until(ws, is_status("c", "queued"))
    assert statuses(frames) == [("b", "queued", "0"), ("c", "queued", "1")]
    await ws.disconnect()


async def test_follow_ups_run_in_order_and_each_result_comes_before_the_next_started(chat):
    chat.llm.script(Reply(text="answer a", delay=0.3))
    ws, _ = await chat.socket()
    for message_id in ("a", "b", "c"):
        await send(ws, message(message_id))
    frames = await frames_until(ws, is_result("c"))
    assert statuses(frames) == [
        ("a", "started"),
        ("b", "queued", "0"),
        ("c", "queued", "1"),
        ("result", "a", "completed"),
        ("b", "started"),
        ("result", "b", "completed"),
        ("c", "started"),
        ("result", "c", "completed"),
    ]
    finals = [f for f in frames if f["type"] == "final_answer"]
    assert [(f["message_id"], f["content"]) for f in finals] == [
        ("a", "answer a"),
        ("b", "You said: text of b"),
        ("c", "You said: text of c"),
    ]
    assert [user_texts(body)[-1] for body in chat.llm.chat_requests] == [
        "text of a",
        "text of b",
        "text of c",
    ]
    seqs = [f["seq"] for f in frames]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    await ws.disconnect()


# --- steer, remove ------------------------------------------------------------------------


async def test_steered_message_joins_the_running_turn_and_the_model_sees_it(chat):
    chat.llm.script(SLOW, Reply(text="saw both"))
    ws, _ = await chat.socket()
    await send(ws, message("a", "first question"))
    await send(ws, message("b", "and also this"))
    await frames_until(ws, is_type("delta"))  # the turn is streaming: a steer goes straight in
    await send(ws, {"type": "steer", "message_id": "b"})
    frames = await frames_until(ws, is_result("a"))
    assert ("b", "steered") in statuses(frames)
    steered = next(f for f in frames if is_status("b", "steered")(f))
    assert "position" not in steered
    assert frames[-1]["data"]["status"] == "completed"
    assert frames[-1]["data"]["final_content"] == "saw both"
    requests = chat.llm.chat_requests
    assert len(requests) == 2, "the steered text takes one more model step in the same turn"
    assert user_texts(requests[0])[-1] == "first question"
    assert user_texts(requests[1])[-2:] == ["first question", "and also this"]
    _, snapshot_frame = await chat.socket()
    assert snapshot_frame["snapshot"]["pending"] == []
    assert snapshot_frame["snapshot"]["running"] is False
    await ws.receive_nothing(timeout=0.2)  # b never starts a turn of its own
    await ws.disconnect()


async def test_steer_true_on_a_message_submits_and_steers_in_one_step(chat):
    chat.llm.script(SLOW, Reply(text="ok"))
    ws, _ = await chat.socket()
    await send(ws, message("a", "first question"))
    await frames_until(ws, is_type("delta"))
    await send(ws, message("b", "right now please", steer=True))
    frames = await frames_until(ws, is_result("a"))
    assert [s for s in statuses(frames) if s[0] == "b"] == [("b", "steered")]
    assert user_texts(chat.llm.chat_requests[-1])[-1] == "right now please"
    await ws.disconnect()


async def test_remove_drops_a_pending_message(chat):
    chat.llm.script(HOLD)
    ws, _ = await chat.socket()
    await send(ws, message("a"))
    await send(ws, message("b"))
    await send(ws, message("c"))
    await frames_until(ws, is_status("c", "queued"))
    await send(ws, {"type": "remove", "message_id": "b"})
    removed = (await frames_until(ws, is_status("b", "removed")))[-1]
    assert "seq" in removed
    other, first = await chat.socket()
    assert [p["message_id"] for p in first["snapshot"]["pending"]] == ["c"]
    assert first["snapshot"]["pending"][0]["position"] == 0
    await ws.disconnect()
    await other.disconnect()


async def test_steer_or_remove_of_a_message_that_is_not_pending_errors_only_on_the_sending_socket(chat):
    chat.llm.script(HOLD)
    ws, _ = await chat.socket()
    bystander, _ = await chat.socket()
    await send(ws, message("a"))
    await send(ws, message("b"))
    await send(ws, {"type": "remove", "message_id": "b"})
    for socket in (ws, bystander):
        await frames_until(socket, is_status("b", "removed"))
    # unknown, started (the running one) and removed messages are all "no longer pending"
    for kind in ("steer", "remove"):
        for message_id in ("never-sent", "a", "b"):
            await send(ws, {"type": kind, "message_id": message_id})
            error = await ws.receive_json_from()
            assert error["type"] == "error"
            assert error["data"]["code"] == "no_longer_pending"
            assert error["data"]["message_id"] == message_id
            assert message_id in error["data"]["message"]
            assert "seq" not in error
    await bystander.receive_nothing(timeout=0.2)
    await ws.disconnect()
    await bystander.disconnect()


async def test_steer_or_remove_of_another_sessions_pending_message_is_no_longer_pending(chat):
    chat.llm.script(HOLD)
    other = await sync_to_async(factories.session)(chat.user)
    owner, _ = await connect(other.id, key=chat.key)
    await send(owner, message("x"))
    await send(owner, message("theirs"))
    await frames_until(owner, is_status("theirs", "queued"))
    ws, _ = await chat.socket()
    for kind in ("steer", "remove"):
        await send(ws, {"type": kind, "message_id": "theirs"})
        error = await ws.receive_json_from()
        assert error["data"]["code"] == "no_longer_pending"
    _, first = await connect(other.id, key=chat.key)
    assert [p["message_id"] for p in first["snapshot"]["pending"]] == ["theirs"]
    await owner.receive_nothing(timeout=0.1)
    await owner.disconnect()
    await ws.disconnect()


async def test_a_steered_message_cannot_be_steered_or_removed_again(chat):
    chat.llm.script(SLOW)
    ws, _ = await chat.socket()
    await send(ws, message("a"))
    await send(ws, message("b"))
    await frames_until(ws, is_type("delta"))
    await send(ws, {"type": "steer", "message_id": "b"})
    await frames_until(ws, is_status("b", "steered"))
    for kind in ("steer", "remove"):
        await send(ws, {"type": kind, "message_id": "b"})
        error = (await frames_until(ws, is_type("error")))[-1]
        assert error["data"]["code"] == "no_longer_pending"
        assert error["data"]["message_id"] == "b"
    await ws.disconnect()


# --- cancel, errors, pause ------------------------------------------------------------------


async def test_cancel_mid_turn_keeps_the_queue_paused_until_send_now(chat):
    chat.llm.script(HOLD)
    ws, _ = await chat.socket()
    await send(ws, message("a"))
    await send(ws, message("b"))
    await frames_until(ws, is_status("b", "queued"))
    await send(ws, {"type": "cancel"})
    result = (await frames_until(ws, is_result()))[-1]
    assert result["message_id"] == "a"
    assert result["data"]["status"] == "cancelled"

    late, first = await chat.socket()
    snapshot = first["snapshot"]
    assert snapshot["running"] is False
    assert snapshot["paused"] is True
    assert snapshot["active_message_id"] is None
    assert snapshot["pending"] == [
        {"message_id": "b", "content": "text of b", "position": 0, "steer_requested": False}
    ]

    await send(late, message("c"))
    queued = (await frames_until(late, is_status("c", "queued")))[-1]
    assert queued["position"] == 1, "a paused queue queues new messages instead of starting them"
    await late.receive_nothing(timeout=0.2)

    await send(late, {"type": "steer", "message_id": "b"})  # "send now" resumes the queue
    frames = await frames_until(late, is_result("c"))
    assert statuses(frames) == [
        ("b", "started"),
        ("result", "b", "completed"),
        ("c", "started"),
        ("result", "c", "completed"),
    ]
    assert user_texts(chat.llm.chat_requests[-1])[-1] == "text of c"
    await ws.disconnect()
    await late.disconnect()


async def test_a_model_error_ends_the_turn_with_a_readable_error_and_pauses_the_queue(chat):
    failure = {"status": 500, "error_message": "upstream exploded", "retry_after_ms": 1}
    chat.llm.script(Reply(**failure, delay=0.3))
    chat.llm.default = Reply(**failure)  # the client's retries fail too
    ws, _ = await chat.socket()
    await send(ws, message("a"))
    await send(ws, message("b"))
    frames = await frames_until(ws, is_result("a"))
    assert statuses(frames) == [("a", "started"), ("b", "queued", "0"), ("result", "a", "error")]
    error = frames[-1]["data"]["error"]
    assert error["code"] and isinstance(error["message"], str)
    assert "Fake" in error["message"] and "fake-model" in error["message"], error

    _, first = await chat.socket()
    assert first["snapshot"]["paused"] is True
    assert [p["message_id"] for p in first["snapshot"]["pending"]] == ["b"]
    await send(ws, message("c"))
    assert (await frames_until(ws, is_status("c", "queued")))[-1]["position"] == 1
    await ws.receive_nothing(timeout=0.2)

    chat.llm.default = Reply()  # the provider recovers; "send now" resumes
    await send(ws, {"type": "steer", "message_id": "b"})
    frames = await frames_until(ws, is_result("c"))
    assert [s for s in statuses(frames) if s[0] == "result"] == [
        ("result", "b", "completed"),
        ("result", "c", "completed"),
    ]
    await ws.disconnect()


# --- several sockets, reconnects, snapshots --------------------------------------------------


async def test_several_sockets_see_identical_event_sequences(chat):
    chat.llm.script(Reply(text="one two three four", chunk_delay=0.02))
    sockets = [(await chat.socket())[0] for _ in range(3)]
    await send(sockets[0], message("a"))
    await send(sockets[1], message("b"))
    await send(sockets[2], {"type": "remove", "message_id": "nobody"})  # its error is private
    seen = [await frames_until(ws, is_result("b")) for ws in sockets]
    public = [[f for f in frames if f["type"] != "error"] for frames in seen]
    assert public[0] == public[1] == public[2]
    seqs = [f["seq"] for f in public[0]]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "one session's seqs have no gaps"
    assert [f["type"] for f in seen[2] if f["type"] == "error"] == ["error"]
    assert all(f["type"] != "error" for f in seen[0] + seen[1])
    for ws in sockets:
        await ws.disconnect()


async def test_reconnecting_with_since_mid_turn_replays_the_missed_events(chat):
    words = [f"w{i}" for i in range(12)]
    chat.llm.script(Reply(text=" ".join(words), chunk_delay=0.03))
    ws, _ = await chat.socket()
    await send(ws, message("a"))
    before = await frames_until(ws, lambda f: f["type"] == "delta" and f["content"].startswith("w1"))
    last_seen = before[-1]["seq"]
    await ws.disconnect()

    log = live_sessions().registry.log(chat.session_id)
    await wait_until(lambda: log.last_seq > last_seen + 2, what="events published while away")
    again, first = await chat.socket(since=last_seen)
    assert first["last_seq"] >= last_seen
    after = await frames_until(again, is_result("a"))
    seqs = [f["seq"] for f in before + after]
    assert seqs == list(range(seqs[0], seqs[-1] + 1)), "nothing missed, nothing doubled"
    text = "".join(f["content"] for f in before + after if f["type"] == "delta")
    assert text == " ".join(words)
    await again.disconnect()


async def test_snapshot_pending_entries_carry_id_content_position_and_steer_requested(chat, fake_llm):
    # One turn slot for the whole process: a second session's turn waits for it without a stream, so a
    # steer there is remembered (steer_requested) until the turn starts streaming.
    with override_settings(AGENTSITE_MAX_CONCURRENT_TURNS=1):
        chat.llm.script(HOLD)
        busy_ws, _ = await chat.socket()
        await send(busy_ws, message("busy"))
        await frames_until(busy_ws, is_status("busy", "started"))

        other = await sync_to_async(factories.session)(chat.user)
        ws, _ = await connect(other.id, key=chat.key)
        await send(ws, message("a"))
        await send(ws, message("b", "second"))
        await send(ws, message("c", "third"))
        await frames_until(ws, is_status("c", "queued"))
        await send(ws, {"type": "steer", "message_id": "c"})
        await send(ws, {"type": "ping"})
        assert (await ws.receive_json_from())["type"] == "pong"  # the steer was handled, silently

        _, first = await connect(other.id, key=chat.key)
        snapshot = first["snapshot"]
        assert snapshot["running"] is True
        assert snapshot["active_message_id"] == "a"
        assert snapshot["pending"] == [
            {"message_id": "b", "content": "second", "position": 0, "steer_requested": False},
            {"message_id": "c", "content": "third", "position": 1, "steer_requested": True},
        ]
        await busy_ws.disconnect()
        await ws.disconnect()
