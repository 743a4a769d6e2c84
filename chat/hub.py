"""This process's live sessions: the SessionService wired to Django storage and the event logs.

Consumers, REST views and commands call these functions; they never touch controllers' internals.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from agents.contract import ChatRequest, InputError
from agents.tools import registry as tool_registry
from agentsite.db import close_connection, database_sync_to_async
from agentsite.eventqueue import EventQueue
from chat.cluster import Cluster, OwnerUnavailable, RemoteError
from chat.controller import SessionController
from chat.events import SEQ_BLOCK, EventLog
from chat.markdown import render_markdown
from chat.models import Message
from chat.ownership import LocalOwnership, Ownership, RedisOwnership
from chat.relay import EventRelay, RedisReplayStore
from chat.service import Cancel, Command, ConfirmationReply, Remove, SessionService, Steer, Submit
from chat.store import DjangoQueueStore, Fenced, load_state, message_id_taken, message_store_pending

logger = logging.getLogger(__name__)

DORMANT_LOGS_KEPT = 10_000  # idle sessions whose last run this process keeps for `?since=` (a few KB each)
IDLE_SECONDS = 300.0  # a session's controller is dropped after this long without activity (reloaded on use)
WATCHERS_KEY = "agentsite:watchers:{}"  # hash: process id → "<open sockets>@<valid until, epoch s>"


def _with_html(
    publish: Callable[[dict[str, Any]], dict[str, Any]],
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Final answers also carry their Markdown rendered and sanitised server-side (`html`)."""

    def publish_with_html(event: dict[str, Any]) -> dict[str, Any]:
        if event.get("type") == "final_answer" and isinstance(event.get("content"), str):
            event["html"] = render_markdown(event["content"])
        return publish(event)

    return publish_with_html


class NotOwner(Exception):
    """Another process took the session while this one tried to load it."""


@dataclass
class Attachment:
    """A socket's (or SSE stream's) view of a session: its events queue and where it starts."""

    session_id: str
    queue: EventQueue
    snapshot: dict[str, Any]
    last_seq: int
    backlog: list[dict[str, Any]] | None  # None: the requested events are gone, the client must resync
    local: bool  # fed by this process's controller (else by a mirror of the owner's events)


class Hub:
    def __init__(self) -> None:
        from chat.runtime import DjangoRuntime

        self.service = SessionService(
            runtime=DjangoRuntime(),
            max_concurrent_turns=settings.AGENTSITE_MAX_CONCURRENT_TURNS,
            controller_factory=self._create_controller,
        )
        self.logs: dict[str, EventLog] = {}
        self.connections: dict[str, set[Any]] = {}
        self.titled: set[str] = set()  # sessions whose title this process already derived (message_submit)
        # Several processes share sessions when a Redis channel layer is configured (DESIGN.md §3).
        self.scaled = bool(settings.REDIS_URL)
        self.ownership: Ownership = LocalOwnership()
        self.cluster: Cluster | None = None
        self.replay: RedisReplayStore | None = None
        self._relays: dict[str, EventRelay] = {}
        self._redis: Any = None
        self._started = False
        self._start_lock: asyncio.Lock | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._janitor_task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        # Owned sessions that other processes mirror (live events are relayed only to those), with deadlines.
        self._mirrored: dict[str, float] = {}
        self._mirror_ttl = 3 * settings.AGENTSITE_SESSION_LEASE_SECONDS

    # -- life cycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the other processes (scaled mode): process channel, lease renewal, watchdog. Idempotent."""
        if self._started:
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._started:
                return
            if self.scaled:
                import redis.asyncio as aioredis

                # A blocking pool: a burst (200 sockets closing at once) waits for a connection instead
                # of failing with "Too many connections" (redis-py's default pool raises).
                pool = aioredis.BlockingConnectionPool.from_url(
                    settings.REDIS_URL, max_connections=64, timeout=10
                )
                self._redis = aioredis.Redis(connection_pool=pool)
                self.replay = RedisReplayStore(self._redis, maxlen=settings.AGENTSITE_EVENT_RETENTION)
                self.cluster = Cluster(
                    layer=get_channel_layer(),
                    handle_command=self._handle_remote,
                    replay=self.replay.since,
                    on_closed=self.close_sockets,
                )
                await self.cluster.start()
                self.ownership = RedisOwnership(
                    self._redis,
                    lease_ms=int(settings.AGENTSITE_SESSION_LEASE_SECONDS * 1000),
                    process_id=self.cluster.process_id,
                    on_lost=self._lost,
                )
                await self.ownership.start()
                self._watchdog = asyncio.get_running_loop().create_task(self._watch())
            self._janitor_task = asyncio.get_running_loop().create_task(self._janitor())
            self._started = True

    async def shutdown(self) -> None:
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        for task in (self._watchdog, self._janitor_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await self.service.shutdown()
        await tool_registry.shutdown()  # no ACP runner outlives the server (see close_session)
        close_runtime = getattr(self.service.runtime, "aclose", None)
        if close_runtime is not None:
            await close_runtime()
        await asyncio.gather(*(relay.aclose() for relay in self._relays.values()))
        self._relays.clear()
        await asyncio.gather(*(log.aclose() for log in self.logs.values()))
        self.logs.clear()
        await self.ownership.stop()
        if self.cluster is not None:
            await self.cluster.stop()
        if self._redis is not None:
            await self._redis.aclose()

    # -- owning a session ----------------------------------------------------------------------

    async def _create_controller(self, session_id: str, service: SessionService) -> SessionController:
        lease = await self.ownership.acquire(session_id)
        if lease is None:
            raise NotOwner(session_id)
        token = lease.token if self.scaled else None
        try:
            state = await database_sync_to_async(load_state)(session_id, seq_block=SEQ_BLOCK, token=token)
        except Fenced:
            await self.ownership.release(session_id)
            raise NotOwner(session_id) from None
        known = {item.request.message_id for item in state.pending} | set(state.running_message_ids)
        store = DjangoQueueStore(session_id, token=token, known=known)
        fanout = None
        if self.scaled:
            # Mirrors of the previous owner may be watching: relay until their keep-alives say otherwise.
            self._mirrored[session_id] = time.monotonic() + self._mirror_ttl
            relay = self._relays[session_id] = EventRelay(partial(self._relay_batch, session_id))

            def fanout(event: dict[str, Any]) -> None:
                if self.ownership.holds(session_id):  # a process past its lease publishes nothing
                    relay.add(event)

        dormant = self.logs.get(session_id) if not self.scaled else None
        # A session reloaded after it went idle here keeps its numbering and its last run's events.
        log = dormant or EventLog(
            session_id,
            last_seq=state.seq_reserved,
            reserved=state.seq_reserved + SEQ_BLOCK,
            reserve=store.reserve_seq,
            retention=settings.AGENTSITE_EVENT_RETENTION,
            fanout=fanout,
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
        # Messages stored while the session had no owner run now, unless the queue is paused.
        await controller.kick()
        return controller

    async def _relay_batch(self, session_id: str, batch: list[dict[str, Any]]) -> None:
        assert self.replay is not None and self.cluster is not None
        try:
            await self.replay.append(session_id, batch)  # first the store, so a gap can always be refilled
        except Exception:
            logger.warning(
                "could not store %d event(s) of session %s for replay", len(batch), session_id, exc_info=True
            )
        # Live events go to other processes only while some process mirrors the session (it says so when
        # it attaches and every half lease after); the replay store above gets them in any case.
        if self._mirrored.get(session_id, 0.0) > time.monotonic():
            await self.cluster.relay(session_id, batch)

    async def _lost(self, session_id: str) -> None:
        """Another process owns the session now: stop here without writing or publishing anything."""
        controller = self.service.forget(session_id)
        relay = self._relays.pop(session_id, None)
        if relay is not None:
            relay.discard()
        if controller is not None:
            await controller.abandon()
        log = self.logs.pop(session_id, None)
        if log is not None:
            await log.aclose()
        if self.cluster is not None:
            self.cluster.forget_relay(session_id)
        await tool_registry.close_session(session_id)  # ACP runners belong to the owner
        for connection in list(self.connections.get(session_id, ())):
            moved = getattr(connection, "session_moved", None)
            if moved is not None:
                moved()

    async def _route(self, session_id: str) -> str | None:
        """None when this process owns the session (taking it over when nobody does), else the owner."""
        await self.start()
        if not self.scaled:
            return None
        assert self.cluster is not None
        for _ in range(3):
            if self.ownership.holds(session_id) and self.service.peek(session_id) is not None:
                return None
            lease = await self.ownership.owner_of(session_id)
            if lease is not None and lease.owner != self.cluster.process_id:
                return lease.owner
            try:
                await self.service.get_controller(session_id)
                return None
            except NotOwner:
                continue
        raise OwnerUnavailable(f"Session {session_id} is changing owner; try again.")

    async def controller(self, session_id: str) -> SessionController:
        """This process's controller of the session (taking the session over when nobody owns it)."""
        await self.start()
        if self.scaled:
            owner = await self._route(session_id)
            if owner is not None:
                raise NotOwner(session_id)
        return await self.service.get_controller(session_id)

    def log(self, session_id: str) -> EventLog:
        return self.logs[session_id]

    # -- commands, snapshots, subscriptions: the same on every process -----------------------------

    async def dispatch(self, session_id: str, command: Command) -> Any:
        """Run a queue command where the session lives; errors come back to the caller only."""
        for _attempt in range(2):
            try:
                owner = await self._route(session_id)
            except OwnerUnavailable as exc:
                raise InputError("owner_unavailable", str(exc)) from None
            if owner is None:
                return await self.service.dispatch(session_id, command)
            assert self.cluster is not None
            if isinstance(command, Submit) and _attempt == 0:
                # The database is the truth: stored here first, so a dying owner cannot lose it.
                await database_sync_to_async(message_store_pending)(
                    session_id=session_id, request=command.request
                )
            try:
                return await self.cluster.call(owner, session_id, "command", encode_command(command))
            except RemoteError as exc:
                if exc.code == "not_owner":
                    continue
                raise InputError(exc.code, exc.message, message_id=exc.message_id) from None
            except OwnerUnavailable:
                if isinstance(command, Submit):
                    # Stored: it runs once the session has an owner again (DESIGN.md §3).
                    return {"message_id": command.request.message_id, "status": "queued"}
                raise InputError(
                    "owner_unavailable", "The server process running this session does not answer; try again."
                ) from None
        raise InputError("owner_unavailable", "The session is changing owner; try again.")

    async def snapshot(self, session_id: str) -> tuple[dict[str, Any], int]:
        owner = await self._route(session_id)
        if owner is None:
            controller = await self.service.get_controller(session_id)
            return controller.snapshot(), self.logs[session_id].last_seq
        assert self.cluster is not None
        answer = await self.cluster.call(owner, session_id, "snapshot", {})
        return answer["snapshot"], answer["last_seq"]

    async def attach(self, session_id: str, since: int | None) -> Attachment:
        """Subscribe to a session's events from wherever it lives, with what the client missed."""
        owner = await self._route(session_id)
        if owner is None:
            controller = await self.service.get_controller(session_id)
            log = self.logs[session_id]
            # subscribe, last_seq and replay in one step (no await between): nothing missed or doubled.
            queue, snapshot = controller.subscribe()
            backlog: list[dict[str, Any]] | None = log.replay(since) if since is not None else []
            attachment = Attachment(session_id, queue, snapshot, log.last_seq, backlog, local=True)
            if backlog is None and self.replay is not None:
                stored = await self.replay.since(session_id, since or 0)
                attachment.backlog = (
                    None if stored is None else [e for e in stored if e["seq"] <= log.last_seq]
                )
            return attachment
        assert self.cluster is not None and self.replay is not None
        remote = await self.cluster.mirror(session_id)
        queue = remote.subscribe()
        try:
            answer = await self.cluster.call(owner, session_id, "snapshot", {})
        except (OwnerUnavailable, RemoteError):
            remote.unsubscribe(queue)
            await self.cluster.release_if_unused(session_id)
            raise
        remote.seen(answer["last_seq"])
        backlog = []
        if since is not None:
            stored = await self.replay.since(session_id, since)
            backlog = None if stored is None else [e for e in stored if e["seq"] <= answer["last_seq"]]
        return Attachment(session_id, queue, answer["snapshot"], answer["last_seq"], backlog, local=False)

    async def detach(self, attachment: Attachment) -> None:
        if attachment.local:
            controller = self.service.peek(attachment.session_id)
            if controller is not None:
                controller.unsubscribe(attachment.queue)
        elif self.cluster is not None:
            remote = self.cluster.mirrors.get(attachment.session_id)
            if remote is not None:
                remote.unsubscribe(attachment.queue)
            await self.cluster.release_if_unused(attachment.session_id)

    async def _handle_remote(self, session_id: str, op: str, payload: dict[str, Any]) -> Any:
        """A command from another process for a session this process owns."""
        controller = self.service.peek(session_id)
        if not self.ownership.holds(session_id) or controller is None:
            raise RemoteError("not_owner", f"This process does not own session {session_id}.")
        if op in {"snapshot", "mirror"}:
            # Marked before the snapshot is read (no await between): later events are all relayed.
            self._mirrored[session_id] = time.monotonic() + self._mirror_ttl
            if op == "mirror":
                return None
            return {"snapshot": controller.snapshot(), "last_seq": self.logs[session_id].last_seq}
        if op == "announce":
            controller.announce(payload["event"])
            return None
        if op == "close":
            await self._close_here(session_id)
            return None
        try:
            return await self.service.dispatch(session_id, decode_command(payload))
        except InputError as exc:
            raise RemoteError(exc.code, exc.message, exc.message_id) from None

    async def evict_idle(self, *, idle_for: float = IDLE_SECONDS) -> int:
        """Drop the controllers of sessions idle here for `idle_for` seconds (memory stays bounded by the
        sessions in use, not by every session touched since start). Stored state is untouched."""
        now = time.monotonic()
        evicted = 0
        for session_id, controller in list(self.service.controllers.items()):
            log = self.logs.get(session_id)
            if not controller.idle or log is None or now - log.touched < idle_for:
                continue
            self.service.forget(session_id)
            await controller.abandon()
            if self.scaled:  # another process may own it next: its events are kept in the replay store
                relay = self._relays.pop(session_id, None)
                if relay is not None:
                    await relay.aclose()
                self.logs.pop(session_id, None)
                await log.aclose()
                await self.ownership.release(session_id)
            else:
                log.keep_last_run_only()
            evicted += 1
        self._cap_dormant_logs()
        return evicted

    def _cap_dormant_logs(self) -> None:
        """One process keeps the last run of sessions it dropped (for `?since=`), but not of every session
        ever used since it started: beyond DORMANT_LOGS_KEPT the least recently used go (their clients
        get `resync` instead of a replay)."""
        dormant = [(log.touched, sid) for sid, log in self.logs.items() if self.service.peek(sid) is None]
        excess = len(dormant) - DORMANT_LOGS_KEPT
        if excess > 0:
            for _, session_id in sorted(dormant)[:excess]:
                del self.logs[session_id]

    async def _janitor(self) -> None:
        while True:
            await asyncio.sleep(max(1.0, IDLE_SECONDS / 4))
            try:
                await self.evict_idle()
            except Exception:
                logger.exception("evicting idle sessions failed")

    async def _watch(self) -> None:
        """Take over sessions whose owner died: the ones watched here, and the ones with stored work."""
        interval = max(0.5, settings.AGENTSITE_SESSION_LEASE_SECONDS / 2)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.take_over_orphans()
                await self._renew_mirrors()
                for session_id in list(self.connections):
                    await self._publish_watchers(session_id)
            except Exception:
                logger.exception("session watchdog failed")

    async def _renew_mirrors(self) -> None:
        """Tell the owners of the sessions watched here through mirrors to keep relaying their events."""
        assert self.cluster is not None
        for session_id, remote in list(self.cluster.mirrors.items()):
            if not remote.subscribers:
                continue
            lease = await self.ownership.owner_of(session_id)
            if lease is None or lease.owner == self.cluster.process_id:
                continue
            try:
                await self.cluster.call(lease.owner, session_id, "mirror", {}, within=self._mirror_ttl / 3)
            except (OwnerUnavailable, RemoteError):
                pass  # the watchdog takes the session over if its owner is gone

    async def take_over_orphans(self) -> int:
        assert self.cluster is not None
        candidates = {sid for sid, remote in self.cluster.mirrors.items() if remote.subscribers}
        candidates |= set(await database_sync_to_async(_sessions_with_live_messages)())
        taken = 0
        for session_id in candidates:
            if self.ownership.holds(session_id) or await self.ownership.owner_of(session_id) is not None:
                continue
            try:
                await self.service.get_controller(session_id)
                taken += 1
            except NotOwner:
                pass
        return taken

    # -- sockets ---------------------------------------------------------------------------------

    def register(self, session_id: str, connection: Any) -> None:
        self.connections.setdefault(session_id, set()).add(connection)
        if self.scaled:
            self._spawn(self._publish_watchers(session_id))

    def unregister(self, session_id: str, connection: Any) -> None:
        connections = self.connections.get(session_id)
        if connections is not None:
            connections.discard(connection)
            if not connections:
                del self.connections[session_id]
        if self.scaled:
            self._spawn(self._publish_watchers(session_id))

    def connection_count(self, session_id: str) -> int:
        """Open sockets on this session in this process."""
        return len(self.connections.get(session_id, ()))

    async def watcher_count(self, session_id: str) -> int:
        """Open sockets on this session in every process (who would see a confirmation)."""
        if not self.scaled or self._redis is None:
            return self.connection_count(session_id)
        now = time.time()
        counts = await self._redis.hgetall(WATCHERS_KEY.format(session_id))
        total = 0
        for raw in counts.values():
            count, _, until = raw.decode().partition("@")
            if float(until) > now:
                total += int(count)
        return total

    async def _publish_watchers(self, session_id: str) -> None:
        """This process's socket count for the session, valid two lease periods (the watchdog renews it)."""
        if self._redis is None or self.cluster is None:
            return
        key = WATCHERS_KEY.format(session_id)
        count = self.connection_count(session_id)
        try:
            if count:
                until = time.time() + 2 * settings.AGENTSITE_SESSION_LEASE_SECONDS
                await self._redis.hset(key, self.cluster.process_id, f"{count}@{until}")
                await self._redis.expire(key, int(4 * settings.AGENTSITE_SESSION_LEASE_SECONDS) + 1)
            else:
                await self._redis.hdel(key, self.cluster.process_id)
        except Exception:
            logger.warning("could not publish the watchers of session %s", session_id, exc_info=True)

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def announce(self, session_id: str, event: dict[str, Any]) -> None:
        """Publish an event no turn produced (a cron text job's message) on the session's owner."""
        owner = await self._route(session_id)
        if owner is None:
            controller = await self.service.get_controller(session_id)
            controller.announce(event)
            return
        assert self.cluster is not None
        await self.cluster.call(owner, session_id, "announce", {"event": event})

    async def close_session(self, session_id: str) -> None:
        """Stop the session's live state (on its owner) and close its sockets on every process."""
        owner = None
        try:
            owner = await self._route(session_id)
        except OwnerUnavailable:
            pass
        if owner is not None and self.cluster is not None:
            try:
                await self.cluster.call(owner, session_id, "close", {})
            except (OwnerUnavailable, RemoteError):
                logger.warning("could not reach the owner of session %s to close it", session_id)
        else:
            await self._close_here(session_id)
        if self.cluster is not None:
            await self.cluster.announce_closed(session_id)  # every process closes its sockets on it
        else:
            self.close_sockets(session_id)

    def close_sockets(self, session_id: str) -> None:
        """The session was deleted: this process's sockets on it are told so and closed."""
        for connection in list(self.connections.get(session_id, ())):
            closed = getattr(connection, "session_closed", None)
            if closed is not None:
                closed()

    async def _close_here(self, session_id: str) -> None:
        await self.service.delete_session(session_id)
        # Tools that hold per-session resources (ACP runner subprocesses) release them: through the
        # agents tool registry, so chat does not import the acp app (chat → agents only).
        await tool_registry.close_session(session_id)
        relay = self._relays.pop(session_id, None)
        if relay is not None:
            await relay.aclose()
        log = self.logs.pop(session_id, None)
        if log is not None:
            await log.aclose()
        await self.ownership.release(session_id)

    async def recover_interrupted_turns(self) -> int:
        """At start-up: end every turn that was running when its process stopped (before serving).

        With several processes only sessions that no live process owns are touched (their lease expired).
        """
        await self.start()
        session_ids = await database_sync_to_async(
            lambda: list(
                Message.objects.filter(status=Message.RUNNING, session__status="open")
                .values_list("session_id", flat=True)
                .distinct()
            )
        )()
        recovered = 0
        for session_id in session_ids:
            if self.scaled and await self.ownership.owner_of(session_id) is not None:
                continue
            try:
                await self.service.get_controller(session_id)
                recovered += 1
            except NotOwner:
                pass
        return recovered


def _sessions_with_live_messages(limit: int = 500) -> list[str]:
    return list(
        Message.objects.filter(status__in=Message.ACTIVE_STATES, session__status="open")
        .values_list("session_id", flat=True)
        .distinct()[:limit]
    )


def encode_command(command: Command) -> dict[str, Any]:
    """A queue command as plain data for the channel layer."""
    return {"kind": type(command).__name__, **asdict(command)}


def decode_command(data: dict[str, Any]) -> Command:
    kind = data.pop("kind")
    if kind == "Submit":
        return Submit(request=ChatRequest(**data["request"]), steer=data["steer"])
    classes: dict[str, Any] = {
        "Steer": Steer,
        "Remove": Remove,
        "Cancel": Cancel,
        "ConfirmationReply": ConfirmationReply,
    }
    return classes[kind](**data)  # type: ignore[no-any-return]


async def _in_fresh_context[T](call: Callable[..., Coroutine[Any, Any, T]], *args: Any, **kwargs: Any) -> T:
    return await asyncio.create_task(call(*args, **kwargs), context=contextvars.Context())


def call_from_sync[T](call: Callable[..., Coroutine[Any, Any, T]], *args: Any, **kwargs: Any) -> T:
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
    """Shut down and forget this process's live sessions (tests, server shutdown), and close the database
    thread's connection (kept open between calls, agentsite/db.py): Postgres cannot drop a (test)
    database that still has a session."""
    global _hub
    if _hub is not None:
        await _hub.shutdown()
    _hub = None
    await close_connection()


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
    id_taken: bool | None = None,
) -> dict[str, Any]:
    """Queue a user message (WS `message` frame and REST POST …/messages share this).

    `stream_events` and `confirmation_timeout` are internal (cron runs, see ChatRequest); the WS and
    REST edges never pass them.
    """
    import uuid

    from agents.contract import ChatRequest, InputError
    from chat.service import Submit
    from chat.services import session_title_from_first_message

    hub = get_hub()
    # A server-assigned id cannot be taken; a client's id is checked against the stored history too.
    # (`id_taken`: the caller asked the database already, e.g. the socket together with its key check.)
    taken = message_id is not None and (
        id_taken
        if id_taken is not None
        else await database_sync_to_async(message_id_taken)(session_id, message_id)
    )
    message_id = message_id or uuid.uuid4().hex
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
    ack = await hub.dispatch(session_id, Submit(request=request, steer=steer))
    if session_id not in hub.titled:  # once per session and process: the title is set by the first message
        hub.titled.add(session_id)
        await database_sync_to_async(session_title_from_first_message)(session_id=session_id, content=content)
    return ack
