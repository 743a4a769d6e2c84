"""History repair (agents/history.py): the one place an interrupted turn's leftovers are mended.

The store hands its rows over as they are; the turn repairs them once, before its first model request.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from agents.contract import ChatRequest
from agents.history import MISSING_RESULT, repair_history
from agentsite.db import insert_row
from chat.models import Message
from chat.runtime import DjangoRuntime
from chat.store import history_for_model
from tests import factories

CALL = {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": '{"command": "ls"}'}}


def test_a_call_without_result_gets_a_note_and_an_orphan_result_is_dropped() -> None:
    history = [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "gone", "content": "orphan result"},
        {"role": "user", "content": "never mind"},
    ]

    assert repair_history(history) == [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": MISSING_RESULT},
        {"role": "user", "content": "never mind"},
    ]


def test_a_complete_history_is_left_as_it_is() -> None:
    second = {**CALL, "id": "c2"}
    history = [
        {"role": "user", "content": "run them"},
        {"role": "assistant", "content": "Running.", "tool_calls": [CALL, second]},
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "assistant", "content": "Done."},
    ]

    assert repair_history(history) == history
    assert repair_history(repair_history(history[:2])) == repair_history(
        history[:2]
    )  # repairing is idempotent


def _interrupted_session() -> str:
    """A session whose first turn stopped between the model's tool call and its result (a restart)."""
    session = factories.session(factories.user("alice"))
    base = timezone.now()
    rows = [
        ("u1", Message.Role.USER, "list the files", None),
        ("a1", Message.Role.ASSISTANT, "", [CALL]),
    ]
    for offset, (message_id, role, content, tool_calls) in enumerate(rows):
        insert_row(
            Message,
            session_id=session.id,
            message_id=message_id,
            role=role,
            content=content,
            tool_calls=tool_calls,
            status="interrupted" if role == Message.Role.USER else "completed",
            entered_at=base + dt.timedelta(seconds=offset),
        )
    return session.id


@pytest.mark.django_db(transaction=True)
async def test_an_interrupted_turn_reaches_the_model_repaired_exactly_once(llm: Any) -> None:
    from asgiref.sync import sync_to_async

    session_id = await sync_to_async(_interrupted_session)()
    stored = await sync_to_async(history_for_model)(session_id, before_message_id="m2")
    assert stored == [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
    ], "the store hands the rows over as they are"

    runtime = DjangoRuntime()
    turn = await runtime.stream(ChatRequest(message_id="m2", content="go on"), session_id=session_id)
    try:
        [event async for event in turn]
        assert (await turn.result()).status == "completed"
    finally:
        await turn.aclose()
        await runtime.aclose()

    messages = llm.chat_requests[0]["messages"]
    assert [m for m in messages if m["role"] != "system"] == [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": MISSING_RESULT},
        {"role": "user", "content": "go on"},
    ]
