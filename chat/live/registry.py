"""This process's live sessions: one controller and one event log per session, and the turn slots.

Plain asyncio (no Django). Whoever owns the registry (a topology, chat/live/sessions.py) passes a
`load` callable that builds a session's controller and event log from its stored state; the registry
only guarantees one of each per session id (loaded once even when many callers ask at once), bounds how
many turns stream at once (`max_concurrent_turns`), counts active turns, keeps the last run of sessions
it dropped for a while (`?since=` replay, bounded), and closes everything without leaving a task behind.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from agents.contract import Runtime
from chat.live.commands import Cancel, Command, ConfirmationReply, Remove, Steer, Submit
from chat.live.controller import SessionController
from chat.live.events import EventLog

DORMANT_LOGS_KEPT = 10_000  # idle sessions whose last run is kept for `?since=` (a few KB each)
DORMANT_BYTES_KEPT = 32 * 1024 * 1024  # and no more than this of their events in all (EventLog.bytes)

Loader = Callable[[str], Awaitable[tuple[SessionController, EventLog]]]


class LiveRegistry:
    def __init__(self, *, runtime: Runtime, load: Loader, max_concurrent_turns: int = 32) -> None:
        if max_concurrent_turns < 1:
            raise ValueError("max_concurrent_turns must be at least 1")
        self.runtime = runtime
        self.max_concurrent_turns = max_concurrent_turns
        self.controllers: dict[str, SessionController] = {}
        self.logs: dict[str, EventLog] = {}  # live sessions' logs, and the dormant ones kept for replay
        self.active_turns = 0
        self._load = load
        self._semaphore = asyncio.Semaphore(max_concurrent_turns)
        self._loading: dict[str, asyncio.Task[SessionController]] = {}
        self._logs_capped_at = -float("inf")

    # -- turns ---------------------------------------------------------------------------------

    def lease(self) -> AbstractAsyncContextManager[None]:
        """A slot for one streaming turn; waiting for it means the turn has not started streaming."""
        return self._hold_slot()

    @asynccontextmanager
    async def _hold_slot(self) -> AsyncIterator[None]:
        async with self._semaphore:
            yield

    def on_turn_change(self, delta: int) -> None:
        """Controllers report +1 when a turn starts and -1 when it ends."""
        self.active_turns += delta

    # -- sessions ------------------------------------------------------------------------------

    async def get(self, session_id: str) -> SessionController:
        """The session's live controller, loading it once even when many callers ask at the same time."""
        controller = self.controllers.get(session_id)
        if controller is not None:
            return controller
        loading = self._loading.get(session_id)
        if loading is None:
            loading = asyncio.create_task(self._load_once(session_id), name=f"load-session:{session_id}")
            self._loading[session_id] = loading
        # shield: one caller giving up must not abort the load the others wait for
        return await asyncio.shield(loading)

    async def _load_once(self, session_id: str) -> SessionController:
        try:
            controller, log = await self._load(session_id)
            if controller.on_turn_change is None:
                controller.on_turn_change = self.on_turn_change
            self.controllers[session_id] = controller
            self.logs[session_id] = log
            return controller
        finally:
            self._loading.pop(session_id, None)

    def peek(self, session_id: str) -> SessionController | None:
        """The live controller, without loading one."""
        return self.controllers.get(session_id)

    def log(self, session_id: str) -> EventLog:
        return self.logs[session_id]

    async def dispatch(self, session_id: str, command: Command) -> Any:
        """Run a queue command on the session's controller; returns its ack (None for Cancel).

        Shielded: a caller that goes away (its socket closed) does not stop a command half-way, between
        storing a change and making it live (a message stored but in nobody's queue would never run)."""
        controller = await self.get(session_id)
        task = asyncio.ensure_future(self._run(controller, command))
        task.add_done_callback(_outcome_taken)
        return await asyncio.shield(task)

    async def _run(self, controller: SessionController, command: Command) -> Any:
        match command:
            case Submit(request=request, steer=steer, stored=stored):
                return await controller.submit(request, steer=steer, stored=stored)
            case Steer(message_id=message_id):
                return await controller.steer(message_id)
            case Remove(message_id=message_id):
                return await controller.remove(message_id)
            case Cancel():
                return await controller.cancel()
            case ConfirmationReply(confirmation_id=confirmation_id, approved=approved, option_id=option_id):
                return await controller.resolve_confirmation(confirmation_id, approved, option_id)
        raise TypeError(f"Unknown command: {command!r}")

    async def close(self, session_id: str) -> None:
        """The session was deleted: close its controller (cancel, clear the queue) and forget its events."""
        loading = self._loading.get(session_id)
        if loading is not None:
            await asyncio.wait([loading])
        controller = self.controllers.pop(session_id, None)
        if controller is not None:
            await controller.close()
        log = self.logs.pop(session_id, None)
        if log is not None:
            await log.aclose()

    def forget(self, session_id: str) -> SessionController | None:
        """Drop a live controller without closing it (the caller abandons it)."""
        return self.controllers.pop(session_id, None)

    async def drop_log(self, session_id: str) -> None:
        log = self.logs.pop(session_id, None)
        if log is not None:
            await log.aclose()

    def idle_for(self, seconds: float) -> list[str]:
        """Sessions whose controller has had nothing to do (no turn, queue or subscriber) for `seconds`."""
        now = time.monotonic()
        return [
            session_id
            for session_id, controller in self.controllers.items()
            if controller.idle and session_id in self.logs and now - self.logs[session_id].touched >= seconds
        ]

    def crowded_idle(self, kept: int) -> list[str]:
        """Beyond `kept` live controllers: the idle ones, least recently used first, whose event log holds
        nothing older than their last run — dropping them early loses nothing a client could replay."""
        excess = len(self.controllers) - kept
        if excess <= 0:
            return []
        idle = sorted(
            (log.touched, session_id)
            for session_id, controller in self.controllers.items()
            if controller.idle
            and (log := self.logs.get(session_id)) is not None
            and log.holds_only_its_last_run
        )
        return [session_id for _, session_id in idle[:excess]]

    def cap_dormant_logs(self, kept: int = DORMANT_LOGS_KEPT) -> None:
        """Dropped sessions' last runs are kept for `?since=`, but not those of every session ever used:
        beyond `kept`, or beyond DORMANT_BYTES_KEPT of events in all, the least recently used go (their
        clients get `resync` instead of a replay).

        Within the count, the byte total (a walk over every log) is looked at once a second, not on each
        call: a chat-per-request integration calls this after every chat, with thousands of logs kept."""
        now = time.monotonic()
        if len(self.logs) - len(self.controllers) <= kept and now - self._logs_capped_at < 1.0:
            return
        self._logs_capped_at = now
        dormant = sorted(
            (log.touched, sid, log.bytes) for sid, log in self.logs.items() if sid not in self.controllers
        )
        excess = len(dormant) - kept
        total = sum(size for *_, size in dormant)
        for position, (_, session_id, size) in enumerate(dormant):
            if position >= excess and total <= DORMANT_BYTES_KEPT:
                break
            del self.logs[session_id]
            total -= size

    async def shutdown(self) -> None:
        """Stop every controller; afterwards no task of ours is left.

        Stored state is left as it is: pending messages stay pending, and a turn that was running is
        ended `interrupted` by the next process that loads the session (docs/protocol.md §3.4) — a
        shutdown must not lose the queue.
        """
        while self._loading:
            await asyncio.wait(list(self._loading.values()))
        controllers = list(self.controllers.values())
        self.controllers.clear()
        await asyncio.gather(*(controller.abandon() for controller in controllers))
        logs = list(self.logs.values())
        self.logs.clear()
        await asyncio.gather(*(log.aclose() for log in logs))


def _outcome_taken(task: asyncio.Future[Any]) -> None:
    """A command whose caller went away has its error (a refused duplicate, say) taken here, not logged as
    an exception nobody retrieved: it was the caller's to hear."""
    if not task.cancelled():
        task.exception()
