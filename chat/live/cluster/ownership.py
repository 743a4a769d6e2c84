"""Who owns a live session: one process at a time, recorded as a lease with a fencing token.

Plain asyncio. `RedisOwnership` keeps the session's owner key (chat/live/cluster/keys.py: this deployment's)
= "<process>|<token>" with `SET NX PX` and renews it while the process lives; the token comes from `INCR`
of its fence key, so a later owner always holds a larger token than an earlier one (docs/architecture.md).

An owner that misses its renewal deadline (paused, partitioned, or its key taken) calls `on_lost`
and must stop publishing and writing at once; its writes are additionally fenced by the token: in the
database (chat/store.py Fence), and in Redis (the replay stream is appended to only under the lease).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from chat.live.cluster.keys import fence_key, owner_key

logger = logging.getLogger(__name__)


# Take the lease when it is free; the token is incremented only by the winner.
_ACQUIRE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return nil end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. token, 'PX', ARGV[2])
return token
"""
# Extend only a lease we still hold (same value).
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
# After Redis lost its data the counter starts again at 0: raise it to a token the database has seen.
_RAISE_FENCE = """
if tonumber(redis.call('GET', KEYS[1]) or '0') < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
end
return 1
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def new_process_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Lease:
    session_id: str
    owner: str
    token: int

    @property
    def value(self) -> str:
        """What the owner key holds while this lease does."""
        return f"{self.owner}|{self.token}"


class RedisOwnership:
    """Leases in Redis, renewed every third of their length; a missed renewal means the lease is lost."""

    def __init__(
        self,
        redis: Any,
        *,
        lease_ms: int = 10_000,
        process_id: str | None = None,
        on_lost: Callable[[str], Awaitable[None]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.redis = redis
        self.lease_ms = lease_ms
        self.process_id = process_id or new_process_id()
        self.on_lost = on_lost
        self._clock = clock
        self._held: dict[str, Lease] = {}
        self._valid_until: dict[str, float] = {}
        self._renewer: asyncio.Task[None] | None = None
        self._acquire = redis.register_script(_ACQUIRE)
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)
        self._raise_fence = redis.register_script(_RAISE_FENCE)

    async def acquire(self, session_id: str) -> Lease | None:
        if self.holds(session_id):
            return self._held[session_id]
        started = self._clock()
        token = await self._acquire(
            keys=[owner_key(session_id), fence_key(session_id)],
            args=[self.process_id, self.lease_ms],
        )
        if token is None:
            return None
        lease = Lease(session_id, self.process_id, int(token))
        self._held[session_id] = lease
        # Measured from before the request: the lease may have started expiring as soon as Redis set it.
        self._valid_until[session_id] = started + self.lease_ms / 1000
        return lease

    async def raise_fence(self, session_id: str, token: int) -> None:
        """The next token of the session will be above `token` (one the database has seen)."""
        await self._raise_fence(keys=[fence_key(session_id)], args=[token])

    async def owner_of(self, session_id: str) -> Lease | None:
        raw = await self.redis.get(owner_key(session_id))
        if raw is None:
            return None
        value = raw.decode() if isinstance(raw, bytes) else str(raw)
        owner, _, token = value.rpartition("|")
        return Lease(session_id, owner, int(token))

    def lease(self, session_id: str) -> Lease | None:
        """The lease this process took for the session, until it lets it go or learns it lost it (Redis
        decides whether it still holds: writes under it are fenced, chat/live/cluster/relay.py)."""
        return self._held.get(session_id)

    def holds(self, session_id: str) -> bool:
        """Held and not past its deadline by this process's clock (checked before every publish)."""
        until = self._valid_until.get(session_id)
        return until is not None and self._clock() < until

    async def release(self, session_id: str) -> None:
        lease = self._held.pop(session_id, None)
        self._valid_until.pop(session_id, None)
        if lease is not None:
            with contextlib.suppress(Exception):
                await self._release(keys=[owner_key(session_id)], args=[lease.value])

    async def start(self) -> None:
        if self._renewer is None:
            self._renewer = asyncio.get_running_loop().create_task(self._renew_forever())

    async def stop(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
            self._renewer = None
        for session_id in list(self._held):
            await self.release(session_id)

    async def renew_all(self) -> list[str]:
        """Renew every held lease once; return the sessions whose lease is lost.

        Renewals run side by side, each bounded by what is left of its lease (at least a renewal interval:
        a renewal that comes late is still safe, Redis extends only a key that still holds our value), and
        each loss is handled as soon as it is known: one slow answer (Redis slow or away) does not keep the
        other leases unrenewed, nor this process acting as owner long past a lease it lost."""
        held = list(self._held.items())
        kept = await asyncio.gather(*(self._renew_one(sid, lease) for sid, lease in held))
        return [sid for (sid, _), ok in zip(held, kept, strict=True) if not ok]

    async def _renew_one(self, session_id: str, lease: Lease) -> bool:
        started = self._clock()
        left = self._valid_until.get(session_id, started) - started
        try:
            ok = await asyncio.wait_for(
                self._renew(keys=[owner_key(session_id)], args=[lease.value, self.lease_ms]),
                timeout=max(left, self.lease_ms / 3000),
            )
        except Exception:
            logger.warning("could not renew the lease of session %s", session_id, exc_info=True)
            ok = 0
        if not ok:
            return await self._drop(session_id)
        if self._held.get(session_id) == lease:
            self._valid_until[session_id] = started + self.lease_ms / 1000
        return True

    async def _drop(self, session_id: str) -> bool:
        """The lease is lost: this process stops acting as the session's owner (on_lost); False."""
        if self._held.pop(session_id, None) is None:
            return False
        self._valid_until.pop(session_id, None)
        logger.warning("lost the lease of session %s", session_id)
        if self.on_lost is not None:
            await self.on_lost(session_id)
        return False

    async def _renew_forever(self) -> None:
        interval = self.lease_ms / 3000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.renew_all()
            except Exception:
                logger.exception("lease renewal failed")
