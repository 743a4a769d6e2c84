"""What a reload shows is what the user saw live (agents/recording.py): the text a cancelled or failed turn
had streamed stays in the history, marked as such; thinking is kept with its answer; a long answer is
written down while it streams, so a process that dies leaves it behind (marked `interrupted`)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agents import recording
from agentsite.dev.fake_llm import Reply
from chat.models import Message, Session
from chat.store import DjangoQueueStore
from tests import factories
from tests.support.chat_queue import a_use_fake_llm, a_user_with_key, frames_until, is_result, is_type
from tests.support.ws import connect, rest, send

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services_rerun]


async def assistant_rows(session_id: str) -> list[dict[str, Any]]:
    rows = Message.objects.filter(session_id=session_id, role="assistant").order_by("id")
    return [row.to_dict() for row in await sync_to_async(list)(rows)]


@pytest.fixture
async def chat(fake_llm: Any) -> Any:
    user, key = await a_user_with_key("alice")
    await a_use_fake_llm(fake_llm.base_url)
    session = await sync_to_async(factories.session)(user)
    ws, first = await connect(session.id, key=key)
    assert first["type"] == "connected"
    yield session.id, ws, fake_llm
    await ws.disconnect()


async def test_a_cancelled_turn_keeps_what_it_streamed(chat: Any) -> None:
    session_id, ws, llm = chat
    llm.script(Reply(text="one two three four five six", chunk_delay=0.2))
    await send(ws, {"type": "message", "content": "go", "message_id": "m1"})
    await frames_until(ws, lambda f: f["type"] == "delta" and f["content"].startswith("two"))
    await send(ws, {"type": "cancel"})
    await frames_until(ws, is_result("m1", "cancelled"))
    (row,) = await assistant_rows(session_id)
    assert row["status"] == "cancelled" and row["reply_to"] == "m1"
    assert row["content"].startswith("one two") and "six" not in row["content"]


async def test_a_failed_model_step_keeps_its_partial_text(chat: Any) -> None:
    session_id, ws, llm = chat
    llm.script(Reply(text="alpha beta gamma delta", break_after=2))
    await send(ws, {"type": "message", "content": "go", "message_id": "m1"})
    result = (await frames_until(ws, is_result("m1", "error")))[-1]
    (row,) = await assistant_rows(session_id)
    assert row["status"] == "error" and row["content"] == result["data"]["final_content"] != ""


async def test_why_a_turn_failed_is_kept_with_its_message_and_read_back_over_rest(chat: Any) -> None:
    """A reload says what the live `result` said, not only that the turn failed."""
    session_id, ws, llm = chat
    llm.script(Reply(text="alpha beta", break_after=1))
    await send(ws, {"type": "message", "content": "go", "message_id": "m1"})
    result = (await frames_until(ws, is_result("m1", "error")))[-1]
    error = result["data"]["error"]
    assert error["code"] and error["message"]
    user = await sync_to_async(lambda: Session.objects.get(id=session_id).user)()
    key = await sync_to_async(factories.api_key)(user)
    history = (await rest("GET", f"/api/v1/chat/sessions/{session_id}/messages", key=key)).json()["results"]
    (asked,) = [row for row in history if row["role"] == "user"]
    assert (asked["message_id"], asked["status"], asked["error"]) == ("m1", "error", error)
    assert all("error" not in row for row in history if row["role"] != "user")

    llm.script(Reply(text="fine now"))
    await send(ws, {"type": "message", "content": "again", "message_id": "m2"})  # queued: the queue paused
    await send(ws, {"type": "steer", "message_id": "m2"})  # send now
    await frames_until(ws, is_result("m2", "completed"))
    history = (await rest("GET", f"/api/v1/chat/sessions/{session_id}/messages", key=key)).json()["results"]
    assert [("error" in row) for row in history if row["role"] == "user"] == [True, False]


async def test_thinking_is_kept_with_its_answer(chat: Any) -> None:
    session_id, ws, llm = chat
    llm.script(Reply(reasoning="let me think", text="the answer"))
    await send(ws, {"type": "message", "content": "go", "message_id": "m1"})
    await frames_until(ws, is_type("result"))
    (row,) = await assistant_rows(session_id)
    assert (
        row["reasoning"] == "let me think" and row["content"] == "the answer" and row["status"] == "completed"
    )


async def test_a_long_answer_is_written_down_while_it_streams_and_ends_interrupted_with_its_process(
    chat: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id, ws, llm = chat
    monkeypatch.setattr(recording, "PROGRESS_SECONDS", 0.05)
    llm.script(Reply(text=" ".join(f"w{n}" for n in range(40)), chunk_delay=0.05))
    await send(ws, {"type": "message", "content": "go", "message_id": "m1"})
    await frames_until(ws, lambda f: f["type"] == "delta" and f["content"].startswith("w10"))
    (streaming,) = await assistant_rows(session_id)
    assert streaming["status"] == "streaming" and streaming["content"].startswith("w0 w1")
    # What the next process does for a turn whose process died (chat/live/controller interrupt_stored_turn):
    from agents.contract import ChatRequest
    from chat.live.queue import PendingItem

    store = DjangoQueueStore(session_id, known={"m1"})
    await store.save_message(
        PendingItem(ChatRequest(message_id="m1", content=""), order=-1), status="interrupted"
    )
    (row,) = await assistant_rows(session_id)
    assert row["status"] == "interrupted" and row["content"].startswith("w0 w1")
    await frames_until(ws, is_type("result"))  # the live turn of this test ends normally meanwhile


async def test_input_steered_while_a_step_streams_comes_after_that_step_in_the_history(chat: Any) -> None:
    """The history is the order the model saw: the step that streamed when the steer came, then the steered
    message, then the step that read it (a step's row enters when the step starts, not when written)."""
    session_id, ws, llm = chat
    llm.script(Reply(text="one two three four", chunk_delay=0.15), Reply(text="after the steer"))
    await send(ws, {"type": "message", "content": "go", "message_id": "m1"})
    await frames_until(ws, lambda f: f["type"] == "delta")
    await send(ws, {"type": "message", "content": "also this", "message_id": "m2", "steer": True})
    await frames_until(ws, is_result("m1", "completed"))

    rows = await sync_to_async(list)(
        Message.objects.filter(session_id=session_id)
        .order_by("entered_at", "id")
        .values_list("role", "content")
    )
    assert rows == [
        ("user", "go"),
        ("assistant", "one two three four"),
        ("user", "also this"),
        ("assistant", "after the steer"),
    ]


async def test_a_late_progress_write_does_not_revive_an_answer_marked_interrupted() -> None:
    """The turn of a process that lost its session may still write its progress after the next owner
    marked the answer `interrupted`: the mark stays (the answer's end, when it comes, still writes)."""
    from agents.contract import ChatRequest
    from chat.live.queue import PendingItem
    from chat.store import DjangoTurnRecorder

    user, _ = await a_user_with_key("carol")
    session = await sync_to_async(factories.session)(user)
    store = DjangoQueueStore(session.id)
    await store.save_message(
        PendingItem(ChatRequest(message_id="m1", content="go"), order=0), status="running", new=True
    )
    recorder = DjangoTurnRecorder(session.id, reply_to="m1")
    await recorder.progress("w0 w1", "")
    await store.save_message(
        PendingItem(ChatRequest(message_id="m1", content=""), order=-1), status="interrupted"
    )
    await recorder.progress("w0 w1 w2", "")
    (row,) = await assistant_rows(session.id)
    assert row["status"] == "interrupted" and row["content"] == "w0 w1"
