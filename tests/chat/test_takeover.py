"""Taking a session over from another process when Redis lost its data (a restart without persistence):
the fencing tokens, which Redis counts, start again from 1; the database remembers the last one. Found by
bench/soak.py: two processes ran the same turn, each with token 1, both passing the fence."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from agents.contract import ChatRequest, InputError
from agentsite.db import database_sync_to_async
from chat.live.cluster.keys import fence_key, owner_key
from chat.live.cluster.ownership import RedisOwnership
from chat.live.cluster.sessions import ClusterSessions
from chat.live.commands import Submit
from chat.live.controller import SessionController
from chat.live.sessions import NotOwner
from chat.models import Message, Session
from tests import factories

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services_rerun]


def _process(redis_client, name: str) -> ClusterSessions:
    sessions = ClusterSessions()
    sessions.ownership = RedisOwnership(redis_client, lease_ms=5000, process_id=name)
    return sessions


async def _take(sessions: ClusterSessions, session_id: str) -> SessionController:
    """What routing does: load the session, trying again while another claim is refused (at most 3)."""
    for _ in range(3):
        try:
            controller, log = await sessions._load(session_id)
        except NotOwner:
            continue
        sessions.registry.controllers[session_id] = controller
        sessions.registry.logs[session_id] = log
        return controller
    raise AssertionError("the session could not be taken over")


async def _token(session_id: str) -> int:
    return (await database_sync_to_async(Session.objects.get)(id=session_id)).owner_token


async def test_messages_stored_while_the_owner_was_unreachable_join_its_queue(redis_client) -> None:
    """The process that received a message could not reach the owner (Redis away, the hand-over lost):
    stored without a queue position, it joins the owner's queue at the owner's next watchdog round,
    instead of waiting for the session's next owner. A message steered into a turn that no process runs
    any more ends `interrupted` with it when the session is loaded."""
    from chat.live.cluster.watch import Watch
    from chat.store import message_store_pending

    user = await database_sync_to_async(factories.user)("alice")
    session_id = f"adopt-{uuid.uuid4().hex}"
    await database_sync_to_async(factories.session)(user, session_id=session_id)
    steered = ChatRequest(message_id="orphan", content="steered into a dead turn")
    await database_sync_to_async(message_store_pending)(session_id=session_id, request=steered)
    await database_sync_to_async(Message.objects.filter(session_id=session_id, message_id="orphan").update)(
        status="steered", queue_order=0
    )
    one = _process(redis_client, "one")
    try:
        controller = await _take(one, session_id)
        orphan = await database_sync_to_async(Message.objects.get)(session_id=session_id, message_id="orphan")
        assert orphan.status == "interrupted"
        await controller.cancel()  # paused: what is adopted waits in the queue, where we can see it
        stray = ChatRequest(message_id="stray", content="stored, never handed over")
        await database_sync_to_async(message_store_pending)(session_id=session_id, request=stray)
        await Watch(one).adopt_stored({session_id})
        await Watch(one).adopt_stored({session_id})
        assert [item.request.message_id for item in controller.pending] == ["stray"]
        row = await database_sync_to_async(Message.objects.get)(session_id=session_id, message_id="stray")
        assert (row.status, row.queue_order is not None) == (Message.Status.PENDING, True)
    finally:
        await _close(one)


async def test_after_redis_lost_its_data_the_next_owner_fences_the_previous_one(redis_client) -> None:
    user = await database_sync_to_async(factories.user)("alice")
    session_id = f"takeover-{uuid.uuid4().hex}"
    await database_sync_to_async(factories.session)(user, session_id=session_id)
    one, two = _process(redis_client, "one"), _process(redis_client, "two")
    try:
        first = await _take(one, session_id)
        before = await _token(session_id)
        await redis_client.delete(owner_key(session_id), fence_key(session_id))  # data lost

        await _take(two, session_id)
        assert await _token(session_id) > before, "the new owner's token must be above the old one's"
        late = ChatRequest(message_id="late", content="sent to the old owner")
        # The old owner's write is refused by the fence; the message is stored for the new owner instead
        # (not refused, not lost), and the old owner's live state goes.
        ack = await one._run_here(session_id, Submit(request=late))
        assert ack == {"message_id": "late", "status": "queued"}
        row = await database_sync_to_async(Message.objects.get)(session_id=session_id, message_id="late")
        assert row.status == Message.Status.PENDING
        await asyncio.gather(*one._background)
        assert one.registry.peek(session_id) is None and first.closed
        with pytest.raises(InputError):
            await first.submit(ChatRequest(message_id="later", content="x"))
    finally:
        await _close(one)
        await _close(two)


async def _close(sessions: ClusterSessions) -> None:
    for controller in list(sessions.registry.controllers.values()):
        await controller.abandon()
    for relay in sessions._relays.values():
        await relay.aclose()
    assert sessions.ownership is not None
    await sessions.ownership.stop()
    await asyncio.gather(*sessions._background, return_exceptions=True)
