"""The live connections of one kind of tool server in this process, keyed by (chat session, server).

docs/protocol.md §2, §4: a chat session has at most one connection per server. A registry is the one owner
of those connections: nothing else keeps one, so nothing outlives what it belongs to — closing a chat
session closes its servers, and server shutdown closes them all. Each app adds how a connection starts
(ACP: `start`, an open one is an error; MCP: `connect`, reused while its configuration holds, closed when
idle). The lock of a pair exists only while someone holds or awaits it, so what the registry holds is
bounded by its open connections. Plain asyncio, no Django.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

ConnectionKey = tuple[str, str]  # (chat session id, server name)


class Connection(Protocol):
    @property
    def alive(self) -> bool:
        """Whether it still answers (an exited or closed one does not)."""
        ...

    async def close(self) -> None: ...


@dataclass
class _KeyLock:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class ConnectionRegistry[C: Connection]:
    def __init__(self) -> None:
        self._connections: dict[ConnectionKey, C] = {}
        self._locks: dict[ConnectionKey, _KeyLock] = {}  # only while someone holds or awaits one

    def get(self, chat_session_id: str, server: str) -> C | None:
        """The live connection for this pair, or None (an exited one counts as none)."""
        conn = self._connections.get((chat_session_id, server))
        return conn if conn is not None and conn.alive else None

    def count(self) -> int:
        return len(self._connections)

    async def close(self, chat_session_id: str, server: str) -> bool:
        """Close one connection; whether there was one. Nobody starts the pair anew until it has ended."""
        key = (chat_session_id, server)
        async with self._locked(key):
            conn = self._connections.pop(key, None)
            if conn is None:
                return False
            await conn.close()
            return True

    async def close_chat_session(self, chat_session_id: str) -> int:
        """Close every connection of a chat session (it was closed or deleted); how many were closed."""
        keys = [key for key in list(self._connections) if key[0] == chat_session_id]
        return sum(await asyncio.gather(*(self.close(*key) for key in keys)))

    async def close_all(self) -> None:
        """Close every connection (server shutdown)."""
        await asyncio.gather(*(self.close(*key) for key in list(self._connections)))

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
