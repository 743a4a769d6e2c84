"""Per-user slots across every process, in Redis: a user's running turns (docs/protocol.md §6.4) and open
sockets and SSE streams (§6.6), each kind counted in a set of its own.

A user's running turns are members of the sorted set `agentsite:<deployment>:turns:<user>` (user ids are
per database: the deployment's cache prefix keeps apart those that share one Redis), scored by when each
expires; a slot is taken (Lua, atomically) when fewer than the limit are unexpired, and renewed every
third of its lifetime while its turn runs, so the slots of a process that died free themselves. Waiting
controllers are woken at once when a slot is given back here, and every half second while they wait
(a slot may have been given back by another process). When Redis does not answer, a turn is not held up
by fairness: it gets a slot that counts only here (and the outage is told elsewhere: chat/live/cluster).
Open sockets are counted the same way in `agentsite:<deployment>:sockets:<user>` (kind "sockets"): a
socket's slot lives while it is open, so the sockets of a killed process stop counting within a lifetime.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import Any

from redis.exceptions import RedisError

from chat.live.cluster.keys import deployment_key
from chat.live.slots import Slot, TurnSlots

logger = logging.getLogger(__name__)

SLOT_SECONDS = 30.0  # a slot's lifetime without renewal
WAKE_EVERY = 0.5  # how often waiting controllers look again

# KEYS[1] the user's set; ARGV: now, expiry, member, limit. 1 when taken.
_TAKE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], math.floor((tonumber(ARGV[2]) - tonumber(ARGV[1])) * 1000) + 1000)
return 1
"""


class RedisTurnSlots(TurnSlots):
    def __init__(self, redis: Any, limit: int, deployment: str = "", kind: str = "turns") -> None:
        super().__init__(limit)
        self.redis = redis
        self._deployment = deployment
        self._kind = kind
        self._take = redis.register_script(_TAKE)
        self._mine: dict[str, int] = {}  # member → user, the slots this process holds
        self._task: asyncio.Task[None] | None = None

    def _key(self, user_id: int) -> str:
        return deployment_key(self._kind, user_id, self._deployment)

    def start(self) -> RedisTurnSlots:
        if self._task is None and self.limit > 0:
            self._task = asyncio.get_running_loop().create_task(self._tend_forever())
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        for member, user_id in list(self._mine.items()):
            await self._give_back(member, user_id)

    async def take(self, user_id: int) -> Slot | None:
        member = uuid.uuid4().hex
        now = time.time()
        try:
            taken = await self._take(
                keys=[self._key(user_id)], args=[now, now + SLOT_SECONDS, member, self.limit]
            )
        except (RedisError, OSError):
            logger.warning("%s slots: Redis does not answer; counting user %s's here", self._kind, user_id)
            return await super().take(user_id)
        if not taken:
            return None
        self._mine[member] = user_id
        return _RedisSlot(self, member, user_id)

    def _released(self, member: str, user_id: int) -> None:
        task = asyncio.get_running_loop().create_task(self._give_back(member, user_id))
        self._wakers.add(task)
        task.add_done_callback(self._wakers.discard)

    async def _give_back(self, member: str, user_id: int) -> None:
        self._mine.pop(member, None)
        try:
            await self.redis.zrem(self._key(user_id), member)
        except (RedisError, OSError):
            logger.warning("%s slots: could not give back user %s's slot (it expires)", self._kind, user_id)
        self.wake(user_id)

    async def _tend_forever(self) -> None:
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(WAKE_EVERY)
            for user_id in self.waiting_users():
                self.wake(user_id)
            if time.monotonic() - renewed >= SLOT_SECONDS / 3:
                renewed = time.monotonic()
                with contextlib.suppress(RedisError, OSError):
                    await self._renew()

    async def _renew(self) -> None:
        """One ZADD per user (with every slot of theirs held here), not one per slot: a process may hold
        thousands of sockets' slots."""
        expiry = time.time() + SLOT_SECONDS
        by_user: dict[int, dict[str, float]] = {}
        for member, user_id in list(self._mine.items()):
            by_user.setdefault(user_id, {})[member] = expiry
        async with self.redis.pipeline(transaction=False) as pipe:
            for user_id, members in by_user.items():
                pipe.zadd(self._key(user_id), members, xx=True)
                pipe.pexpire(self._key(user_id), int(SLOT_SECONDS * 1000) + 1000)
            await pipe.execute()


class _RedisSlot:
    def __init__(self, slots: RedisTurnSlots, member: str, user_id: int) -> None:
        self._slots: RedisTurnSlots | None = slots
        self._member = member
        self._user_id = user_id

    def release(self) -> None:
        if self._slots is not None:  # once
            slots, self._slots = self._slots, None
            slots._released(self._member, self._user_id)
