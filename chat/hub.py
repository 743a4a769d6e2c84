"""This process's live sessions: the SessionService wired to Django storage and the event logs.

Consumers, REST views and commands call these functions; they never touch controllers' internals.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from chat.controller import SessionController
from chat.markdown import render_markdown
from chat.events import SEQ_BLOCK, EventLog
from chat.models import Message
from chat.service import SessionService
from chat.store import DjangoQueueStore, load_state

logger = logging.getLogger(__name__)

CONTROL_GROUP_PREFIX = "session."
SESSION_CLOSED = "session.closed"


def control_group(session_id: str) -> str:
    """Channel-layer group of every socket on a session, on any process (group names allow [a-zA-Z0-9._-])."""
    safe = session_id.replace(":", "_")
    return f"{CONTROL_GROUP_PREFIX}{safe}"[:99]


def _with_html(publish: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Final answers also carry their Markdown rendered and sanitised server-side (`html`)."""

    def publish_with_html(event: dict[str, Any]) -> dict[str, Any]:
        if event.get("type") == "final_answer" and isinstance(event.get("content"), str):
            event["html"] = render_markdown(event["content"])
        return publish(event)

    return publish_with_html


class Hub:
    def __init__(self) -> None:
        from agents.runtime import DjangoRuntime

        self.service = SessionService(
            runtime=DjangoRuntime(),
            max_concurrent_turns=settings.AGENTSITE_MAX_CONCURRENT_TURNS,
            controller_factory=self._create_controller,
        )
        self.logs: dict[str, EventLog] = {}
        self.connections: dict[str, set[Any]] = {}

    async def _create_controller(self, session_id: str, service: SessionService) -> SessionController:
        state = await database_sync_to_async(load_state)(session_id, seq_block=SEQ_BLOCK)
        store = DjangoQueueStore(session_id)
        log = EventLog(
            session_id,
            last_seq=state.seq_reserved,
            reserved=state.seq_reserved + SEQ_BLOCK,
            reserve=store.reserve_seq,
            retention=settings.AGENTSITE_EVENT_RETENTION,
        )
        self.logs[session_id] = log
        controller = SessionController(
            session_id,
            runtime=service.runtime,
            lease=service.lease,
            store=store,
            publish=_with_html(log.publish),
            pending=state.pending,
            paused=state.paused,
            next_order=state.next_order,
        )
        for message_id in state.running_message_ids:
            # Its turn died with the process that ran it (PROTOCOL §3.4).
            await controller.interrupt_stored_turn(message_id)
        return controller

    async def controller(self, session_id: str) -> SessionController:
        return await self.service.get_controller(session_id)

    def log(self, session_id: str) -> EventLog:
        return self.logs[session_id]

    def register(self, session_id: str, connection: Any) -> None:
        self.connections.setdefault(session_id, set()).add(connection)

    def unregister(self, session_id: str, connection: Any) -> None:
        connections = self.connections.get(session_id)
        if connections is not None:
            connections.discard(connection)
            if not connections:
                del self.connections[session_id]

    def connection_count(self, session_id: str) -> int:
        return len(self.connections.get(session_id, ()))

    async def close_session(self, session_id: str) -> None:
        """Stop the session's live state here and close its sockets on every process."""
        await self.service.delete_session(session_id)
        log = self.logs.pop(session_id, None)
        if log is not None:
            await log.aclose()
        layer = get_channel_layer()
        if layer is not None:
            await layer.group_send(control_group(session_id), {"type": SESSION_CLOSED})

    async def recover_interrupted_turns(self) -> int:
        """At start-up: end every turn that was running when the server stopped (before serving)."""
        session_ids = await database_sync_to_async(
            lambda: list(
                Message.objects.filter(status=Message.RUNNING, session__status="open")
                .values_list("session_id", flat=True)
                .distinct()
            )
        )()
        for session_id in session_ids:
            await self.controller(session_id)
        return len(session_ids)

    async def shutdown(self) -> None:
        await self.service.shutdown()
        close_runtime = getattr(self.service.runtime, "aclose", None)
        if close_runtime is not None:
            await close_runtime()
        await asyncio.gather(*(log.aclose() for log in self.logs.values()))
        self.logs.clear()


async def _in_fresh_context[T](call: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    return await asyncio.create_task(call(*args, **kwargs), context=contextvars.Context())


def call_from_sync[T](call: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Run a hub coroutine from sync code (a DRF view) on the event loop, in a fresh context.

    A queue command may start a turn task that outlives the request. Tasks copy the caller's
    context, and under async_to_sync that context holds the request's asgiref executors
    (AsyncToSync.executors, ThreadSensitiveContext); once the view returns they are gone, and every
    database call of the turn would fail ("CurrentThreadExecutor already quit"). A fresh context
    makes such tasks use the process-wide database thread, as turns started from sockets do.
    """
    return async_to_sync(_in_fresh_context)(call, *args, **kwargs)


_hub: Hub | None = None


def get_hub() -> Hub:
    global _hub
    if _hub is None:
        _hub = Hub()
    return _hub


async def reset_hub() -> None:
    """Shut down and forget this process's live sessions (tests, server shutdown)."""
    global _hub
    if _hub is not None:
        await _hub.shutdown()
    _hub = None


async def message_submit(
    *,
    session_id: str,
    content: str,
    message_id: str | None = None,
    steer: bool = False,
    config: dict[str, Any] | None = None,
    approval_mode: str = "ask",
    model: str | None = None,
    stream_events: bool = True,
    confirmation_timeout: float | None = None,
) -> dict[str, Any]:
    """Queue a user message (WS `message` frame and REST POST …/messages share this).

    `stream_events` and `confirmation_timeout` are internal (cron runs, see ChatRequest); the WS and
    REST edges never pass them.
    """
    import uuid

    from chat.controller import ChatRequest, InputError
    from chat.service import Submit
    from chat.services import session_title_from_first_message

    message_id = message_id or uuid.uuid4().hex
    taken = await database_sync_to_async(
        Message.objects.filter(session_id=session_id, message_id=message_id).exists
    )()
    if taken:
        raise InputError(
            "duplicate_message_id",
            f"Message {message_id} already exists in this session.",
            message_id=message_id,
        )
    request = ChatRequest(
        message_id=message_id,
        content=content,
        config=config,
        approval_mode=approval_mode,  # type: ignore[arg-type]
        model=model,
        stream_events=stream_events,
        confirmation_timeout=confirmation_timeout,
    )
    ack = await get_hub().service.dispatch(session_id, Submit(request=request, steer=steer))
    await database_sync_to_async(session_title_from_first_message)(session_id=session_id, content=content)
    return ack
