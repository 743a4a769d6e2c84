"""A user deactivated or deleted stops working, not only stops connecting (docs/protocol.md §6.2): their
turns running in the server stop, their queues pause and keep what waits, and a turn of theirs that
would start later (a queued message, a cron run) is refused. Other users' turns go on.

What was found: only the sockets closed; a deactivated user's running turn went on calling the model and
its tools to its end, and their queue went on draining."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from accounts.credentials import USER_ENDED
from agents.contract import ChatRequest
from agentsite.dev.fake_llm import FakeLLMServer, Reply
from chat.live import live_sessions
from chat.models import Message, Session
from chat.runtime import DjangoRuntime, RefusedTurn
from tests import factories
from tests.support.chat_queue import a_use_fake_llm, a_user_with_key, frames_until, is_status, wait_until
from tests.support.ws import connect, send

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services_rerun]

HOLD = Reply(text="held answer", delay=30)  # keeps a turn running until something stops it


async def running_chat(username: str) -> tuple[Any, str, Any]:
    """A user's session whose turn `a` runs (held by the model) with `b` queued behind it."""
    user, key = await a_user_with_key(username)
    session = await sync_to_async(factories.session)(user)
    ws, first = await connect(session.id, key=key)
    assert first["type"] == "connected", first
    await send(ws, {"type": "message", "message_id": "a", "content": "first"})
    await frames_until(ws, is_status("a", "started"))
    await send(ws, {"type": "message", "message_id": "b", "content": "second"})
    await frames_until(ws, is_status("b", "queued"))
    return user, session.id, ws


def status_of(session_id: str, message_id: str) -> str:
    return Message.objects.get(session_id=session_id, message_id=message_id, role="user").status


async def test_deactivating_a_user_stops_their_running_turn_pauses_their_queue_and_no_one_elses(
    fake_llm: FakeLLMServer,
) -> None:
    await a_use_fake_llm(fake_llm.base_url)
    fake_llm.script(HOLD, HOLD)
    alice, alices, alice_ws = await running_chat("alice")
    _, bobs, bob_ws = await running_chat("bob")

    alice.is_active = False
    await sync_to_async(alice.save)()  # as the admin does: the account event reaches this process

    live = live_sessions()
    await wait_until(lambda: live.registry.controllers[alices].active_task is None, within=3)
    assert await sync_to_async(status_of)(alices, "a") == "cancelled"
    assert await sync_to_async(status_of)(alices, "b") == "pending"  # kept, waiting
    assert await sync_to_async(Session.objects.values_list("paused", flat=True).get)(id=alices) is True
    assert live.registry.controllers[bobs].active_task is not None  # bob's turn goes on
    assert await sync_to_async(status_of)(bobs, "a") == "running"
    for ws in (alice_ws, bob_ws):
        await ws.disconnect()


async def test_a_turn_of_a_user_deactivated_meanwhile_is_refused_without_calling_the_model(
    fake_llm: FakeLLMServer,
) -> None:
    """What no event said (a raw UPDATE) and no open socket found: the turn's setup reads the account."""
    await a_use_fake_llm(fake_llm.base_url)
    alice, _ = await a_user_with_key("alice")
    session = await sync_to_async(factories.session)(alice)
    await sync_to_async(get_user_model().objects.filter(pk=alice.pk).update)(is_active=False)

    turn = await DjangoRuntime().stream(ChatRequest(message_id="m1", content="hi"), session_id=session.id)

    assert isinstance(turn, RefusedTurn)
    result = await turn.result()
    assert result.status == "error" and result.error == {"code": "unauthorized", "message": USER_ENDED}
    assert fake_llm.chat_requests == []
