"""One process owns every session: the embedded topology (SQLite, the in-memory channel layer)."""

from __future__ import annotations

from typing import Any

from agents.tools import registry as tool_registry
from agentsite.db import database_sync_to_async
from chat.live.commands import Command
from chat.live.controller import SessionController
from chat.live.events import EventLog
from chat.live.sessions import Attachment, LiveSessions, sessions_with_running_turns


class LocalSessions(LiveSessions):
    async def _load(self, session_id: str) -> tuple[SessionController, EventLog]:
        # A session reloaded after it went idle here keeps its numbering and its last run's events.
        dormant = self.registry.logs.get(session_id)
        return await self._build(session_id, token=None, fanout=None, log=dormant)

    async def controller(self, session_id: str) -> SessionController:
        await self.start()
        return await self.registry.get(session_id)

    async def dispatch(self, session_id: str, command: Command) -> Any:
        await self.start()
        return await self.registry.dispatch(session_id, command)

    async def snapshot(self, session_id: str) -> tuple[dict[str, Any], int]:
        controller = await self.controller(session_id)
        return controller.snapshot(), self.registry.log(session_id).last_seq

    async def attach(self, session_id: str, since: int | None) -> Attachment:
        controller = await self.controller(session_id)
        log = self.registry.log(session_id)
        # subscribe, last_seq and replay in one step (no await between): nothing missed or doubled.
        queue, snapshot = controller.subscribe()
        backlog = log.replay(since) if since is not None else []
        return Attachment(session_id, queue, snapshot, log.last_seq, backlog, local=True, since=since)

    async def detach(self, attachment: Attachment) -> None:
        controller = self.registry.peek(attachment.session_id)
        if controller is not None:
            controller.unsubscribe(attachment.queue)
        self._shed_if_crowded()

    async def announce(self, session_id: str, event: dict[str, Any]) -> None:
        (await self.controller(session_id)).announce(event)

    async def close(self, session_id: str) -> None:
        await self.registry.close(session_id)
        # Tools that hold per-session resources (ACP runner subprocesses) release them: through the
        # agents tool registry, so chat does not import the acp app.
        await tool_registry.close_session(session_id)
        self.sockets.tell_closed(session_id)

    async def recover_interrupted_turns(self) -> int:
        await self.start()
        session_ids = await database_sync_to_async(sessions_with_running_turns)()
        for session_id in session_ids:
            await self.registry.get(session_id)
        return len(session_ids)

    async def _evicted(self, session_id: str) -> None:
        self.registry.log(session_id).keep_last_run_only()
