"""The turn that runs now in a session: its message, its stream once opened, its task, the pending
messages steered into it, and whether it may still be cancelled. One per session at a time; the
controller (chat/live/controller.py) makes it, drives it and forgets it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass, field

from agents.contract import TurnStream
from chat.live.queue import PendingItem, order_key
from chat.live.slots import FREE, Slot

logger = logging.getLogger("chat.live.controller")


@dataclass(eq=False)
class ActiveTurn:
    item: PendingItem
    task: asyncio.Task[None] | None = None
    # What Runtime.stream returned when the turn started, until the turn opens it (inside its lease).
    opening: TurnStream | Awaitable[TurnStream] | None = None
    stream: TurnStream | None = None
    steered: list[PendingItem] = field(default_factory=list)  # handed to the turn, in steer order
    unconsumed: int = 0  # how many of them the turn had not consumed when it ended
    cancellable: bool = True  # the task may be cancelled (it has not begun to close)
    cancel_requested: bool = False
    slot: Slot = FREE  # the user's turn slot it holds (chat/live/slots.py), given back when it ends

    def cancel(self) -> bool:
        """Cancel the task if it still may be; True when it was."""
        if self.task is None or not self.cancellable:
            return False
        self.cancel_requested = True
        self.cancellable = False
        self.task.cancel()
        return True

    def discard_opening(self) -> None:
        """The turn ends without having opened its stream: a coroutine that would open it is closed
        (never awaited, it would be reported as such)."""
        opening, self.opening = self.opening, None
        if isinstance(opening, Coroutine):
            opening.close()

    def consumed_and_restored(self) -> tuple[list[PendingItem], list[PendingItem]]:
        """The steered messages the turn consumed (consumption is FIFO: the first ones), and those it never
        saw, in queue order: they go back to the queue."""
        cut = max(0, len(self.steered) - self.unconsumed)
        return self.steered[:cut], sorted(self.steered[cut:], key=order_key)


async def close_stream(turn: ActiveTurn, stream: TurnStream, session_id: str) -> None:
    """Note what the turn never consumed (this closes its input), then always await aclose()."""
    try:
        turn.unconsumed = len(stream.take_pending())
    except Exception:
        logger.exception("take_pending failed in session %s", session_id)
    try:
        await stream.aclose()
    except Exception:
        logger.exception("Closing the turn stream failed in session %s", session_id)
