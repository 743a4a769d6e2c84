"""Permission questions a runner is waiting on, and how they end.

Each question is answered exactly once: by the user's callback, or early with None (ACP outcome
`cancelled`) when the session is cancelled or closed. The callback's task is cancelled once the
question is settled, so a confirmation the user never answered does not linger.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from acp.policy import PermissionRequest

logger = logging.getLogger(__name__)

Asker = Callable[[PermissionRequest], Awaitable[str | None]]


class Pausable(Protocol):
    """Something that stops counting while the user is being asked (the runner's prompt clock)."""

    def pause(self) -> None: ...

    def resume(self) -> None: ...


class PendingPermissions:
    """The open questions of one runner connection."""

    def __init__(self) -> None:
        self._answers: set[asyncio.Future[str | None]] = set()

    def __len__(self) -> int:
        return len(self._answers)

    async def ask(
        self, asker: Asker, request: PermissionRequest, *, pause: Pausable | None = None
    ) -> str | None:
        """The option id the user chose, or None (no answer, the asker failed, or `cancel_all`)."""
        answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        asking = asyncio.ensure_future(asker(request))
        asking.add_done_callback(lambda done: _settle(answer, done))
        self._answers.add(answer)
        if pause is not None:
            pause.pause()
        try:
            return await answer
        finally:
            self._answers.discard(answer)
            if pause is not None:
                pause.resume()
            if not asking.done():
                asking.cancel()

    def cancel_all(self) -> None:
        """Answer every open question with None (outcome `cancelled`)."""
        for answer in list(self._answers):
            if not answer.done():
                answer.set_result(None)


def _settle(answer: asyncio.Future[str | None], asking: asyncio.Future[str | None]) -> None:
    """Copy the asker's result into `answer` unless it was settled already; a failure means None."""
    if answer.done():
        return
    if asking.cancelled():
        answer.set_result(None)
        return
    error = asking.exception()
    if error is not None:
        logger.error("Asking the user for a runner permission failed", exc_info=error)
        answer.set_result(None)
        return
    answer.set_result(asking.result())
