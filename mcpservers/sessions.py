"""Live MCP connections of this process, keyed by (chat session, server), and their lifetime.

docs/protocol.md §2: one connection (for stdio: one process) per chat session and server, started on
first use and closed with the chat session, at server shutdown, and after `AGENTSITE_MCP_IDLE_SECONDS`
without a call. This registry is their one owner: nothing else keeps a connection, so nothing outlives
what it belongs to. A connection whose configuration changed since it started is replaced on its next
use. Plain asyncio, no Django; the bound on what it holds is the number of open chat sessions times their
agents' servers, and `close_all()` empties it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from mcpservers.client import McpConnection, McpServerSpec, OnToolsChanged

ConnectionKey = tuple[str, str]  # (chat session id, server name)
REAP_EVERY_SECONDS = 30.0


@dataclass
class _KeyLock:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class McpSessionRegistry:
    def __init__(self, *, idle_seconds: float) -> None:
        self.idle_seconds = idle_seconds
        self._connections: dict[ConnectionKey, McpConnection] = {}
        self._locks: dict[ConnectionKey, _KeyLock] = {}  # only while someone holds or awaits one
        self._reaper: asyncio.Task[None] | None = None

    def get(self, chat_session_id: str, server: str) -> McpConnection | None:
        conn = self._connections.get((chat_session_id, server))
        return conn if conn is not None and conn.alive else None

    def count(self) -> int:
        return len(self._connections)

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

    async def close(self, chat_session_id: str, server: str) -> bool:
        key = (chat_session_id, server)
        async with self._locked(key):
            conn = self._connections.pop(key, None)
        if conn is None:
            return False
        await conn.close()
        return True

    async def close_chat_session(self, chat_session_id: str) -> int:
        keys = [key for key in list(self._connections) if key[0] == chat_session_id]
        return sum(await asyncio.gather(*(self.close(*key) for key in keys)))

    async def close_all(self) -> None:
        reaper, self._reaper = self._reaper, None
        if reaper is not None:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
        await asyncio.gather(*(self.close(*key) for key in list(self._connections)))

    async def close_idle(self) -> int:
        """Close the connections unused for `idle_seconds` (and those whose server went away)."""
        now = time.monotonic()
        idle = [
            key
            for key, conn in list(self._connections.items())
            if not conn.alive or (conn.calls == 0 and now - conn.last_used >= self.idle_seconds)
        ]
        return sum(await asyncio.gather(*(self.close(*key) for key in idle)))

    @contextlib.asynccontextmanager
    async def _locked(self, key: ConnectionKey) -> AsyncIterator[None]:
        entry = self._locks.setdefault(key, _KeyLock())
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._locks[key]

    def _ensure_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.create_task(self._reap(), name="mcp-idle-reaper")

    async def _reap(self) -> None:
        interval = max(0.1, min(REAP_EVERY_SECONDS, self.idle_seconds / 4))
        while self._connections:
            await asyncio.sleep(interval)
            await self.close_idle()
