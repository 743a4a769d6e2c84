"""The sockets (and SSE streams) of this process, by session: who is told when a session closes or moves.

A socket registers after it attached to its session and unregisters when it goes; anything with
`session_closed()` may register (chat/consumers.py's ChatConsumer does). A socket whose session cannot
go on in this process learns it through its events queue (chat/live/events.py Signal.UNAVAILABLE).
"""

from __future__ import annotations

from typing import Any


class Sockets:
    def __init__(self) -> None:
        self._by_session: dict[str, set[Any]] = {}

    def add(self, session_id: str, socket: Any) -> None:
        self._by_session.setdefault(session_id, set()).add(socket)

    def remove(self, session_id: str, socket: Any) -> None:
        sockets = self._by_session.get(session_id)
        if sockets is not None:
            sockets.discard(socket)
            if not sockets:
                del self._by_session[session_id]

    def count(self, session_id: str) -> int:
        return len(self._by_session.get(session_id, ()))

    def sessions(self) -> list[str]:
        return list(self._by_session)

    def tell_closed(self, session_id: str) -> None:
        """The session was deleted: its sockets here are told so and close."""
        for socket in list(self._by_session.get(session_id, ())):
            socket.session_closed()
