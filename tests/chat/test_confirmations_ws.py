"""Approvals over the socket through the real runtime, the fake model and the real tools (docs/protocol.md
§3.5).

The intent of the seed's confirmation flows: approve → the tool runs and the model sees its output;
reject → the model sees a refusal and the turn completes.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from agents.sandbox.site import workspace_dir
from agentsite.dev.fake_llm import Reply
from tests import factories
from tests.support.ws import connect, receive_until, send


def workspace_of(session: Any) -> Any:
    return workspace_dir(user_id=session.user_id, session_id=session.id)


pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services_rerun]

WRITE = {"tool_calls": [{"name": "write_file", "arguments": {"path": "note.txt", "content": "written"}}]}


@pytest.fixture
async def session(alice):  # type: ignore[no-untyped-def]
    return await sync_to_async(factories.session)(alice)


def _tool_messages(request: dict) -> list[dict]:  # type: ignore[type-arg]
    return [m for m in request["messages"] if m["role"] == "tool"]


async def test_approving_a_dangerous_call_runs_the_tool_and_the_model_sees_its_output(
    session, alice_key, llm
):
    llm.script(Reply(**WRITE), Reply(text="The note is written."))
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "message", "content": "write a note", "message_id": "m1"})
    request, _ = await receive_until(ws, "confirmation_request")
    data = request["data"]
    assert data["kind"] == "tool" and data["tool"] == "write_file"
    assert data["arguments"] == {"path": "note.txt", "content": "written"}
    assert data["reason"]
    assert not (workspace_of(session) / "note.txt").exists(), "nothing runs before the approval"
    await send(
        ws, {"type": "confirmation_reply", "confirmation_id": data["confirmation_id"], "approved": True}
    )
    resolved, _ = await receive_until(ws, "confirmation_resolved")
    assert resolved["approved"] is True and resolved["by"] == "user"
    result, _ = await receive_until(ws, "tool_result")
    assert result["is_error"] is False and result["name"] == "write_file"
    final, _ = await receive_until(ws, "final_answer")
    assert final["content"] == "The note is written."
    assert (workspace_of(session) / "note.txt").read_text() == "written"
    second = llm.chat_requests[1]
    assert _tool_messages(second) and not _tool_messages(second)[0]["content"].startswith("Refused")
    await ws.disconnect()


async def test_refusing_a_dangerous_call_tells_the_model_and_the_turn_completes(session, alice_key, llm):
    llm.script(Reply(**WRITE), Reply(text="Understood, I did not write it."))
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "message", "content": "write a note"})
    request, _ = await receive_until(ws, "confirmation_request")
    await send(
        ws,
        {
            "type": "confirmation_reply",
            "confirmation_id": request["data"]["confirmation_id"],
            "approved": False,
        },
    )
    result, _ = await receive_until(ws, "tool_result")
    assert result["is_error"] is True
    done, _ = await receive_until(ws, "result")
    assert done["data"]["status"] == "completed"
    assert not (workspace_of(session) / "note.txt").exists()
    refusal = _tool_messages(llm.chat_requests[1])[0]["content"]
    assert "refused" in refusal.lower()
    await ws.disconnect()


async def test_a_client_that_connects_while_a_confirmation_waits_sees_it_and_can_answer(
    session, alice_key, llm
):
    llm.script(Reply(**WRITE), Reply(text="ok"))
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "message", "content": "write"})
    request, _ = await receive_until(ws, "confirmation_request")
    late, connected = await connect(session.id, key=alice_key)
    assert connected["snapshot"]["confirmations"] == [request["data"]]
    await send(
        late,
        {
            "type": "confirmation_reply",
            "confirmation_id": request["data"]["confirmation_id"],
            "approved": True,
        },
    )
    resolved, _ = await receive_until(
        ws, "confirmation_resolved"
    )  # the first tab sees the other tab's answer
    assert resolved["by"] == "user"
    await receive_until(ws, "result")
    await ws.disconnect()
    await late.disconnect()


async def test_answering_twice_or_an_unknown_confirmation_is_an_error(session, alice_key, llm):
    llm.script(Reply(**WRITE), Reply(text="ok"))
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "confirmation_reply", "confirmation_id": "nope", "approved": True})
    error = await ws.receive_json_from()
    assert error["data"]["code"] == "not_found"
    await send(ws, {"type": "message", "content": "write"})
    request, _ = await receive_until(ws, "confirmation_request")
    reply = {
        "type": "confirmation_reply",
        "confirmation_id": request["data"]["confirmation_id"],
        "approved": True,
    }
    await send(ws, reply)
    await receive_until(ws, "confirmation_resolved")
    await send(ws, reply)
    error, _ = await receive_until(ws, "error")
    assert error["data"]["code"] in {"already_resolved", "not_found"}
    await receive_until(ws, "result")
    await ws.disconnect()


async def test_full_access_runs_without_asking_and_read_only_refuses_without_asking(session, alice_key, llm):
    llm.script(Reply(**WRITE), Reply(text="done"), Reply(**WRITE), Reply(text="could not"))
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "message", "content": "write", "approval_mode": "full_access"})
    result, seen = await receive_until(ws, "tool_result")
    assert result["is_error"] is False
    assert not [f for f in seen if f["type"] == "confirmation_request"]
    await receive_until(ws, "result")
    (workspace_of(session) / "note.txt").unlink()
    await send(ws, {"type": "message", "content": "write", "approval_mode": "read_only"})
    result, seen = await receive_until(ws, "tool_result")
    assert result["is_error"] is True
    assert not [f for f in seen if f["type"] == "confirmation_request"]
    await receive_until(ws, "result")
    assert not (workspace_of(session) / "note.txt").exists()
    await ws.disconnect()


@override_settings(AGENTSITE_CONFIRMATION_TIMEOUT=0.3)
async def test_an_unanswered_confirmation_times_out_as_refused(session, alice_key, llm):
    llm.script(Reply(**WRITE), Reply(text="timed out"))
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "message", "content": "write"})
    await receive_until(ws, "confirmation_request")
    resolved, _ = await receive_until(ws, "confirmation_resolved")
    assert resolved["approved"] is False and resolved["by"] == "timeout"
    result, _ = await receive_until(ws, "tool_result")
    assert result["is_error"] is True
    await receive_until(ws, "result")
    await ws.disconnect()


async def test_cancel_while_a_confirmation_waits_resolves_it_and_cancels_the_turn(session, alice_key, llm):
    llm.script(Reply(**WRITE))
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "message", "content": "write"})
    await receive_until(ws, "confirmation_request")
    await send(ws, {"type": "cancel"})
    result, seen = await receive_until(ws, "result")
    assert result["data"]["status"] == "cancelled"
    resolved = [f for f in seen if f["type"] == "confirmation_resolved"]
    assert resolved and resolved[0]["by"] == "cancel" and resolved[0]["approved"] is False
    late, connected = await connect(session.id, key=alice_key)
    assert connected["snapshot"]["confirmations"] == []
    await ws.disconnect()
    await late.disconnect()


async def test_switched_off_tools_are_not_offered_to_the_model(session, alice_key, staff_key, api, llm):
    response = await sync_to_async(api(staff_key).put)(
        "/api/v1/agents/default/tools/shell", {"enabled": False}
    )
    assert response.status_code == 200 and response.json()["enabled"] is False
    llm.script(Reply(text="hi"))
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "message", "content": "hello"})
    await receive_until(ws, "result")
    offered = {tool["function"]["name"] for tool in llm.chat_requests[0]["tools"]}
    assert "shell" not in offered and {"read_file", "write_file", "list_files", "get_current_time"} <= offered
    await ws.disconnect()
