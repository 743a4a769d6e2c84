"""A runner's own time, for prompt timeouts that do not count the minutes a user takes to answer."""

from __future__ import annotations

import asyncio


class RunnerClock:
    """Measures a runner's own time: time spent waiting for the user's permission answer is not its."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._start = self._loop.time()
        self._paused_total = 0.0
        self._paused_at: float | None = None
        self._pauses = 0
        self._changed = asyncio.Event()

    @property
    def paused(self) -> bool:
        return self._pauses > 0

    def used(self) -> float:
        now = self._loop.time()
        current = now - self._paused_at if self._paused_at is not None else 0.0
        return now - self._start - self._paused_total - current

    def pause(self) -> None:
        if self._pauses == 0:
            self._paused_at = self._loop.time()
        self._pauses += 1
        self._notify()

    def resume(self) -> None:
        self._pauses -= 1
        if self._pauses == 0 and self._paused_at is not None:
            self._paused_total += self._loop.time() - self._paused_at
            self._paused_at = None
        self._notify()

    async def changed(self) -> None:
        await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
