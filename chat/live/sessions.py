"""The live sessions of this process, behind one small facade, in one of two topologies.

Edges (the socket, REST views, SSE, cron runs) call only this facade: `dispatch` a queue command,
`attach`/`detach` a subscriber (with what it missed since a seq), read a `snapshot`, `announce` an
event no turn produced, `close` a deleted session. Two implementations, chosen once at start-up
(`live_sessions()` in chat/live/__init__.py):
- `LocalSessions` (chat/live/local.py): one process owns every session;
- `ClusterSessions` (chat/live/cluster/sessions.py): several processes on Postgres + Redis, each live
  session owned by one of them (docs/architecture.md).
What they share is here: the registry of controllers and event logs (chat/live/registry.py), the
sockets, how a session's controller is built from its stored state, and dropping idle sessions.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from accounts.credentials import AccountWatch
from agents.contract import Runtime
from agents.tools import registry as tool_registry
from agentsite.db import database_sync_to_async
from agentsite.exceptions import DomainError
from chat.live.commands import Command
from chat.live.controller import SessionController
from chat.live.events import SEQ_BLOCK, UNAVAILABLE, EventLog, SubscriberQueue
from chat.live.registry import LiveRegistry
from chat.live.slots import FREE, Slot, TurnSlots
from chat.live.sockets import Sockets
from chat.models import Message, Session
from chat.statuses import MessageStatus
from chat.store import DjangoQueueStore, Fenced, load_state
from security.ratelimit import TokenBuckets

logger = logging.getLogger(__name__)

IDLE_SECONDS = 300.0  # a session's controller is dropped after this long without activity (reloaded on use)
# Beyond this many live controllers, idle ones whose events are just their last run are dropped at once
# (least recently used first): an integration that opens a chat per request leaves thousands of them.
LIVE_KEPT = 500
# UNAVAILABLE (chat/live/events.py Signal) is put in a subscriber's queue when the session cannot go on
# here: a service it depends on failed, or another process owns it now. The socket or SSE stream says
# `error unavailable` and closes (1012); the client reconnects with `?since=` and resumes.

Fanout = Callable[[dict[str, Any]], None]


class NotOwner(Exception):
    """Another process took the session while this one tried to load it. `token`: the newest fencing
    token the database has seen for the session, when that is why."""

    def __init__(self, session_id: str, token: int | None = None) -> None:
        super().__init__(session_id)
        self.token = token


class Unavailable(DomainError):
    """The process that runs the session does not answer (it may be dying; its lease will expire): the
    client tries again (a socket is closed with 1012 and reconnects, REST answers 503)."""

    code = "owner_unavailable"
    status = 503


@dataclass
class Attachment:
    """A socket's (or SSE stream's) view of a session: its events queue and where it starts.

    The client gets `snapshot` (as of `last_seq`), then `backlog` (the events after its `since`, or None:
    they are gone and it must resync), then every event of `queue` with a seq above `position`: the seq
    through which it has everything once the backlog is sent. `position` is its own, never a shared one:
    a replay store read may not reach `last_seq` yet, and those events then come through the queue.
    """

    session_id: str
    queue: SubscriberQueue
    snapshot: dict[str, Any]
    last_seq: int
    backlog: list[dict[str, Any]] | None
    local: bool  # fed by this process's controller (else by a mirror of the owner's events)
    since: int | None = None

    @property
    def position(self) -> int:
        if self.since is None or self.backlog is None:
            return self.last_seq
        return max(self.since, self.backlog[-1]["seq"]) if self.backlog else self.since


class LiveSessions(ABC):
    def __init__(self, *, runtime: Runtime | None = None, max_concurrent_turns: int | None = None) -> None:
        if runtime is None:
            from chat.runtime import DjangoRuntime

            runtime = DjangoRuntime()
        self.registry = LiveRegistry(
            runtime=runtime,
            load=self._load,
            max_concurrent_turns=max_concurrent_turns or settings.AGENTSITE_MAX_CONCURRENT_TURNS,
        )
        self.sockets = Sockets()
        # Sockets and SSE streams by what they authenticated with: closed when that ends (on any process).
        self.accounts = AccountWatch(on_user_ended=self._user_ended)
        # A user's turns at once, across the deployment (the cluster counts them in Redis).
        self.slots = TurnSlots(settings.AGENTSITE_USER_MAX_CONCURRENT_TURNS)
        # A user's open sockets and SSE streams, across the deployment (the cluster counts them in Redis).
        self.connections = TurnSlots(settings.AGENTSITE_USER_MAX_SOCKETS)
        # Each user's counted socket frames in this process (AGENTSITE_WS_RATE: security/ratelimit.py).
        self.frame_rate = TokenBuckets()
        self._started = False
        self._start_lock: asyncio.Lock | None = None
        self._janitor: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._shedding = False

    # -- life cycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Whatever the topology needs before serving; idempotent (every operation calls it)."""
        if self._started:
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._started:
                return
            await self._start()
            await self.accounts.start()
            self._janitor = asyncio.get_running_loop().create_task(self._evict_idle_forever())
            self._started = True

    async def shutdown(self) -> None:
        """Stop every live session (stored state stays: docs/protocol.md §3.4) and every runner."""
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        if self._janitor is not None:
            self._janitor.cancel()
            await asyncio.gather(self._janitor, return_exceptions=True)
        await self.accounts.stop()
        await self._stop_sessions()
        await self.registry.shutdown()
        await tool_registry.shutdown()  # no ACP runner outlives the server
        close_runtime = getattr(self.registry.runtime, "aclose", None)
        if close_runtime is not None:
            await close_runtime()
        await self._stop()

    async def _start(self) -> None:
        return None

    async def _stop_sessions(self) -> None:
        return None

    async def _stop(self) -> None:
        return None

    # -- the facade ----------------------------------------------------------------------------------

    @abstractmethod
    async def dispatch(self, session_id: str, command: Command) -> Any:
        """Run a queue command where the session lives; its errors (InputError) go to the caller only."""

    @abstractmethod
    async def snapshot(self, session_id: str) -> tuple[dict[str, Any], int]:
        """The session's SNAPSHOT and the seq of its last event (Unavailable: its owner does not answer)."""

    @abstractmethod
    async def attach(self, session_id: str, since: int | None) -> Attachment:
        """Subscribe to a session's events from wherever it lives, with what the client missed; Unavailable
        when its owner does not answer."""

    @abstractmethod
    async def detach(self, attachment: Attachment) -> None: ...

    @abstractmethod
    async def announce(self, session_id: str, event: dict[str, Any]) -> None:
        """Publish an event no turn produced (a cron text job's message) on the session's owner."""

    @abstractmethod
    async def close(self, session_id: str) -> None:
        """The session was deleted: stop its live state and close its sockets (on every process)."""

    @abstractmethod
    async def controller(self, session_id: str) -> SessionController:
        """This process's controller of the session (taking the session over when nobody owns it)."""

    @abstractmethod
    async def recover_interrupted_turns(self) -> int:
        """At start-up: end every turn that was running when its process stopped (before serving)."""

    async def open_connection(self, user_id: int) -> Slot | None:
        """A slot for one more socket or SSE stream of the user, held while it is open (`release()` when it
        goes); None when they have AGENTSITE_USER_MAX_SOCKETS open already, on any process (docs/protocol.md
        §6.6). One Redis call with several processes, none in one."""
        await self.start()
        if self.connections.limit <= 0:
            return FREE
        return await self.connections.take(user_id)

    async def watcher_count(self, session_id: str) -> int:
        """Open sockets on the session (who would see a confirmation)."""
        return self.sockets.count(session_id)

    def register(self, session_id: str, socket: Any) -> None:
        self.sockets.add(session_id, socket)

    def unregister(self, session_id: str, socket: Any) -> None:
        self.sockets.remove(session_id, socket)

    async def is_closed(self, session_id: str) -> bool:
        controller = self.registry.peek(session_id)
        if controller is not None:
            return controller.closed
        closed: bool = await database_sync_to_async(
            Session.objects.filter(id=session_id, status=Session.Status.CLOSED).exists
        )()
        return closed

    async def fail(self, session_id: str, *, fenced: bool = False) -> None:
        """The database failed one of the session's writes, or refused it because another process owns the
        session now (`fenced`): what is live here may differ from what is stored (the truth), so the live
        state goes, and its subscribers are told (they reconnect later and get the stored state; a turn that
        was running ends `interrupted` when the session is loaded again)."""
        controller = self.registry.forget(session_id)
        if controller is None:
            return
        why = "another process owns it now" if fenced else "a database write failed"
        logger.warning("session %s lost its live state: %s", session_id, why)
        await controller.abandon(notice=UNAVAILABLE)
        await self.registry.drop_log(session_id)
        await self._failed(session_id)

    async def _failed(self, session_id: str) -> None:
        """What else the topology lets go of when a session's live state is dropped."""
        return None

    def _user_ended(self, user_id: int) -> None:
        """The user was deactivated or deleted: their turns running in this process stop (`result
        cancelled`; their queues pause and keep what waits). Turns of theirs that would start later are
        refused (chat/runtime.py account_refusal)."""
        for controller in list(self.registry.controllers.values()):
            if controller.user_id == user_id and controller.active_task is not None:
                logger.info("session %s: its user's account ended; its turn stops", controller.session_id)
                self._spawn(controller.cancel())

    # -- idle sessions -------------------------------------------------------------------------------

    async def evict_idle(self, *, idle_for: float = IDLE_SECONDS, keep: int | None = None) -> int:
        """Drop the controllers of sessions idle here for `idle_for` seconds (memory stays bounded by the
        sessions in use, not by every session touched since start), and beyond `keep` (LIVE_KEPT) live
        ones the idle ones that lose nothing by it. Stored state is untouched."""
        crowded = self.registry.crowded_idle(LIVE_KEPT if keep is None else keep)
        evicted = list(dict.fromkeys([*self.registry.idle_for(idle_for), *crowded]))
        for session_id in evicted:
            controller = self.registry.forget(session_id)
            if controller is not None:
                await controller.abandon()
            await self._evicted(session_id)
        self.registry.cap_dormant_logs()
        return len(evicted)

    def _shed_if_crowded(self) -> None:
        """After a socket left: when more than LIVE_KEPT controllers are live, drop the idle ones that lose
        nothing by it (chat/live/registry.py crowded_idle) — once at a time, in the background, down to a
        tenth below the cap, so that it runs once per ~50 sockets that leave, not after each."""
        if len(self.registry.controllers) <= LIVE_KEPT or self._shedding:
            return
        self._shedding = True

        async def shed() -> None:
            try:
                await self.evict_idle(keep=LIVE_KEPT - LIVE_KEPT // 10)
            except Exception:
                logger.exception("dropping idle sessions failed")
            finally:
                self._shedding = False

        self._spawn(shed())

    @abstractmethod
    async def _evicted(self, session_id: str) -> None:
        """What becomes of a dropped session's events and ownership."""

    async def _evict_idle_forever(self) -> None:
        while True:
            await asyncio.sleep(max(1.0, IDLE_SECONDS / 4))
            try:
                await self.evict_idle()
            except Exception:
                logger.exception("evicting idle sessions failed")

    # -- shared by the topologies --------------------------------------------------------------------

    @abstractmethod
    async def _load(self, session_id: str) -> tuple[SessionController, EventLog]:
        """Build a session's controller and event log (the registry calls it once per load)."""

    async def _build(
        self, session_id: str, *, token: int | None, fanout: Fanout | None, log: EventLog | None = None
    ) -> tuple[SessionController, EventLog]:
        """The session's controller and event log from its stored state; `token` fences its writes (several
        processes), `fanout` carries its events to other processes, `log` keeps the numbering and last run of
        a session this process dropped earlier."""
        try:
            state = await database_sync_to_async(load_state)(session_id, seq_block=SEQ_BLOCK, token=token)
        except Fenced as exc:
            raise NotOwner(session_id, exc.token) from None
        known = {item.request.message_id for item in state.pending} | set(state.running_message_ids)
        store = DjangoQueueStore(
            session_id,
            token=token,
            known=known,
            on_failure=lambda exc: self._spawn(self.fail(session_id, fenced=isinstance(exc, Fenced))),
        )
        log = log or EventLog(
            session_id,
            last_seq=state.seq_reserved,
            reserved=state.seq_reserved + SEQ_BLOCK,
            reserve=store.reserve_seq,
            retention=settings.AGENTSITE_EVENT_RETENTION,
            retention_bytes=settings.AGENTSITE_EVENT_RETENTION_BYTES,
            fanout=fanout,
        )
        controller = SessionController(
            session_id,
            runtime=self.registry.runtime,
            lease=self.registry.lease,
            store=store,
            publish=log.publish,
            pending=state.pending,
            paused=state.paused,
            next_order=state.next_order,
            user_id=state.user_id,
            gate=self.slots.gate(state.user_id),
            token=token,
        )
        try:
            for message_id in state.running_message_ids:
                # Its turn died with the process that ran it (docs/protocol.md §3.4).
                await controller.interrupt_stored_turn(message_id)
            # Messages stored while the session had no owner run now, unless the queue is paused.
            await controller.kick()
        except Fenced as exc:  # a newer owner claimed it meanwhile
            raise NotOwner(session_id, exc.token) from None
        return controller, log

    def _spawn(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def sessions_with_running_turns() -> list[str]:
    return list(
        Message.objects.filter(status=MessageStatus.RUNNING, session__status=Session.Status.OPEN)
        .values_list("session_id", flat=True)
        .distinct()
    )


def sessions_with_live_messages(limit: int = 500) -> list[str]:
    return list(
        Message.objects.filter(
            status__in=(MessageStatus.PENDING, MessageStatus.RUNNING), session__status=Session.Status.OPEN
        )
        .values_list("session_id", flat=True)
        .distinct()[:limit]
    )
