"""The session service: one SessionController per live session in this process, and the turn lease.

Plain asyncio (no Django). The Django layer passes a `controller_factory` that loads the stored queue
and injects the store and the event log; the service only guarantees one controller per session id,
bounds how many turns stream at once (`max_concurrent_turns`, AGENTSITE_MAX_CONCURRENT_TURNS), counts
active turns, and closes controllers on delete and shutdown without leaving a task behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from agents.contract import ChatRequest, Runtime
from chat.controller import SessionController


@dataclass(frozen=True)
class Submit:
    request: ChatRequest
    steer: bool = False


@dataclass(frozen=True)
class Steer:
    message_id: str


@dataclass(frozen=True)
class Remove:
    message_id: str


@dataclass(frozen=True)
class Cancel:
    pass


@dataclass(frozen=True)
class ConfirmationReply:
    confirmation_id: str
    approved: bool
    option_id: str | None = None


Command = Submit | Steer | Remove | Cancel | ConfirmationReply
ControllerFactory = Callable[[str, "SessionService"], Awaitable[SessionController]]


class SessionService:
    """Owns the live controllers of this process (DESIGN.md §2)."""

    def __init__(
        self,
        *,
        runtime: Runtime,
        max_concurrent_turns: int = 32,
        controller_factory: ControllerFactory | None = None,
    ) -> None:
        if max_concurrent_turns < 1:
            raise ValueError("max_concurrent_turns must be at least 1")
        self.runtime = runtime
        self.max_concurrent_turns = max_concurrent_turns
        self.controllers: dict[str, SessionController] = {}
        self.active_turns = 0
        self._factory = controller_factory or _default_factory
        self._semaphore = asyncio.Semaphore(max_concurrent_turns)
        self._loading: dict[str, asyncio.Task[SessionController]] = {}

    def lease(self) -> AbstractAsyncContextManager[None]:
        """A slot for one streaming turn; waiting for it means the turn has not started streaming."""
        return self._hold_slot()

    @asynccontextmanager
    async def _hold_slot(self) -> AsyncIterator[None]:
        async with self._semaphore:
            yield

    def on_turn_change(self, delta: int) -> None:
        """Controllers report +1 when a turn starts and -1 when it ends (attached to every controller)."""
        self.active_turns += delta

    async def get_controller(self, session_id: str) -> SessionController:
        """The session's live controller, loading it once even when many callers ask at the same time."""
        controller = self.controllers.get(session_id)
        if controller is not None:
            return controller
        loading = self._loading.get(session_id)
        if loading is None:
            loading = asyncio.create_task(self._load(session_id), name=f"load-session:{session_id}")
            self._loading[session_id] = loading
        # shield: one caller giving up must not abort the load the others wait for
        return await asyncio.shield(loading)

    async def _load(self, session_id: str) -> SessionController:
        try:
            controller = await self._factory(session_id, self)
            if controller.on_turn_change is None:
                controller.on_turn_change = self.on_turn_change
            self.controllers[session_id] = controller
            return controller
        finally:
            self._loading.pop(session_id, None)

    def peek(self, session_id: str) -> SessionController | None:
        """The live controller, without loading one."""
        return self.controllers.get(session_id)

    async def dispatch(self, session_id: str, command: Command) -> Any:
        """Run a queue command on the session's controller; returns its ack (None for Cancel)."""
        controller = await self.get_controller(session_id)
        match command:
            case Submit(request=request, steer=steer):
                return await controller.submit(request, steer=steer)
            case Steer(message_id=message_id):
                return await controller.steer(message_id)
            case Remove(message_id=message_id):
                return await controller.remove(message_id)
            case Cancel():
                return await controller.cancel()
            case ConfirmationReply(confirmation_id=confirmation_id, approved=approved, option_id=option_id):
                return await controller.resolve_confirmation(confirmation_id, approved, option_id)
        raise TypeError(f"Unknown command: {command!r}")

    async def delete_session(self, session_id: str) -> bool:
        """Close that session's controller only; False when it is not live in this process."""
        loading = self._loading.get(session_id)
        if loading is not None:
            await asyncio.wait([loading])
        controller = self.controllers.pop(session_id, None)
        if controller is None:
            return False
        await controller.close()
        return True

    def forget(self, session_id: str) -> SessionController | None:
        """Drop a live controller without closing it (the caller abandons it: ownership moved)."""
        return self.controllers.pop(session_id, None)

    async def shutdown(self) -> None:
        """Stop every controller; afterwards no task of ours is left.

        Stored state is left as it is: pending messages stay pending, and a turn that was running is
        ended `interrupted` by the next process that loads the session (PROTOCOL §3.4) — a shutdown
        must not lose the queue.
        """
        while self._loading:
            await asyncio.wait(list(self._loading.values()))
        controllers = list(self.controllers.values())
        self.controllers.clear()
        await asyncio.gather(*(controller.abandon() for controller in controllers))


async def _default_factory(session_id: str, service: SessionService) -> SessionController:
    return SessionController(
        session_id, runtime=service.runtime, lease=service.lease, on_turn_change=service.on_turn_change
    )
