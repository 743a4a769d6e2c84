"""Live MCP connections of this process, keyed by (chat session, server), and their lifetime.

docs/protocol.md §2: one connection (for stdio: one process) per chat session and server, started on
first use and closed with the chat session, at server shutdown, and after `AGENTSITE_MCP_IDLE_SECONDS`
without a call. This registry is their one owner: nothing else keeps a connection, so nothing outlives
what it belongs to. A connection whose configuration changed since it started is replaced on its next
use. The keeping and closing are the tool server registry's (agents/toolservers/registry.py). Plain asyncio,
no Django; the bound on what it holds is the number of open chat sessions times their agents' servers, and
`close_all()` empties it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from agents.toolservers.registry import ConnectionRegistry
from mcpservers.client import McpConnection, McpServerSpec, OnToolsChanged

REAP_EVERY_SECONDS = 30.0


class McpSessionRegistry(ConnectionRegistry[McpConnection]):
    def __init__(self, *, idle_seconds: float) -> None:
        super().__init__()
        self.idle_seconds = idle_seconds
        self._reaper: asyncio.Task[None] | None = None

    async def connect(
        self, chat_session_id: str, spec: McpServerSpec, *, on_tools_changed: OnToolsChanged | None = None
    ) -> tuple[McpConnection, bool]:
        """The live connection for the pair, started now if there is none (or it was made from another
        configuration); whether it was started by this call. McpError when it cannot start."""
        key = (chat_session_id, spec.name)
        async with self._locked(key):
            current = self._connections.get(key)
            if current is not None and current.alive and current.spec.fingerprint() == spec.fingerprint():
                current.last_used = time.monotonic()
                return current, False
            if current is not None:
                del self._connections[key]
                await current.close()
            conn = McpConnection(spec, on_tools_changed=on_tools_changed)
            await conn.start()  # on failure nothing is left running
            self._connections[key] = conn
            self._ensure_reaper()
            return conn, True

    async def close_all(self) -> None:
        reaper, self._reaper = self._reaper, None
        if reaper is not None:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
        await super().close_all()

    async def close_idle(self) -> int:
        """Close the connections unused for `idle_seconds` (and those whose server went away)."""
        now = time.monotonic()
        idle = [
            key
            for key, conn in list(self._connections.items())
            if not conn.alive or (conn.calls == 0 and now - conn.last_used >= self.idle_seconds)
        ]
        return sum(await asyncio.gather(*(self.close(*key) for key in idle)))

    def _ensure_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.create_task(self._reap(), name="mcp-idle-reaper")

    async def _reap(self) -> None:
        interval = max(0.1, min(REAP_EVERY_SECONDS, self.idle_seconds / 4))
        while self._connections:
            await asyncio.sleep(interval)
            await self.close_idle()
