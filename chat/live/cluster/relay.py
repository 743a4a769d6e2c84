"""Carrying a session's events to other processes (plain asyncio, no Django).

`EventRelay` batches what the owner publishes: consecutive deltas within a short window (or up to a
size) travel as one channel-layer message, because a group_send costs ~250 µs against ~12 µs for a
direct socket send (docs/architecture.md). Any other event flushes the batch at once, so control events are
not delayed. Batches are sent one at a time, in order.

`RedisReplayStore` keeps each session's recent events in a capped Redis Stream (entry id = seq), so a
socket on any process can replay `?since=` after a reconnect; only the session's owner appends to it (fenced
by its lease).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from chat.live.cluster.keys import floor_key, owner_key, stream_key
from chat.live.cluster.ownership import Lease
from chat.live.events import encode_event

logger = logging.getLogger(__name__)

COALESCED = frozenset({"delta", "thinking"})

SendBatch = Callable[[list[dict[str, Any]]], Awaitable[None]]


class EventRelay:
    def __init__(self, send: SendBatch, *, window: float = 0.015, max_bytes: int = 16_384) -> None:
        self._send = send
        self._window = window
        self._max_bytes = max_bytes
        self._buffer: list[dict[str, Any]] = []
        self._size = 0
        self._timer: asyncio.TimerHandle | None = None
        self._outbox: asyncio.Queue[list[dict[str, Any]] | None] = asyncio.Queue()
        self._sender: asyncio.Task[None] | None = None

    def add(self, event: dict[str, Any]) -> None:
        """Called synchronously from publish(); never blocks."""
        self._buffer.append(event)
        if event.get("type") in COALESCED:
            self._size += len(event.get("content") or "") + 64
            if self._size < self._max_bytes:
                if self._timer is None:
                    self._timer = asyncio.get_running_loop().call_later(self._window, self.flush)
                return
        self.flush()

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._buffer:
            return
        batch, self._buffer, self._size = self._buffer, [], 0
        self._outbox.put_nowait(batch)
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(self._send_batches())

    async def _send_batches(self) -> None:
        while True:
            batch = await self._outbox.get()
            if batch is None:
                return
            try:
                await self._send(batch)
            except Exception:
                # The store and seq gaps let receivers recover; a failed hint must not stop the owner.
                logger.warning("could not relay %d event(s) to other processes", len(batch), exc_info=True)

    def discard(self) -> None:
        """Drop what is buffered and stop (this process lost the session: it must not publish)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._buffer, self._size = [], 0
        if self._sender is not None:
            self._sender.cancel()
            self._sender = None

    async def aclose(self) -> None:
        self.flush()
        if self._sender is not None:
            self._outbox.put_nowait(None)
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender
            self._sender = None


# Appends a batch in one command: a pipeline of one XADD per event cost the owner ~20 % of its CPU in
# redis-py's command packing and reply parsing (bench/cluster_load.py). An entry Redis refuses (an id not
# above the stream's last) is skipped, as a failed XADD in a pipeline was.
# KEYS: the stream, its floor, the session's owner key. ARGV: maxlen, ttl, the seq before this batch, the
# appender's lease ("<process>|<token>"), then entry id and event pairs.
# Fenced: only the process whose lease the owner key holds appends (0 otherwise, and nothing is written): an
# owner frozen past its lease and woken after another process took the session over publishes nothing.
# A stream that did not exist (a new session, or one whose events Redis lost or let expire) records where it
# starts: a `since` below that floor may miss events, and gets a resync instead of a replay with a hole.
_APPEND = """
if redis.call('GET', KEYS[3]) ~= ARGV[4] then return 0 end
local fresh = redis.call('EXISTS', KEYS[1]) == 0
for i = 5, #ARGV, 2 do
  redis.pcall('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], ARGV[i], 'e', ARGV[i + 1])
end
redis.call('EXPIRE', KEYS[1], ARGV[2])
if fresh then
  redis.call('SET', KEYS[2], ARGV[3], 'EX', ARGV[2])
else
  redis.call('EXPIRE', KEYS[2], ARGV[2])
end
return 1
"""


class RedisReplayStore:
    """A capped Redis Stream per session: entry id `<seq>-0`, field `e` = the event as JSON."""

    def __init__(self, redis: Any, *, maxlen: int = 2000, ttl_seconds: int = 7 * 24 * 3600) -> None:
        self.redis = redis
        self.maxlen = maxlen
        self.ttl_seconds = ttl_seconds
        self._append = redis.register_script(_APPEND)

    async def append(self, session_id: str, events: list[dict[str, Any]], *, lease: Lease) -> bool:
        """Append the owner's events; False when `lease` is not the session's lease any more (fenced)."""
        if not events:
            return True
        args: list[Any] = [self.maxlen, self.ttl_seconds, events[0]["seq"] - 1, lease.value]
        for event in events:
            args += [f"{event['seq']}-0", encode_event(event)]
        keys = [stream_key(session_id), floor_key(session_id), owner_key(session_id)]
        return bool(await self._append(keys=keys, args=args))

    async def since(self, session_id: str, seq: int) -> list[dict[str, Any]] | None:
        """Stored events with seq > `seq`, or None when some may be missing (→ resync): trimmed, or the
        stream began after `seq` (Redis lost or expired the session's earlier events), or the store knows
        nothing of the session. A stream written before floors were kept (no floor) counts from 0."""
        key = stream_key(session_id)
        entries = await self.redis.xrange(key, min=f"{seq + 1}-0", max="+")
        floor = await self.redis.get(floor_key(session_id))
        if floor is not None and seq < int(floor):
            return None
        if floor is None and not entries and not await self.redis.exists(key):
            return None
        if await self.redis.xlen(key) >= self.maxlen:
            first = await self.redis.xrange(key, count=1)
            if first and _seq_of(first[0][0]) > seq + 1:
                return None
        return [json.loads(fields[b"e"] if b"e" in fields else fields["e"]) for _, fields in entries]

    async def last_seq(self, session_id: str) -> int:
        last = await self.redis.xrevrange(stream_key(session_id), count=1)
        return _seq_of(last[0][0]) if last else 0

    async def delete(self, session_id: str) -> None:
        await self.redis.delete(stream_key(session_id), floor_key(session_id))


def _seq_of(entry_id: bytes | str) -> int:
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(text.split("-", 1)[0])
