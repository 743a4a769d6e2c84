"""This process among several: commands routed to a session's owner, remote sessions' events mirrored.

Plain asyncio over a Channels layer (no Django). Each process listens on its own channel (made with
`new_channel("agentsite.proc.")`; its name is the process id stored in session leases) for four kinds
of message:
- `command`: run a queue command (or read a snapshot) on a session this process owns, answer `reply`;
- `reply`: the answer to a command this process sent;
- `events`: a batch of events of a session this process mirrors (it is in the session's group);
- `closed`: a session was deleted, sent to every process (all are in PROCESSES_GROUP): close its sockets.
Sockets themselves never join the layer: one channel per process, not one per socket.

A mirror (`RemoteSession`) feeds local sockets of a session owned elsewhere. Batches carry `prev`, the
seq before their first event; when it does not match what the mirror has delivered, the missing
events are read from the replay store first, so sockets always get every event, in seq order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import RedisError

from agentsite.eventqueue import EventQueue
from chat.live.events import Signal, SubscriberQueue

logger = logging.getLogger(__name__)

MESSAGE_TYPE = "agentsite.process"
PROCESSES_GROUP = "agentsite.processes"
COMMAND_TIMEOUT = 10.0

CommandHandler = Callable[[str, str, dict[str, Any]], Awaitable[Any]]
Replay = Callable[[str, int], Awaitable[list[dict[str, Any]] | None]]
OnClosed = Callable[[str], None]


class RemoteError(Exception):
    """A command failed on the owner; `code`/`message`/`message_id` travel back unchanged."""

    def __init__(self, code: str, message: str, message_id: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.message_id = message_id


class OwnerUnavailable(Exception):
    """The owner did not answer in time (it may be dying; its lease will expire)."""


def mirror_group(session_id: str) -> str:
    return "agentsite.mirror." + "".join(c if c.isalnum() or c in "-_." else "_" for c in session_id)[:80]


@dataclass
class RemoteSession:
    """Local subscribers of a session owned by another process."""

    session_id: str
    replay: Replay
    subscribers: set[SubscriberQueue] = field(default_factory=set)
    last_seq: int | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def subscribe(self) -> SubscriberQueue:
        queue: SubscriberQueue = EventQueue()
        self.subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: SubscriberQueue) -> None:
        self.subscribers.discard(queue)

    def fail(self, notice: Signal) -> None:
        """The owner's events cannot reach this process any more: every subscriber gets `notice`."""
        for queue in self.subscribers:
            queue.put_nowait(notice)
        self.subscribers.clear()

    async def deliver(self, prev: int | None, events: list[dict[str, Any]]) -> None:
        async with self._lock:  # batches and refills are delivered one at a time, in order
            if self.last_seq is not None and prev is not None and prev > self.last_seq:
                missed = await self.replay(self.session_id, self.last_seq)
                if missed:
                    self._fan_out([event for event in missed if event["seq"] <= prev])
            self._fan_out(events)

    def _fan_out(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            seq = event.get("seq")
            if seq is None or (self.last_seq is not None and seq <= self.last_seq):
                continue
            self.last_seq = seq
            for queue in self.subscribers:
                queue.put_nowait(event)


class Cluster:
    def __init__(
        self,
        *,
        layer: Any,
        handle_command: CommandHandler,
        replay: Replay,
        on_closed: OnClosed = lambda session_id: None,
        on_failure: Callable[[list[str] | None], Awaitable[None]] | None = None,
    ) -> None:
        self.layer = layer
        self.channel = ""  # set by start(); also this process's id in leases
        self._handle_command = handle_command
        self._replay = replay
        self._on_closed = on_closed
        # Mirrors that cannot go on (these sessions' or, when None, all): the layer failed, or their owner.
        self._on_failure = on_failure
        self._replies: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.mirrors: dict[str, RemoteSession] = {}
        self._listener: asyncio.Task[None] | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._relayed: dict[str, int] = {}

    @property
    def process_id(self) -> str:
        return self.channel

    async def start(self) -> None:
        if not self.channel:
            self.channel = await self.layer.new_channel("agentsite.proc.")
            await self.layer.group_add(PROCESSES_GROUP, self.channel)
        if self._listener is None:
            self._listener = asyncio.get_running_loop().create_task(self._listen())

    async def stop(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None
        if self.channel:
            with contextlib.suppress(Exception):
                await self.layer.group_discard(PROCESSES_GROUP, self.channel)
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        for session_id in list(self.mirrors):
            await self.drop_mirror(session_id)
        for future in self._replies.values():
            future.cancel()
        self._replies.clear()

    # -- owner side --------------------------------------------------------------------------

    async def relay(self, session_id: str, events: list[dict[str, Any]]) -> None:
        """Send a batch of the owner's events to every process mirroring the session."""
        prev = self._relayed.get(session_id)
        self._relayed[session_id] = events[-1]["seq"]
        await self.layer.group_send(
            mirror_group(session_id),
            {
                "type": MESSAGE_TYPE,
                "kind": "events",
                "session_id": session_id,
                "prev": prev,
                "events": events,
            },
        )

    async def announce_closed(self, session_id: str) -> None:
        """Tell every process (this one included) that the session was deleted."""
        await self.layer.group_send(
            PROCESSES_GROUP, {"type": MESSAGE_TYPE, "kind": "closed", "session_id": session_id}
        )

    async def announce_failed(self, session_id: str) -> None:
        """Tell the processes mirroring the session that its owner dropped its live state (storage failed)."""
        await self.layer.group_send(
            mirror_group(session_id), {"type": MESSAGE_TYPE, "kind": "failed", "session_id": session_id}
        )

    def forget_relay(self, session_id: str) -> None:
        self._relayed.pop(session_id, None)

    # -- mirror side -------------------------------------------------------------------------

    async def mirror(self, session_id: str) -> RemoteSession:
        remote = self.mirrors.get(session_id)
        if remote is None:
            remote = self.mirrors[session_id] = RemoteSession(session_id, self._replay)
            await self.layer.group_add(mirror_group(session_id), self.channel)
        return remote

    async def drop_mirror(self, session_id: str) -> None:
        if self.mirrors.pop(session_id, None) is not None:
            with contextlib.suppress(Exception):
                await self.layer.group_discard(mirror_group(session_id), self.channel)

    async def release_if_unused(self, session_id: str) -> None:
        remote = self.mirrors.get(session_id)
        if remote is not None and not remote.subscribers:
            await self.drop_mirror(session_id)

    # -- commands ----------------------------------------------------------------------------

    async def call(
        self,
        owner_process_id: str,
        session_id: str,
        op: str,
        payload: dict[str, Any],
        *,
        within: float = COMMAND_TIMEOUT,
    ) -> Any:
        request_id = uuid.uuid4().hex
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._replies[request_id] = future
        try:
            await self.layer.send(
                owner_process_id,
                {
                    "type": MESSAGE_TYPE,
                    "kind": "command",
                    "session_id": session_id,
                    "op": op,
                    "payload": payload,
                    "reply_to": self.channel,
                    "request_id": request_id,
                },
            )
            reply = await asyncio.wait_for(future, within)
        except TimeoutError:
            raise OwnerUnavailable(f"The process that runs session {session_id} did not answer.") from None
        except (ConnectionError, OSError, RedisError) as exc:  # the layer itself is down
            raise OwnerUnavailable(f"The processes cannot reach each other ({type(exc).__name__}).") from None
        finally:
            self._replies.pop(request_id, None)
        if "error" in reply:
            error = reply["error"]
            raise RemoteError(error["code"], error["message"], error.get("message_id"))
        return reply.get("result")

    async def _listen(self) -> None:
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("process channel receive failed; retrying", exc_info=True)
                if self._on_failure is not None:
                    with contextlib.suppress(Exception):
                        await self._on_failure(None)
                await asyncio.sleep(0.5)
                continue
            kind = message.get("kind")
            if kind == "reply":
                future = self._replies.get(message.get("request_id", ""))
                if future is not None and not future.done():
                    future.set_result(message)
            elif kind == "events":
                remote = self.mirrors.get(message["session_id"])
                if remote is not None:
                    await remote.deliver(message.get("prev"), message["events"])
            elif kind == "closed":
                self._on_closed(message["session_id"])
            elif kind == "failed" and self._on_failure is not None:
                await self._on_failure([message["session_id"]])
            elif kind == "command":
                task = asyncio.get_running_loop().create_task(self._answer(message))
                self._handlers.add(task)
                task.add_done_callback(self._handlers.discard)

    async def _answer(self, message: dict[str, Any]) -> None:
        reply: dict[str, Any] = {"type": MESSAGE_TYPE, "kind": "reply", "request_id": message["request_id"]}
        try:
            reply["result"] = await self._handle_command(
                message["session_id"], message["op"], message["payload"]
            )
        except RemoteError as exc:
            reply["error"] = {"code": exc.code, "message": exc.message, "message_id": exc.message_id}
        except Exception as exc:
            code = getattr(exc, "code", None)
            if isinstance(code, str):
                reply["error"] = {
                    "code": code,
                    "message": getattr(exc, "message", str(exc)),
                    "message_id": getattr(exc, "message_id", None),
                }
            else:
                logger.exception(
                    "command %s on session %s failed", message.get("op"), message.get("session_id")
                )
                reply["error"] = {"code": "internal_error", "message": "The command failed on the server."}
        with contextlib.suppress(Exception):
            await self.layer.send(message["reply_to"], reply)
