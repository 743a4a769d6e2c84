"""Live runner connections, keyed by (chat session, runner), and their lifetime.

docs/protocol.md §4: a chat session has at most one ACP session per runner. The registry (the tool
server registry, agents/toolservers/registry.py) is the one owner of those connections in a server
process: `status` reads it without spawning anything, closing a chat session closes its runners, and
server shutdown closes them all, so no runner outlives what it belongs to. Plain asyncio, no Django.
"""

from __future__ import annotations

from typing import Any

from acp.client import AcpConnection, AcpError, AcpRunnerSpec, ConnectionState
from agents.toolservers.registry import ConnectionKey, ConnectionRegistry

SessionKey = ConnectionKey  # (chat session id, runner name)


class AcpSessionRegistry(ConnectionRegistry[AcpConnection]):
    """The open runner connections of this process."""

    def state(self, chat_session_id: str, runner: str) -> ConnectionState:
        """The pair's state without spawning anything: `closed` when none was started."""
        conn = self._connections.get((chat_session_id, runner))
        return conn.state if conn is not None else "closed"

    async def start(self, chat_session_id: str, spec: AcpRunnerSpec, **options: Any) -> AcpConnection:
        """Spawn and handshake `spec.name` for the chat session; an open one is an error, not reused."""
        key = (chat_session_id, spec.name)
        async with self._locked(key):
            if self.get(*key) is not None:
                raise AcpError(f"Runner '{spec.name}' is already open; use message.", code="busy")
            stale = self._connections.pop(key, None)
            if stale is not None:
                await stale.close()
            conn = AcpConnection(spec, **options)
            await conn.start()  # on failure it has already ended its process group
            self._connections[key] = conn
            return conn
