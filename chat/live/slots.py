"""How many turns one user runs at once (docs/protocol.md §6.4: AGENTSITE_USER_MAX_CONCURRENT_TURNS).

Plain asyncio. Before a turn starts, its controller asks the gate of the session's user for a slot. Without
one, the message waits in its queue (`queued`) and the controller asks to be woken: when a slot of that user
is given back here (or, several processes, maybe elsewhere: chat/live/cluster/slots.py looks again every
half second), every waiting controller of that user tries again, in the order they began to wait. Other
users' turns start meanwhile. The slot goes back when the turn ends, however it ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

logger = logging.getLogger(__name__)

Wake = Callable[[], Coroutine[Any, Any, None]]


class Slot(Protocol):
    def release(self) -> None: ...


class _Free:
    """The slot of a session without a gate (no per-user limit)."""

    def release(self) -> None:
        return None


FREE: Slot = _Free()


class UserGate:
    """One user's view of the slots: what a controller holds."""

    def __init__(self, slots: TurnSlots, user_id: int) -> None:
        self._slots = slots
        self.user_id = user_id

    @property
    def limit(self) -> int:
        return self._slots.limit

    async def take(self, wake: Wake) -> Slot | None:
        """A slot, or None: then `wake` is called when one may be free (once; ask again to be woken again)."""
        slot = await self._slots.take(self.user_id)
        if slot is None:
            self._slots.wait(self.user_id, wake)
        return slot


def fair_share_wait(limit: int) -> dict[str, Any]:
    """Why a session's queue waits although nothing runs in it: all of its user's turn slots are taken
    (docs/protocol.md §6.4 extension: `waiting_for` of `message_status queued` and of the snapshot)."""
    running = f"{limit} of your chats {'is' if limit == 1 else 'are'} running"
    return {
        "reason": "fair_share",
        "limit": limit,
        "message": f"{running} (at most {limit} at once); this one starts when one of them ends.",
    }


class TurnSlots:
    """The slots of this process's users (one process: all of them)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held: Counter[int] = Counter()
        self._waiting: dict[int, dict[Wake, None]] = {}  # per user, in the order they began to wait
        self._wakers: set[asyncio.Task[None]] = set()

    def gate(self, user_id: int | None) -> UserGate | None:
        """None when there is no limit (or the session has no user)."""
        if self.limit <= 0 or user_id is None:
            return None
        return UserGate(self, user_id)

    def held(self, user_id: int) -> int:
        return self._held[user_id]

    async def take(self, user_id: int) -> Slot | None:
        if self._held[user_id] >= self.limit:
            return None
        self._held[user_id] += 1
        return _LocalSlot(self, user_id)

    def wait(self, user_id: int, wake: Wake) -> None:
        self._waiting.setdefault(user_id, {})[wake] = None

    def _given_back(self, user_id: int) -> None:
        self._held[user_id] -= 1
        if self._held[user_id] <= 0:
            del self._held[user_id]
        self.wake(user_id)

    def wake(self, user_id: int) -> None:
        """Every controller waiting for a slot of this user tries again (those that get none wait again)."""
        waiting = self._waiting.pop(user_id, None)
        for wake in waiting or ():
            task = asyncio.get_running_loop().create_task(wake())
            self._wakers.add(task)
            task.add_done_callback(self._woken)

    def waiting_users(self) -> list[int]:
        return list(self._waiting)

    async def stop(self) -> None:
        """Nothing to give back in one process (the cluster's slots stop renewing their leases)."""

    def _woken(self, task: asyncio.Task[None]) -> None:
        self._wakers.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("a session woken for a free turn slot failed", exc_info=task.exception())


class _LocalSlot:
    def __init__(self, slots: TurnSlots, user_id: int) -> None:
        self._slots: TurnSlots | None = slots
        self._user_id = user_id

    def release(self) -> None:
        if self._slots is not None:  # once
            slots, self._slots = self._slots, None
            slots._given_back(self._user_id)
