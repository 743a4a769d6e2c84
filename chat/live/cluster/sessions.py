"""Several processes share the sessions (Postgres + Redis): each live session has one owner process.

- Ownership is a Redis lease with a fencing token (ownership.py); the process that runs a session's
  turns holds it, renews it, and a process past its lease writes and publishes nothing more.
- Commands go to the owner over the channel layer (channel.py); a message is stored by whichever
  process received it first, so a dying owner cannot lose it (the database is the truth).
- The owner's events reach sockets on other processes through mirrors, and a Redis Stream per session
  (relay.py) holds them for `?since=` replay on any process.
- A watchdog takes over sessions whose owner died (watched here, or with stored work), keeps owners
  relaying to the mirrors here, and publishes how many sockets watch each session here (watch.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import replace
from functools import partial
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import RedisError

from agents.contract import InputError
from agents.tools import registry as tool_registry
from agentsite.db import database_sync_to_async
from chat.live.cluster.channel import Cluster, OwnerUnavailable, RemoteError
from chat.live.cluster.ownership import RedisOwnership
from chat.live.cluster.relay import EventRelay, RedisReplayStore
from chat.live.cluster.slots import RedisTurnSlots
from chat.live.cluster.watch import Watch
from chat.live.commands import Command, Submit, decode_command, encode_command
from chat.live.controller import SessionController
from chat.live.events import UNAVAILABLE, EventLog
from chat.live.sessions import (
    Attachment,
    LiveSessions,
    NotOwner,
    Unavailable,
    sessions_with_running_turns,
)
from chat.store import Fenced, message_store_pending

logger = logging.getLogger(__name__)


class ClusterSessions(LiveSessions):
    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.redis: Any = None
        self.replay: RedisReplayStore | None = None
        self.cluster: Cluster | None = None
        self.ownership: RedisOwnership | None = None
        self.watch: Watch | None = None
        self._relays: dict[str, EventRelay] = {}
        # Owned sessions that other processes mirror (live events are relayed only to those), with deadlines.
        self.mirrored: dict[str, float] = {}
        self.mirror_ttl = 3 * settings.AGENTSITE_SESSION_LEASE_SECONDS

    # -- life cycle ------------------------------------------------------------------------------

    async def _start(self) -> None:
        import redis.asyncio as aioredis

        # A blocking pool: a burst (200 sockets closing at once) waits for a connection instead of failing
        # with "Too many connections" (redis-py's default pool raises). When Redis is away, calls fail within
        # a second or two (short timeouts, two quick retries) instead of backing off for ten: leases are
        # renewed every third of their length, and a lost one must be noticed before it expires.
        pool = aioredis.BlockingConnectionPool.from_url(
            settings.REDIS_URL,
            max_connections=64,
            timeout=10,
            socket_connect_timeout=1,
            socket_timeout=5,
            retry=Retry(ExponentialBackoff(cap=0.2, base=0.05), 2),
        )
        self.redis = aioredis.Redis(connection_pool=pool)
        self.replay = RedisReplayStore(self.redis, maxlen=settings.AGENTSITE_EVENT_RETENTION)
        try:
            await self.redis.ping()
        except (RedisError, OSError) as exc:
            await self.redis.aclose()
            url = settings.REDIS_URL
            raise ImproperlyConfigured(
                f"Redis at REDIS_URL={url} does not answer ({exc}). Start it, or fix REDIS_URL."
            ) from None
        self.cluster = Cluster(
            layer=get_channel_layer(),
            handle_command=self._handle_remote,
            replay=self.replay.since,
            on_closed=self.sockets.tell_closed,
            on_failure=self.fail_mirrors,
        )
        await self.cluster.start()
        self.ownership = RedisOwnership(
            self.redis,
            lease_ms=int(settings.AGENTSITE_SESSION_LEASE_SECONDS * 1000),
            process_id=self.cluster.process_id,
            on_lost=self._lost,
        )
        await self.ownership.start()
        limit, deployment = settings.AGENTSITE_USER_MAX_CONCURRENT_TURNS, settings.CACHE_PREFIX
        self.slots = RedisTurnSlots(self.redis, limit, deployment).start()
        sockets = settings.AGENTSITE_USER_MAX_SOCKETS
        self.connections = RedisTurnSlots(self.redis, sockets, deployment, kind="sockets").start()
        self.watch = Watch(self)
        self.watch.start()

    async def _stop_sessions(self) -> None:
        if self.watch is not None:
            await self.watch.stop()

    async def _stop(self) -> None:
        await self.slots.stop()
        await self.connections.stop()
        await asyncio.gather(*(relay.aclose() for relay in self._relays.values()))
        self._relays.clear()
        if self.ownership is not None:
            await self.ownership.stop()
        if self.cluster is not None:
            await self.cluster.stop()
        if self.redis is not None:
            await self.redis.aclose()

    # -- owning a session ------------------------------------------------------------------------

    async def _load(self, session_id: str) -> tuple[SessionController, EventLog]:
        assert self.ownership is not None
        lease = await self.ownership.acquire(session_id)
        if lease is None:
            raise NotOwner(session_id)
        # Mirrors of the previous owner may be watching: relay until their keep-alives say otherwise.
        self.mirrored[session_id] = time.monotonic() + self.mirror_ttl
        relay = self._relays[session_id] = EventRelay(partial(self._relay_batch, session_id))
        ownership = self.ownership

        def fanout(event: dict[str, Any]) -> None:
            if ownership.holds(session_id):  # a process past its lease publishes nothing
                relay.add(event)

        try:
            return await self._build(session_id, token=lease.token, fanout=fanout)
        except NotOwner as exc:
            if exc.token is not None:  # Redis lost its data, counts from 1 again: claim above the stored one
                await ownership.raise_fence(session_id, exc.token)
            await ownership.release(session_id)
            self._relays.pop(session_id, None)
            raise

    async def _relay_batch(self, session_id: str, batch: list[dict[str, Any]]) -> None:
        assert self.replay is not None and self.cluster is not None and self.ownership is not None
        lease = self.ownership.lease(session_id)
        if lease is None:
            return  # let go or lost: this process publishes nothing more
        try:
            # First the store, so a gap can always be refilled. Fenced by the lease: refused once another
            # process owns the session, and then nothing of this batch reaches anyone.
            if not await self.replay.append(session_id, batch, lease=lease):
                return
        except Exception:
            logger.warning(
                "could not store %d event(s) of session %s for replay", len(batch), session_id, exc_info=True
            )
        # Live events go to other processes only while some process mirrors the session (it says so when
        # it attaches and every half lease after); the replay store above gets them in any case.
        if self.mirrored.get(session_id, 0.0) > time.monotonic():
            await self.cluster.relay(session_id, batch)

    async def _lost(self, session_id: str) -> None:
        """Another process owns the session now (or Redis does not answer): stop here without writing or
        publishing anything (the turn stops in the background: renewals wait for nobody). Sockets fed by this
        process's controller are told (they reconnect to the new owner); those fed by a mirror go on."""
        controller = self.registry.forget(session_id)
        if controller is not None:
            controller.silence(notice=UNAVAILABLE)
            self._spawn(controller.abandon())
        await self.registry.drop_log(session_id)
        await self._failed(session_id)

    async def _failed(self, session_id: str) -> None:
        if (relay := self._relays.pop(session_id, None)) is not None:
            relay.discard()
        if self.cluster is not None:
            self.cluster.forget_relay(session_id)
        await tool_registry.close_session(session_id)  # ACP runners belong to the owner
        if self.ownership is not None:
            await self.ownership.release(session_id)

    async def fail(self, session_id: str, *, fenced: bool = False) -> None:
        await super().fail(session_id, fenced=fenced)
        # Mirrors follow the session's owner: a fenced process is not it any more and tells them nothing.
        # (When Redis is away, the mirrors' watchdogs tell their sockets.)
        if self.cluster is not None and not fenced:
            with contextlib.suppress(RedisError, OSError):
                await self.cluster.announce_failed(session_id)

    async def fail_mirrors(self, session_ids: list[str] | None = None) -> None:
        """Owners' events cannot reach this process: these mirrors' (all, by default) sockets reconnect."""
        assert self.cluster is not None
        for session_id in list(self.cluster.mirrors) if session_ids is None else session_ids:
            remote = self.cluster.mirrors.get(session_id)
            if remote is not None:
                remote.fail(UNAVAILABLE)
                await self.cluster.drop_mirror(session_id)

    async def route(self, session_id: str) -> str | None:
        """None when this process owns the session (taking it over when nobody does), else the owner.
        OwnerUnavailable when that cannot be told now (Redis does not answer, the owner is changing)."""
        try:
            return await self._route(session_id)
        except (RedisError, OSError) as exc:
            reason = type(exc).__name__
            raise OwnerUnavailable(f"Sessions cannot be routed now ({reason}); try again.") from None

    async def _route(self, session_id: str) -> str | None:
        await self.start()
        assert self.ownership is not None and self.cluster is not None
        for _ in range(3):
            if self.ownership.holds(session_id) and self.registry.peek(session_id) is not None:
                return None
            lease = await self.ownership.owner_of(session_id)
            if lease is not None and lease.owner != self.cluster.process_id:
                return lease.owner
            try:
                await self.registry.get(session_id)
                return None
            except NotOwner:
                continue
        raise OwnerUnavailable(f"Session {session_id} is changing owner; try again.")

    async def controller(self, session_id: str) -> SessionController:
        if await self.route(session_id) is not None:
            raise NotOwner(session_id)
        return await self.registry.get(session_id)

    # -- the facade ----------------------------------------------------------------------------------

    async def dispatch(self, session_id: str, command: Command) -> Any:
        for attempt in range(2):
            try:
                owner = await self.route(session_id)
            except OwnerUnavailable as exc:
                if isinstance(command, Submit):
                    return await self._store_for_later(session_id, command)
                raise InputError("owner_unavailable", str(exc)) from None
            if owner is None:
                return await self._run_here(session_id, command)
            assert self.cluster is not None
            if isinstance(command, Submit) and not command.stored and attempt == 0:
                # The database is the truth: stored here first, so a dying owner cannot lose it.
                await database_sync_to_async(message_store_pending)(
                    session_id=session_id, request=command.request
                )
                command = replace(command, stored=True)
            try:
                return await self.cluster.call(owner, session_id, "command", encode_command(command))
            except RemoteError as exc:
                if exc.code == "not_owner":
                    continue
                raise InputError(exc.code, exc.message, message_id=exc.message_id) from None
            except OwnerUnavailable:
                if isinstance(command, Submit):
                    return await self._store_for_later(session_id, command)
                raise InputError(
                    "owner_unavailable", "The server process running this session does not answer; try again."
                ) from None
        raise InputError("owner_unavailable", "The session is changing owner; try again.")

    async def _run_here(self, session_id: str, command: Command) -> Any:
        """On this process's controller. Fenced: another process owns it now (the live state here goes)."""
        try:
            return await self.registry.dispatch(session_id, command)
        except Fenced:
            if isinstance(command, Submit):
                return await self._store_for_later(session_id, command)
            raise InputError("owner_unavailable", "The session is changing owner; try again.") from None

    async def _store_for_later(self, session_id: str, command: Submit) -> dict[str, Any]:
        """No owner can take the message now: stored here (if it is not yet), it runs once the session has an
        owner again (the watchdog of any process takes over sessions with stored work)."""
        if not command.stored:
            await database_sync_to_async(message_store_pending)(
                session_id=session_id, request=command.request
            )
        return {"message_id": command.request.message_id, "status": "queued"}

    async def snapshot(self, session_id: str) -> tuple[dict[str, Any], int]:
        try:
            owner = await self.route(session_id)
            if owner is None:
                controller = await self.registry.get(session_id)
                return controller.snapshot(), self.registry.log(session_id).last_seq
            assert self.cluster is not None
            answer = await self.cluster.call(owner, session_id, "snapshot", {})
        except (OwnerUnavailable, RemoteError, NotOwner):
            raise Unavailable("The server process running this session does not answer.") from None
        return answer["snapshot"], answer["last_seq"]

    async def attach(self, session_id: str, since: int | None) -> Attachment:
        try:
            return await self._attach(session_id, since)
        except (OwnerUnavailable, RemoteError, NotOwner):
            raise Unavailable("The session is changing server process; reconnect.") from None

    async def _attach(self, session_id: str, since: int | None) -> Attachment:
        owner = await self.route(session_id)
        assert self.cluster is not None and self.replay is not None
        if owner is None:
            controller = await self.registry.get(session_id)
            log = self.registry.log(session_id)
            # subscribe, last_seq and replay in one step (no await between): nothing missed or doubled.
            queue, snapshot = controller.subscribe()
            backlog: list[dict[str, Any]] | None = log.replay(since) if since is not None else []
            last_seq = log.last_seq
            if backlog is None:  # older than this process keeps: the shared store, then what it keeps
                retained = log.replay(log.floor) or []
                stored = await self.replay.since(session_id, since or 0)
                if stored is not None:
                    first = retained[0]["seq"] if retained else last_seq + 1
                    backlog = [event for event in stored if event["seq"] < first] + retained
            return Attachment(session_id, queue, snapshot, last_seq, backlog, local=True, since=since)
        # A mirror of the owner's events: joined (and subscribed) before the snapshot is asked for, and the
        # owner relays to it from that moment on, after appending to the replay store; so an event this
        # read of the store misses is one the mirror will deliver (the attachment's position says where
        # this subscriber stands: a shared position would drop events other subscribers still need).
        remote = await self.cluster.mirror(session_id)
        queue = remote.subscribe()
        try:
            answer = await self.cluster.call(owner, session_id, "snapshot", {})
        except (OwnerUnavailable, RemoteError):
            remote.unsubscribe(queue)
            await self.cluster.release_if_unused(session_id)
            raise
        last_seq = answer["last_seq"]
        backlog = []
        if since is not None:
            stored = await self.replay.since(session_id, since)
            backlog = None if stored is None else [event for event in stored if event["seq"] <= last_seq]
        return Attachment(session_id, queue, answer["snapshot"], last_seq, backlog, local=False, since=since)

    async def detach(self, attachment: Attachment) -> None:
        if attachment.local:
            controller = self.registry.peek(attachment.session_id)
            if controller is not None:
                controller.unsubscribe(attachment.queue)
            self._shed_if_crowded()
        elif self.cluster is not None:
            remote = self.cluster.mirrors.get(attachment.session_id)
            if remote is not None:
                remote.unsubscribe(attachment.queue)
            await self.cluster.release_if_unused(attachment.session_id)

    async def announce(self, session_id: str, event: dict[str, Any]) -> None:
        owner = await self.route(session_id)
        if owner is None:
            (await self.registry.get(session_id)).announce(event)
            return
        assert self.cluster is not None
        await self.cluster.call(owner, session_id, "announce", {"event": event})

    async def close(self, session_id: str) -> None:
        owner = None
        try:
            owner = await self.route(session_id)
        except OwnerUnavailable:
            pass
        assert self.cluster is not None
        if owner is not None:
            try:
                await self.cluster.call(owner, session_id, "close", {})
            except (OwnerUnavailable, RemoteError):
                logger.warning("could not reach the owner of session %s to close it", session_id)
        else:
            await self._close_here(session_id)
        try:
            await self.cluster.announce_closed(session_id)  # every process closes its sockets on it
        except (RedisError, OSError):
            logger.warning("could not tell the other processes that session %s closed", session_id)
            self.sockets.tell_closed(session_id)

    async def _close_here(self, session_id: str) -> None:
        await self.registry.close(session_id)
        await tool_registry.close_session(session_id)
        relay = self._relays.pop(session_id, None)
        if relay is not None:
            await relay.aclose()
        assert self.ownership is not None
        await self.ownership.release(session_id)

    async def recover_interrupted_turns(self) -> int:
        """Only sessions that no live process owns are touched (their lease expired)."""
        await self.start()
        assert self.ownership is not None
        recovered = 0
        for session_id in await database_sync_to_async(sessions_with_running_turns)():
            if await self.ownership.owner_of(session_id) is not None:
                continue
            try:
                await self.registry.get(session_id)
                recovered += 1
            except NotOwner:
                pass
        return recovered

    async def _handle_remote(self, session_id: str, op: str, payload: dict[str, Any]) -> Any:
        """A command from another process for a session this process owns."""
        assert self.ownership is not None and self.cluster is not None
        controller = self.registry.peek(session_id)
        if not self.ownership.holds(session_id) or controller is None:
            raise RemoteError("not_owner", f"This process does not own session {session_id}.")
        if op in {"snapshot", "mirror"}:
            # Marked before the snapshot is read (no await between): later events are all relayed.
            self.mirrored[session_id] = time.monotonic() + self.mirror_ttl
            last_seq = self.registry.log(session_id).last_seq if op == "snapshot" else 0
            return None if op == "mirror" else {"snapshot": controller.snapshot(), "last_seq": last_seq}
        if op == "announce":
            controller.announce(payload["event"])
            return None
        if op == "close":
            await self._close_here(session_id)
            return None
        try:
            return await self._run_here(session_id, decode_command(payload))
        except InputError as exc:
            raise RemoteError(exc.code, exc.message, exc.message_id) from None

    # -- sockets and idle sessions --------------------------------------------------------------------

    def register(self, session_id: str, socket: Any) -> None:
        super().register(session_id, socket)
        if self.watch is not None:
            self._spawn(self.watch.publish_watchers(session_id))

    def unregister(self, session_id: str, socket: Any) -> None:
        super().unregister(session_id, socket)
        if self.watch is not None:
            self._spawn(self.watch.publish_watchers(session_id))

    async def watcher_count(self, session_id: str) -> int:
        if self.watch is None:
            return await super().watcher_count(session_id)
        try:
            return await self.watch.watcher_count(session_id)
        except (RedisError, OSError):
            return await super().watcher_count(session_id)  # this process's sockets are what can be told

    async def _evicted(self, session_id: str) -> None:
        # Another process may own it next: its events are kept in the replay store, not here.
        relay = self._relays.pop(session_id, None)
        if relay is not None:
            await relay.aclose()
        await self.registry.drop_log(session_id)
        assert self.ownership is not None
        await self.ownership.release(session_id)
