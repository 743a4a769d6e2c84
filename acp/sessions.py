"""Live runner connections, keyed by (chat session, runner), and their lifetime.

docs/protocol.md §4: a chat session has at most one ACP session per runner. The registry is the one owner
of those connections in a server process: `status` reads it without spawning anything, closing a
chat session closes its runners, and server shutdown closes them all, so no runner outlives what
it belongs to. Plain asyncio, no Django.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

from acp.client import AcpConnection, AcpError, AcpRunnerSpec, ConnectionState

SessionKey = tuple[str, str]  # (chat session id, runner name)


class AcpSessionRegistry:
    """The open runner connections of this process."""

    def __init__(self) -> None:
        self._connections: dict[SessionKey, AcpConnection] = {}
        self._locks: defaultdict[SessionKey, asyncio.Lock] = defaultdict(asyncio.Lock)

    def get(self, chat_session_id: str, runner: str) -> AcpConnection | None:
        """The live connection for this pair, or None (an exited runner counts as none)."""
        conn = self._connections.get((chat_session_id, runner))
        if conn is None or conn.state in ("exited", "closed"):
            return None
        return conn

    def state(self, chat_session_id: str, runner: str) -> ConnectionState:
        """The pair's state without spawning anything: `closed` when none was started."""
        conn = self._connections.get((chat_session_id, runner))
        return conn.state if conn is not None else "closed"

    async def start(self, chat_session_id: str, spec: AcpRunnerSpec, **options: Any) -> AcpConnection:
        """Spawn and handshake `spec.name` for the chat session; an open one is an error, not reused."""
        key = (chat_session_id, spec.name)
        async with self._locks[key]:
            if self.get(*key) is not None:
                raise AcpError(f"Runner '{spec.name}' is already open; use message.", code="busy")
            stale = self._connections.pop(key, None)
            if stale is not None:
                await stale.close()
            conn = AcpConnection(spec, **options)
            await conn.start()  # on failure it has already ended its process group
            self._connections[key] = conn
            return conn

    async def close(self, chat_session_id: str, runner: str) -> bool:
        """Close one runner; whether there was one."""
        key = (chat_session_id, runner)
        async with self._locks[key]:
            conn = self._connections.pop(key, None)
            if conn is None:
                return False
            await conn.close()
            return True

    async def close_chat_session(self, chat_session_id: str) -> int:
        """Close every runner of a chat session (it was closed or deleted); how many were closed."""
        runners = [runner for session, runner in list(self._connections) if session == chat_session_id]
        results = await asyncio.gather(*(self.close(chat_session_id, runner) for runner in runners))
        return sum(results)

    async def close_all(self) -> None:
        """Close every runner (server shutdown)."""
        keys = list(self._connections)
        await asyncio.gather(*(self.close(*key) for key in keys))
