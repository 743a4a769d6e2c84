"""The watchdog of a process among several, every half lease:
- take over sessions whose owner died: the ones watched here, and the ones with stored work;
- queue, in the sessions owned here, messages stored while their owner could not be reached;
- tell the owners of the sessions watched here through mirrors to keep relaying their events;
- publish how many sockets watch each session here, so that any process can tell whether someone would
  see a confirmation (an unattended cron run puts it in the inbox instead).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from django.conf import settings
from redis.exceptions import RedisError

from agentsite.db import database_sync_to_async
from chat.live.cluster.channel import OwnerUnavailable, RemoteError
from chat.live.cluster.keys import deployment_key
from chat.live.sessions import NotOwner, sessions_with_live_messages
from chat.store import stored_for_later

if TYPE_CHECKING:
    from chat.live.cluster.sessions import ClusterSessions

logger = logging.getLogger(__name__)


class Watch:
    def __init__(self, sessions: ClusterSessions) -> None:
        self.sessions = sessions
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _watch(self) -> None:
        interval = max(0.5, settings.AGENTSITE_SESSION_LEASE_SECONDS / 2)
        redis_away = False
        while True:
            await asyncio.sleep(interval)
            try:
                await self.take_over_orphans()
                await self.renew_mirrors()
                for session_id in self.sessions.sockets.sessions():
                    await self.publish_watchers(session_id)
            except (RedisError, OSError) as exc:
                # The owners' events reach the mirrors through Redis: their sockets are told to reconnect
                # (they land on a process that can serve them once Redis is back).
                if not redis_away:
                    logger.warning("Redis does not answer (%s): the sessions watched here are told", exc)
                redis_away = True
                await self.sessions.fail_mirrors()
                continue
            except Exception:
                logger.exception("session watchdog failed")
            if redis_away:
                logger.warning("Redis answers again")
                redis_away = False

    async def take_over_orphans(self) -> int:
        sessions = self.sessions
        assert sessions.cluster is not None and sessions.ownership is not None
        candidates = {sid for sid, remote in sessions.cluster.mirrors.items() if remote.subscribers}
        stored = set(await database_sync_to_async(sessions_with_live_messages)())
        await self.adopt_stored(stored)
        taken = 0
        for session_id in candidates | stored:
            if (
                sessions.ownership.holds(session_id)
                or await sessions.ownership.owner_of(session_id) is not None
            ):
                continue
            try:
                await sessions.registry.get(session_id)
                taken += 1
            except NotOwner:
                pass
        return taken

    async def adopt_stored(self, session_ids: set[str]) -> None:
        """Messages stored for sessions owned here while the owner could not be reached (Redis away, the
        hand-over lost) join their queues: without this they would wait for the next owner."""
        sessions = self.sessions
        assert sessions.ownership is not None
        owned = [sid for sid in session_ids if sessions.ownership.holds(sid) and sessions.registry.peek(sid)]
        if not owned:
            return
        for session_id, requests in (await database_sync_to_async(stored_for_later)(owned)).items():
            controller = sessions.registry.peek(session_id)
            if controller is not None and sessions.ownership.holds(session_id):
                try:
                    await controller.adopt(requests)
                except Exception:  # Fenced, a failed write: that session's live state goes anyway
                    logger.warning(
                        "could not queue the stored messages of session %s", session_id, exc_info=True
                    )

    async def renew_mirrors(self) -> None:
        """Tell the owners of the sessions watched here through mirrors to keep relaying their events."""
        sessions = self.sessions
        assert sessions.cluster is not None and sessions.ownership is not None
        for session_id, remote in list(sessions.cluster.mirrors.items()):
            if not remote.subscribers:
                continue
            lease = await sessions.ownership.owner_of(session_id)
            if lease is None or lease.owner == sessions.cluster.process_id:
                continue
            try:
                await sessions.cluster.call(
                    lease.owner, session_id, "mirror", {}, within=sessions.mirror_ttl / 3
                )
            except (OwnerUnavailable, RemoteError):
                pass  # the watchdog takes the session over if its owner is gone

    async def publish_watchers(self, session_id: str) -> None:
        """This process's socket count for the session, valid two lease periods (the watchdog renews it)."""
        sessions = self.sessions
        if sessions.redis is None or sessions.cluster is None:
            return
        key = deployment_key("watchers", session_id)
        count = sessions.sockets.count(session_id)
        try:
            if count:
                until = time.time() + 2 * settings.AGENTSITE_SESSION_LEASE_SECONDS
                await sessions.redis.hset(key, sessions.cluster.process_id, f"{count}@{until}")
                await sessions.redis.expire(key, int(4 * settings.AGENTSITE_SESSION_LEASE_SECONDS) + 1)
            else:
                await sessions.redis.hdel(key, sessions.cluster.process_id)
        except Exception:
            logger.warning("could not publish the watchers of session %s", session_id, exc_info=True)

    async def watcher_count(self, session_id: str) -> int:
        """Open sockets on this session in every process."""
        redis = self.sessions.redis
        if redis is None:
            return self.sessions.sockets.count(session_id)
        now = time.time()
        total = 0
        for raw in (await redis.hgetall(deployment_key("watchers", session_id))).values():
            count, _, until = raw.decode().partition("@")
            if float(until) > now:
                total += int(count)
        return total
