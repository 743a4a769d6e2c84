"""`EventQueue`: where a reader of events (a socket, an SSE stream, a cron run, a turn's consumer) waits.

Plain asyncio; used by the turn contract's implementations and by the live sessions alike. On the stock
stack (AGENTSITE_STOCK_STACK=1, agentsite/stack.py) `EventQueue` is asyncio.Queue itself.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from agentsite.stack import STOCK_STACK


class EventQueue[T]:
    """Where a subscriber (a socket, an SSE stream, a cron run) reads its events from.

    asyncio.Queue's interface (put_nowait, get, get_nowait, empty, qsize), unbounded, at a fraction of its
    size: an idle asyncio.Queue holds four 64-slot deques (~1.6 KB), and a server holds one of these per
    open socket, most of them idle. One reader at a time (each subscriber reads its own queue).
    """

    __slots__ = ("_head", "_items", "_waiter")

    def __init__(self) -> None:
        self._items: list[T] = []
        self._head = 0  # items before it were taken
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: T) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def qsize(self) -> int:
        return len(self._items) - self._head

    def empty(self) -> bool:
        return self._head >= len(self._items)

    def get_nowait(self) -> T:
        if self._head >= len(self._items):
            raise asyncio.QueueEmpty
        item = self._items[self._head]
        self._head += 1
        if self._head >= len(self._items):
            self._items = []
            self._head = 0
        elif self._head >= 1024 and self._head * 2 >= len(self._items):
            del self._items[: self._head]  # a reader that never quite catches up: drop what it read
            self._head = 0
        return item

    async def get(self) -> T:
        while self._head >= len(self._items):
            waiter = self._waiter
            if waiter is None or waiter.done():
                waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                if self._waiter is waiter and waiter.done():
                    self._waiter = None
        return self.get_nowait()


if STOCK_STACK and not TYPE_CHECKING:  # chosen once, here (agentsite/stack.py)
    EventQueue = asyncio.Queue
