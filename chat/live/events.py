"""Per-session event log: assigns `seq`, retains events for `?since=` replay, reaches other processes.

Local sockets get events straight from the controller's subscriber queues (a direct send costs ~12 µs
of CPU against ~200 µs for a channel-layer group_send, docs/architecture.md); this log only numbers and keeps
them. Seqs are reserved in blocks stored on the Session row, so they are never reused across restarts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from enum import Enum
from typing import Any, Final

import orjson

from agentsite.eventqueue import EventQueue

logger = logging.getLogger(__name__)

SEQ_BLOCK = 1000
RETENTION_BYTES = 256 * 1024  # what a session keeps of its older runs' events (settings may change it)
UNSEQUENCED = frozenset({"pong", "error", "connected", "resync"})

Reserve = Callable[[int], Awaitable[None]]
Fanout = Callable[[dict[str, Any]], None]

# An event as published to subscribers: a turn's event (agents/contract.py TurnEvent) or the live core's own
# (message_status, result, final_answer, ...), stamped with its `seq` and `message_id`, ready to send.
Published = dict[str, Any]


class Signal(Enum):
    """What a subscriber's queue carries besides events: compared by identity (`is`), never sent."""

    UNAVAILABLE = "unavailable"  # the session cannot go on in this process (socket 1012; SSE `unavailable`)
    CLOSED = "closed"  # the session was closed under the socket (4410)
    ACCOUNT_ENDED = "account_ended"  # the account's sign-in was revoked (4401; SSE: `unauthorized`)


UNAVAILABLE: Final = Signal.UNAVAILABLE
QueueItem = Published | Signal
SubscriberQueue = EventQueue[QueueItem]  # a socket's, an SSE stream's, a cron run's queue


_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def encode_event(event: dict[str, Any]) -> str:
    """An event as a frame's JSON text: compact, non-ASCII as is, other types as str() — what
    `json.dumps(event, separators=(",", ":"), ensure_ascii=False, default=str)` gives, ~6× faster (every
    delta of every socket goes through here)."""
    try:
        return orjson.dumps(event, default=str, option=_ORJSON_OPTIONS).decode()
    except (TypeError, orjson.JSONEncodeError):  # e.g. an int beyond 64 bits
        return json.dumps(event, separators=(",", ":"), ensure_ascii=False, default=str)


_EVENT_OVERHEAD = 240  # a small event's dict, its keys' slots and its seq, in bytes (CPython 3.13)


def event_size(event: dict[str, Any]) -> int:
    """Roughly what an event keeps in memory: its dict plus its text, one level down (the `data` of a
    `result`, a tool call's arguments). Cheap: it runs for every event published."""
    size = _EVENT_OVERHEAD
    for value in event.values():
        kind = type(value)
        if kind is str:
            size += len(value)
        elif kind is dict:
            size += _EVENT_OVERHEAD
            for inner in value.values():
                if type(inner) is str:
                    size += len(inner)
        elif kind is list:
            size += 64 * len(value)
    return size


class EventLog:
    """A session's events for `?since=`: the last `retention` events and at most `retention_bytes` of them
    (roughly), never trimming into the running or the last finished run (docs/protocol.md §3.1)."""

    def __init__(
        self,
        session_id: str,
        *,
        last_seq: int,
        reserved: int,
        reserve: Reserve | None = None,
        retention: int = 2000,
        fanout: Fanout | None = None,
        retention_bytes: int = RETENTION_BYTES,
    ) -> None:
        self.session_id = session_id
        self.last_seq = last_seq
        self._reserved = reserved
        self._reserve = reserve
        self._reserving: asyncio.Task[None] | None = None
        self._retention = retention
        self._retention_bytes = retention_bytes
        self._fanout = fanout
        self._events: deque[dict[str, Any]] = deque()
        self.bytes = 0  # event_size() of the retained events
        # Every seq above `_floor` that this process issued is still retained.
        self._floor = last_seq
        # seq of the `started` event of the active run and of the last finished one: never trimmed.
        self._run_starts: list[int] = []
        self.touched = time.monotonic()  # last publish (or creation): how long the session has been idle

    def publish(self, event: dict[str, Any]) -> dict[str, Any]:
        self.touched = time.monotonic()
        self.last_seq += 1
        event["seq"] = self.last_seq
        self._events.append(event)
        self.bytes += event_size(event)
        if event.get("type") == "message_status" and event.get("status") == "started":
            self._run_starts = [*self._run_starts[-1:], self.last_seq]
        self._trim()
        self._maybe_reserve()
        if self._fanout is not None:
            self._fanout(event)
        return event

    def replay(self, since: int) -> list[dict[str, Any]] | None:
        """Events with seq > since, or None when some of them are no longer retained (→ resync)."""
        if since >= self.last_seq:
            return []
        if since < self._floor:
            return None
        return [event for event in self._events if event["seq"] > since]

    @property
    def floor(self) -> int:
        """Every seq above it that this log issued is still retained."""
        return self._floor

    @property
    def holds_only_its_last_run(self) -> bool:
        """Nothing older than the last run's start is kept (a new session's single run, or none)."""
        start = self._run_starts[-1] if self._run_starts else self.last_seq + 1
        return not self._events or self._events[0]["seq"] >= start

    def keep_last_run_only(self) -> None:
        """An idle session keeps just its last run's events (the contract keeps those for `?since=`)."""
        start = self._run_starts[-1] if self._run_starts else self.last_seq + 1
        while self._events and self._events[0]["seq"] < start:
            self._floor = self._events.popleft()["seq"]
        self.bytes = sum(event_size(event) for event in self._events)

    def _trim(self) -> None:
        protected = self._run_starts[0] if self._run_starts else self.last_seq + 1
        events = self._events
        while (len(events) > self._retention or self.bytes > self._retention_bytes) and events[0][
            "seq"
        ] < protected:
            oldest = events.popleft()
            self._floor = oldest["seq"]
            self.bytes = max(0, self.bytes - event_size(oldest))

    def _maybe_reserve(self) -> None:
        if self._reserve is None or self._reserving is not None:
            return
        if self.last_seq <= self._reserved - SEQ_BLOCK // 2:
            return
        target = self._reserved + SEQ_BLOCK
        self._reserving = asyncio.get_running_loop().create_task(self._do_reserve(target))

    async def _do_reserve(self, target: int) -> None:
        try:
            assert self._reserve is not None
            await self._reserve(target)
            self._reserved = target
        except Exception:
            logger.exception("could not reserve event seqs for session %s", self.session_id)
        finally:
            self._reserving = None

    async def aclose(self) -> None:
        if self._reserving is not None:
            await asyncio.shield(self._reserving)
